"""Planning the trials that evaluate pairs on one split: the same tasks and attempts for every pair.

Selection (the promotion gate) and sealed measurement (the sealed lift) compare pairs
task by task, so every pair runs every task of the split ``attempts`` times. The plan is
a pure function of the pairs and the split's tasks; the activities
(:mod:`workers.evaluation_activities`) give each planned trial its deterministic id and
task path from the store. A pair listed twice is planned once, and a pair evaluated twice
on the same split in one generation (the successor check's winner, then the promotion
gate's baseline) gets the same ids, so ``run_trials`` runs it once.

Pure: pydantic and the shared enums.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel

from mindforge.domain import TrialStage
from mindforge.evaluation.scoring import PairRef
from mindforge.evaluation.splits import PoolSplit

#: trial stage that evaluates pairs on each non-search split
STAGE_OF_SPLIT = {PoolSplit.SELECTION: TrialStage.SELECTION, PoolSplit.SEALED: TrialStage.SEALED}


class PairTrial(BaseModel):
    """One planned evaluation trial: a pair, a task, an attempt.

    Attributes:
        contract_hash / adapter: the pair.
        task_hash: the task's content hash.
        attempt: 0-based attempt index within the task's group.
    """

    contract_hash: str
    adapter: str = ""
    task_hash: str
    attempt: int


def pair_stage(split: PoolSplit) -> TrialStage:
    """The trial stage that evaluates pairs on ``split``.

    Raises:
        ValueError: ``split`` is the search split (pairs are never evaluated on it).
    """
    if split not in STAGE_OF_SPLIT:
        raise ValueError(f"pairs are evaluated on the selection or sealed split, not {split.value!r}")
    return STAGE_OF_SPLIT[split]


def plan_pair_trials(
    pairs: Iterable[PairRef], task_hashes: Sequence[str], *, attempts: int, batch_size: int,
    attempts_of: Mapping[str, int] | None = None,
) -> list[list[PairTrial]]:
    """Batches of trials of every pair on every task, ``attempts`` attempts each.

    Args:
        pairs: the pairs, in order (a pair listed twice is planned once).
        task_hashes: the split's tasks, in the order their trials are planned.
        attempts: attempts per task and pair.
        batch_size: most trials per batch (>= 1); a batch holds one pair's trials.
        attempts_of: task hash -> its own attempts per pair, in place of ``attempts`` (the
            sealed-instances reading's tasks, sized by its power); other tasks keep ``attempts``.

    Returns:
        the batches, pair by pair; within a pair, task by task, then attempt by attempt.
        Empty when there are no tasks.
    """
    batches: list[list[PairTrial]] = []
    for contract_hash, adapter in dict.fromkeys((p.contract_hash, p.adapter) for p in pairs):
        planned = [
            PairTrial(contract_hash=contract_hash, adapter=adapter, task_hash=t, attempt=a)
            for t in task_hashes
            for a in range((attempts_of or {}).get(t, attempts))
        ]
        batches += [planned[i : i + batch_size] for i in range(0, len(planned), batch_size)]
    return batches
