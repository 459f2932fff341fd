"""Cross-generation lift: a successor pair against its parent on held-out tasks.

Both pairs run the same held-out tasks in the same run. A task's score under a pair is
its mean reward over the attempts with a real reward (:func:`mindforge.audit.usable_for_search`:
infrastructure and verifier errors never count, and are never read as 0). The lift is
the mean over tasks of ``successor - parent``, paired by task, with a percentile
bootstrap interval over tasks (:func:`mindforge.ledger.bootstrap_lift`). Tasks that lack
a usable attempt under either pair are left out of the pairing and counted.

Pure: pydantic, numpy (through the ledger) and the trial model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, Field

from mindforge.trial import TrialRecord


class PairRef(BaseModel):
    """A model-harness pair: the HCP contract and the adapter served ("" = base weights)."""

    contract_hash: str
    adapter: str = ""

    def matches(self, record: TrialRecord) -> bool:
        """True when ``record`` ran under this pair."""
        return (record.contract_hash or "") == self.contract_hash and record.adapter == self.adapter


class LiftReport(BaseModel):
    """Held-out lift of a successor over its parent.

    Attributes:
        mean / lo / hi: paired mean lift (successor - parent, reward units) and its
            bootstrap interval; None when no task could be paired.
        confidence: interval level.
        parent_score / successor_score: mean over the paired tasks of each pair's
            per-task score; None when no task could be paired.
        n_tasks: tasks paired.
        unpaired_tasks: held-out tasks without a usable attempt under one of the pairs.
        parent_trials / successor_trials: usable held-out attempts of each pair.
        excluded_trials: held-out attempts without a real reward (both pairs).
        resamples / seed: bootstrap settings.
        per_task: task hash -> ``{"parent": score, "successor": score}`` (paired tasks).
        parent / successor: the pairs compared.
        reason: why no figure exists, when ``mean`` is None.
    """

    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    confidence: float = 0.95
    parent_score: float | None = None
    successor_score: float | None = None
    n_tasks: int = 0
    unpaired_tasks: int = 0
    parent_trials: int = 0
    successor_trials: int = 0
    excluded_trials: int = 0
    resamples: int = 0
    seed: int = 0
    per_task: dict[str, dict[str, float]] = Field(default_factory=dict)
    parent: PairRef
    successor: PairRef
    reason: str = ""


def task_scores(records: Iterable[TrialRecord], pair: PairRef, tasks: set[str]) -> tuple[dict[str, float], int, int]:
    """Per-task mean reward of ``pair`` on ``tasks``.

    Returns:
        ``(task hash -> mean reward, usable attempts, attempts without a real reward)``.
    """
    from mindforge.audit import usable_for_search

    rewards: dict[str, list[float]] = defaultdict(list)
    excluded = 0
    for r in records:
        if r.task_hash not in tasks or not pair.matches(r):
            continue
        if usable_for_search(r) and r.reward is not None:
            rewards[r.task_hash].append(float(r.reward))
        else:
            excluded += 1
    usable = sum(len(v) for v in rewards.values())
    return {t: sum(v) / len(v) for t, v in rewards.items()}, usable, excluded


def heldout_lift(
    records: Iterable[TrialRecord],
    parent: PairRef,
    successor: PairRef,
    held_out: set[str],
    *,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> LiftReport:
    """The successor's lift over the parent on held-out tasks, paired by task.

    Args:
        records: held-out trials of both pairs (others are ignored).
        parent / successor: the pairs.
        held_out: the held-out task hashes.
        resamples: bootstrap resamples.
        seed: bootstrap seed.
        confidence: interval level in (0, 1).

    Returns:
        the report; ``mean`` is None (with ``reason``) when no task has usable attempts
        under both pairs.
    """
    from mindforge.ledger import bootstrap_lift

    records = list(records)
    p_scores, p_n, p_x = task_scores(records, parent, held_out)
    s_scores, s_n, s_x = task_scores(records, successor, held_out)
    paired = sorted(set(p_scores) & set(s_scores))
    touched = set(p_scores) | set(s_scores)
    report = LiftReport(
        parent=parent,
        successor=successor,
        confidence=confidence,
        n_tasks=len(paired),
        unpaired_tasks=len(touched) - len(paired),
        parent_trials=p_n,
        successor_trials=s_n,
        excluded_trials=p_x + s_x,
        resamples=resamples,
        seed=seed,
        per_task={t: {"parent": p_scores[t], "successor": s_scores[t]} for t in paired},
    )
    if not held_out:
        report.reason = "the lineage has no held-out tasks"
        return report
    if not paired:
        report.reason = "no held-out task has a usable attempt under both pairs"
        return report
    parent_list = [p_scores[t] for t in paired]
    successor_list = [s_scores[t] for t in paired]
    report.mean, report.lo, report.hi = bootstrap_lift(
        parent_list, successor_list, n=resamples, seed=seed, confidence=confidence
    )
    report.parent_score = sum(parent_list) / len(paired)
    report.successor_score = sum(successor_list) / len(paired)
    return report
