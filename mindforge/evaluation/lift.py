"""Paired lift of one pair over another on one split, with its bootstrap interval.

Both pairs run the same tasks with the same attempts in the same generation. The lift is
the mean over tasks of ``successor score - parent score`` (scores from
:func:`mindforge.evaluation.scoring.score_tasks`) with a 95% interval: given each task's
unit (its family, or the task itself), the interval by unit of a sealed reading
(:func:`mindforge.evaluation.intervals.clustered_lift_interval`); otherwise - the gates -
the percentile bootstrap clustered by task (:func:`mindforge.evaluation.stats.bootstrap_lift`).
Tasks lacking a usable attempt under either pair are left out of the pairing and counted.

Pure: pydantic, numpy (through the statistics) and the trial model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

from mindforge.evaluation.intervals import METHOD as UNIT_METHOD
from mindforge.evaluation.intervals import clustered_lift_interval
from mindforge.evaluation.scoring import PairRef, score_tasks
from mindforge.evaluation.splits import PoolSplit
from mindforge.evaluation.stats import bootstrap_lift
from mindforge.trials.record import TrialRecord

#: what a lift was measured against: the generation's parent pair, or generation 0's pair
Baseline = Literal["parent", "root"]
#: the gates' interval method, as figures print it
BOOTSTRAP_METHOD = "percentile bootstrap by task"


class LiftReport(BaseModel):
    """The paired lift of ``successor`` over ``parent`` on one split.

    Attributes:
        measured_on: the split the trials ran on (``sealed`` for every reported lift).
        baseline: ``parent`` (the generation's parent pair) or ``root`` (generation 0's).
        mean / lo / hi: paired mean lift (reward units) and its bootstrap interval; None
            when no task could be paired.
        confidence: interval level.
        parent_score / successor_score: mean over the paired tasks of each pair's score.
        n_tasks: tasks paired; n_trials: usable attempts of both pairs on them.
        unpaired_tasks: tasks with a usable attempt under only one of the pairs.
        parent_trials / successor_trials: usable attempts of each pair.
        excluded_trials: attempts without a real reward (both pairs).
        resamples / seed: bootstrap settings.
        method: how the interval was made (:data:`BOOTSTRAP_METHOD`, or
            :data:`mindforge.evaluation.intervals.METHOD` by unit).
        unit / n_units: what the interval's independent unit is (``task`` or ``family``) and
            how many of them the paired tasks hold.
        per_task: task hash -> ``{"parent": score, "successor": score}`` (paired tasks).
        trial_ids: every trial read (both pairs), sorted.
        parent / successor: the pairs compared.
        reason: why there is no figure, when ``mean`` is None.
    """

    measured_on: PoolSplit
    baseline: Baseline = "parent"
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    confidence: float = 0.95
    parent_score: float | None = None
    successor_score: float | None = None
    n_tasks: int = 0
    n_trials: int = 0
    unpaired_tasks: int = 0
    parent_trials: int = 0
    successor_trials: int = 0
    excluded_trials: int = 0
    resamples: int = 0
    seed: int = 0
    method: str = BOOTSTRAP_METHOD
    unit: str = "task"
    n_units: int = 0
    per_task: dict[str, dict[str, float]] = Field(default_factory=dict)
    trial_ids: list[str] = Field(default_factory=list)
    parent: PairRef
    successor: PairRef
    reason: str = ""

    def summary(self) -> dict[str, float | int | str | None]:
        """The reported figure.

        Returns:
            ``{"mean", "lo", "hi", "n_tasks", "n_trials", "measured_on", "baseline", "unit",
            "n_units", "method"}``.
        """
        return {
            "mean": self.mean,
            "lo": self.lo,
            "hi": self.hi,
            "n_tasks": self.n_tasks,
            "n_trials": self.n_trials,
            "measured_on": self.measured_on.value,
            "baseline": self.baseline,
            "unit": self.unit,
            "n_units": self.n_units,
            "method": self.method,
        }


def paired_lift(
    records: Iterable[TrialRecord],
    parent: PairRef,
    successor: PairRef,
    tasks: set[str],
    *,
    measured_on: PoolSplit,
    baseline: Baseline = "parent",
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    units: Mapping[str, str] | None = None,
    unit: str = "task",
) -> LiftReport:
    """The successor's lift over the parent on ``tasks``, paired by task.

    Args:
        records: trials of both pairs (others are ignored).
        parent / successor: the pairs.
        tasks: the split's task hashes.
        measured_on: the split ``tasks`` are.
        baseline: what ``parent`` is (the generation's parent, or generation 0's pair).
        resamples / seed / confidence: bootstrap settings (``confidence`` also the level by unit).
        units: task hash -> its unit (a task missing from it is its own unit); given, the
            interval is by unit (:func:`~mindforge.evaluation.intervals.clustered_lift_interval`),
            else the percentile bootstrap by task (the gates' rule).
        unit: what a unit is, in words (``family`` or ``task``).

    Returns:
        the report; ``mean`` is None (with ``reason``) when no task has usable attempts
        under both pairs.
    """
    records = list(records)
    p = score_tasks(records, parent, tasks)
    s = score_tasks(records, successor, tasks)
    paired = sorted(set(p.scores) & set(s.scores))
    report = LiftReport(
        measured_on=measured_on,
        baseline=baseline,
        parent=parent,
        successor=successor,
        confidence=confidence,
        n_tasks=len(paired),
        unpaired_tasks=len(set(p.scores) ^ set(s.scores)),
        parent_trials=p.usable_trials,
        successor_trials=s.usable_trials,
        excluded_trials=p.excluded_trials + s.excluded_trials,
        resamples=resamples,
        seed=seed,
        per_task={t: {"parent": p.scores[t], "successor": s.scores[t]} for t in paired},
        trial_ids=sorted(set(p.trial_ids) | set(s.trial_ids)),
    )
    if not tasks:
        report.reason = f"the lineage has no {measured_on.value} tasks"
        return report
    if not paired:
        report.reason = f"no {measured_on.value} task has a usable attempt under both pairs"
        return report
    parent_list = [p.scores[t] for t in paired]
    successor_list = [s.scores[t] for t in paired]
    report.n_trials = sum(p.counts[t] + s.counts[t] for t in paired)
    if units is None:
        report.n_units = len(paired)
        report.mean, report.lo, report.hi = bootstrap_lift(
            parent_list, successor_list, n=resamples, seed=seed, confidence=confidence
        )
    else:
        interval = clustered_lift_interval(
            parent_list, successor_list, [units.get(t, t) for t in paired],
            parent_trials=sum(p.counts[t] for t in paired), child_trials=sum(s.counts[t] for t in paired),
            confidence=confidence,
        )
        report.mean, report.lo, report.hi = interval.mean, interval.lo, interval.hi
        report.method, report.unit, report.n_units = UNIT_METHOD, unit, interval.units
    report.parent_score = sum(parent_list) / len(paired)
    report.successor_score = sum(successor_list) / len(paired)
    return report
