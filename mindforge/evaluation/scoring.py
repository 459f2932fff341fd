"""The one scorer of every split: a pair's per-task score over its usable attempts.

Every figure MindForge decides on or reports (successor choice, adapter promotion,
sealed lift) goes through :func:`score_tasks`, with one filter
(:func:`mindforge.audit.usable_for_scoring`): an attempt counts when its reward is real -
the verifier ran cleanly and neither the infrastructure, the endpoint nor the harness
failed. Infrastructure and verifier errors are excluded and counted, never scored 0. A
task's score is the mean reward over its usable attempts.

Pure: pydantic and the trial model (the audit predicate is imported on use).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, Field

from mindforge.trials.record import TrialRecord


class PairRef(BaseModel):
    """A model-harness pair: the HCP contract and the adapter served ("" = base weights)."""

    contract_hash: str
    adapter: str = ""

    def matches(self, record: TrialRecord) -> bool:
        """True when ``record`` ran under this pair."""
        return (record.contract_hash or "") == self.contract_hash and record.adapter == self.adapter


class TaskScores(BaseModel):
    """One pair's scores on a task set.

    Attributes:
        scores: task hash -> mean reward over the task's usable attempts, in [0, 1]
            (tasks without a usable attempt are absent).
        counts: task hash -> usable attempts of that task.
        usable_trials: attempts that counted.
        excluded_trials: attempts without a real reward (infra, endpoint, harness or
            verifier errors), left out.
        trial_ids: every attempt read (usable or excluded), sorted.
    """

    scores: dict[str, float] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    usable_trials: int = 0
    excluded_trials: int = 0
    trial_ids: list[str] = Field(default_factory=list)

    @property
    def mean(self) -> float | None:
        """Mean score over the scored tasks (None when none)."""
        return sum(self.scores.values()) / len(self.scores) if self.scores else None


def score_tasks(records: Iterable[TrialRecord], pair: PairRef, tasks: set[str]) -> TaskScores:
    """Per-task mean reward of ``pair`` on ``tasks``, over usable attempts only.

    Args:
        records: trials (others than ``pair``'s on ``tasks`` are ignored).
        pair: the pair scored.
        tasks: the task hashes scored (one split's tasks).

    Returns:
        the scores with usable/excluded counts and the ids of the trials read.
    """
    from mindforge.audit import usable_for_scoring

    rewards: dict[str, list[float]] = defaultdict(list)
    out = TaskScores()
    for r in records:
        if r.task_hash not in tasks or not pair.matches(r):
            continue
        out.trial_ids.append(r.trial_id)
        if usable_for_scoring(r) and r.reward is not None:
            rewards[r.task_hash].append(float(r.reward))
        else:
            out.excluded_trials += 1
    out.usable_trials = sum(len(v) for v in rewards.values())
    out.scores = {t: sum(v) / len(v) for t, v in sorted(rewards.items())}
    out.counts = {t: len(v) for t, v in sorted(rewards.items())}
    out.trial_ids.sort()
    return out
