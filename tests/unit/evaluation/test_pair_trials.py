"""Evaluation trials of pairs: the same tasks and attempts for every pair, batched per pair, search refused."""

from __future__ import annotations

import pytest

from mindforge.domain import TrialStage
from mindforge.evaluation import PairRef, PoolSplit
from mindforge.evaluation.pair_trials import pair_stage, plan_pair_trials

A, B = PairRef(contract_hash="a" * 64), PairRef(contract_hash="b" * 64, adapter="rev1")


def test_every_pair_runs_every_task_and_attempt_in_batches_of_one_pair() -> None:
    batches = plan_pair_trials([A, B, A], ["h-t0", "h-t1", "h-t2"], attempts=2, batch_size=4)
    assert [len(b) for b in batches] == [4, 2, 4, 2]  # A listed twice is planned once
    assert all(len({(t.contract_hash, t.adapter) for t in b}) == 1 for b in batches)
    a_trials = [(t.task_hash, t.attempt) for b in batches[:2] for t in b]
    b_trials = [(t.task_hash, t.attempt) for b in batches[2:] for t in b]
    assert a_trials == b_trials == [(f"h-t{i}", a) for i in range(3) for a in range(2)]
    assert batches[2][0].adapter == "rev1"


def test_no_tasks_plan_nothing_and_search_is_never_a_pair_split() -> None:
    assert plan_pair_trials([A, B], [], attempts=3, batch_size=8) == []
    assert pair_stage(PoolSplit.SELECTION) == TrialStage.SELECTION
    assert pair_stage(PoolSplit.SEALED) == TrialStage.SEALED
    with pytest.raises(ValueError, match="not 'search'"):
        pair_stage(PoolSplit.SEARCH)


def test_tasks_with_their_own_attempts_get_them_and_every_pair_the_same() -> None:
    batches = plan_pair_trials([A, B], ["h-t0", "h-t1", "h-t2"], attempts=1, batch_size=16, attempts_of={"h-t1": 3})
    for batch in batches:
        assert [(t.task_hash, t.attempt) for t in batch] == [
            ("h-t0", 0), ("h-t1", 0), ("h-t1", 1), ("h-t1", 2), ("h-t2", 0)
        ]
    assert plan_pair_trials([A], ["h-t0"], attempts=2, batch_size=4, attempts_of={}) == plan_pair_trials(
        [A], ["h-t0"], attempts=2, batch_size=4
    )
