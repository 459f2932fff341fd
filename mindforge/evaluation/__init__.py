"""Evidence: the three splits of a task pool, the one scorer, paired lifts and the decisions.

- :mod:`~mindforge.evaluation.splits` - search / selection / sealed, and how a task is
  assigned to one;
- :mod:`~mindforge.evaluation.scoring` - the one per-task scorer every split uses;
- :mod:`~mindforge.evaluation.stats` - Wilson intervals and the paired bootstrap;
- :mod:`~mindforge.evaluation.lift` - the paired lift of one pair over another;
- :mod:`~mindforge.evaluation.decisions` - successor contract and adapter promotion,
  decided on the selection split only.

Pure: no Temporal, Ray or store imports.
"""

from __future__ import annotations

from mindforge.evaluation.decisions import (
    PromotionDecision,
    SuccessorChoice,
    choose_successor,
    decide_promotion,
)
from mindforge.evaluation.lift import LiftReport, paired_lift
from mindforge.evaluation.scoring import PairRef, TaskScores, score_tasks
from mindforge.evaluation.splits import (
    PoolSplit,
    SplitCandidate,
    SplitConfig,
    SplitTooSmallError,
    admission_config,
    assign_splits,
    check_split_sizes,
    split_counts,
)
from mindforge.evaluation.stats import Interval, bootstrap_lift, wilson_interval

__all__ = [
    "Interval",
    "LiftReport",
    "PairRef",
    "PoolSplit",
    "PromotionDecision",
    "SplitCandidate",
    "SplitConfig",
    "SplitTooSmallError",
    "SuccessorChoice",
    "TaskScores",
    "admission_config",
    "assign_splits",
    "bootstrap_lift",
    "check_split_sizes",
    "choose_successor",
    "decide_promotion",
    "paired_lift",
    "score_tasks",
    "split_counts",
    "wilson_interval",
]
