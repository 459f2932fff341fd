"""Evidence: the three splits of a task pool, the one scorer, paired lifts and the decisions.

- :mod:`~mindforge.evaluation.splits` - search / selection / sealed, and how a task is
  assigned to one;
- :mod:`~mindforge.evaluation.stages` - the split each trial stage runs on, enforced;
- :mod:`~mindforge.evaluation.scoring` - the one per-task scorer every split uses;
- :mod:`~mindforge.evaluation.stats` - Wilson intervals, the paired bootstrap and trend slopes;
- :mod:`~mindforge.evaluation.lift` - the paired lift of one pair over another;
- :mod:`~mindforge.evaluation.gate` - the gates' one rule: a gain (mean above 0, lower bound
  above 0; Bonferroni over several candidates), never a tie, and "cannot compare";
- :mod:`~mindforge.evaluation.decisions` - successor contract and adapter promotion,
  decided on the selection split only.
- :mod:`~mindforge.evaluation.race` - the successor race: one or two candidates against the
  parent, stopped once its outcome is settled (exact curtailment);
- :mod:`~mindforge.evaluation.pair_trials` - the trials that evaluate pairs on the
  selection or sealed split (same tasks, same attempts);
- :mod:`~mindforge.evaluation.power` - each gate's minimum detectable lift at 80% power.

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
from mindforge.evaluation.stages import StageSplitError, check_stage_split, split_of_stage
from mindforge.evaluation.stats import Interval, Slope, bootstrap_lift, ols_slope, wilson_interval, within_task_slope

__all__ = [
    "Interval",
    "Slope",
    "LiftReport",
    "PairRef",
    "PoolSplit",
    "PromotionDecision",
    "SplitCandidate",
    "SplitConfig",
    "SplitTooSmallError",
    "StageSplitError",
    "SuccessorChoice",
    "TaskScores",
    "admission_config",
    "assign_splits",
    "bootstrap_lift",
    "ols_slope",
    "check_stage_split",
    "check_split_sizes",
    "choose_successor",
    "decide_promotion",
    "paired_lift",
    "score_tasks",
    "split_counts",
    "split_of_stage",
    "wilson_interval",
    "within_task_slope",
]
