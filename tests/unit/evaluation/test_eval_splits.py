"""Split assignment: deterministic, stratified by category, never moving a task; the size check."""

from __future__ import annotations

from collections import Counter

import pytest

from mindforge.evaluation import (
    PoolSplit,
    SplitCandidate,
    SplitConfig,
    SplitTooSmallError,
    admission_config,
    assign_splits,
    check_split_sizes,
    split_counts,
)
from mindforge.evaluation.splits import order_key

CATEGORIES = ["files", "text", "counting", "archives", "git", "env"]


def _pool(n: int, categories: list[str] = CATEGORIES) -> list[SplitCandidate]:
    return [
        SplitCandidate(task_hash=f"{i:064x}", task_id=f"task-{i}", category=categories[i % len(categories)])
        for i in range(n)
    ]


def test_defaults_give_five_tasks_to_each_split_on_a_pool_of_30():
    counts = split_counts(assign_splits(_pool(30), SplitConfig(), split_key="lin"))
    assert counts == {PoolSplit.SEARCH: 18, PoolSplit.SELECTION: 6, PoolSplit.SEALED: 6}
    assert check_split_sizes(counts, SplitConfig()) == []


def test_assignment_is_deterministic_in_any_order_and_depends_on_the_lineage():
    pool = _pool(40)
    a = assign_splits(pool, SplitConfig(), split_key="lin")
    assert a == assign_splits(list(reversed(pool)), SplitConfig(), split_key="lin")
    b = assign_splits(pool, SplitConfig(), split_key="other")
    assert split_counts(a) == split_counts(b) and a != b  # same sizes, other tasks


def test_assignment_is_stratified_by_category():
    pool = _pool(60)
    a = assign_splits(pool, SplitConfig(), split_key="lin")
    per = Counter((t.category, a[t.task_hash]) for t in pool)
    for category in CATEGORIES:  # 10 tasks each: 2 sealed, 2 selection, 6 search
        assert (per[(category, PoolSplit.SEALED)], per[(category, PoolSplit.SELECTION)]) == (2, 2)


def test_within_a_category_tasks_go_in_hash_order_sealed_first():
    pool = _pool(10, ["one"])
    a = assign_splits(pool, SplitConfig(), split_key="lin")
    ordered = sorted(pool, key=lambda t: order_key("lin", t.task_hash))
    assert [a[t.task_hash] for t in ordered] == (
        [PoolSplit.SEALED] * 2 + [PoolSplit.SELECTION] * 2 + [PoolSplit.SEARCH] * 6
    )


def test_tasks_admitted_later_keep_the_pool_at_the_fractions_and_never_move_old_ones():
    config = SplitConfig()
    start = _pool(20)
    first = assign_splits(start, config, split_key="lin")
    existing: dict[str, dict[PoolSplit, int]] = {}
    placed = dict(first)
    cats = {t.task_hash: t.category for t in start}
    for gen in range(1, 11):  # one admitted task per generation, in a new category
        new = SplitCandidate(task_hash=f"new-{gen:060x}", task_id=f"g{gen}-t", category="discovered")
        existing = {}
        for h, split in placed.items():
            existing.setdefault(cats.get(h, "discovered"), {}).setdefault(split, 0)
            existing[cats.get(h, "discovered")][split] += 1
        got = assign_splits([new], config, split_key="lin", existing=existing)
        assert set(got) == {new.task_hash}  # only the new task is placed; old ones never move
        placed.update(got)
        cats[new.task_hash] = "discovered"
    counts = split_counts(placed)
    assert counts[PoolSplit.SEALED] == round(30 * 0.2) and counts[PoolSplit.SELECTION] == round(30 * 0.2)


def test_a_retried_admission_decides_the_same_splits():
    existing = {"files": {PoolSplit.SEARCH: 6, PoolSplit.SELECTION: 2, PoolSplit.SEALED: 2}}
    new = _pool(4, ["files"])
    once = assign_splits(new, SplitConfig(), split_key="lin", existing=existing)
    assert once == assign_splits(new, SplitConfig(), split_key="lin", existing=existing)


def test_pinned_tasks_keep_their_split_and_count_towards_the_quota():
    pool = _pool(10, ["one"])
    config = SplitConfig(overrides={"task-0": PoolSplit.SEALED, "task-1": PoolSplit.SEALED})
    a = assign_splits(pool, config, split_key="lin")
    assert a[pool[0].task_hash] == a[pool[1].task_hash] == PoolSplit.SEALED
    assert split_counts(a)[PoolSplit.SEALED] == 2  # the quota of 2 is filled by the pins


def test_a_pool_below_the_minimum_is_an_error_naming_the_split_and_numbers():
    counts = split_counts(assign_splits(_pool(14), SplitConfig(), split_key="lin"))
    with pytest.raises(SplitTooSmallError) as err:
        check_split_sizes(counts, SplitConfig())
    message = str(err.value)
    assert err.value.split == PoolSplit.SELECTION and err.value.size == 3 and err.value.minimum == 5
    assert "selection split would hold 3 task(s), fewer than the minimum of 5" in message and "pool of 14" in message
    warnings = check_split_sizes(counts, SplitConfig(allow_small_splits=True))
    assert len(warnings) == 2 and "selection split holds 3" in warnings[0]


def test_an_empty_split_by_choice_is_not_checked_and_fractions_must_leave_room():
    counts = split_counts(
        assign_splits(_pool(10), SplitConfig(sealed_fraction=0.0, selection_fraction=0.5), split_key="x")
    )
    assert counts[PoolSplit.SEALED] == 0
    assert check_split_sizes(counts, SplitConfig(sealed_fraction=0.0, selection_fraction=0.5)) == []
    with pytest.raises(ValueError, match="room for the search split"):
        SplitConfig(selection_fraction=0.5, sealed_fraction=0.5)


def test_tasks_that_join_later_never_go_to_the_frozen_sealed_split():
    """Discovery's admissions go to search or selection (selection keeps its share of the whole pool)."""
    config = SplitConfig(overrides={"task-1": PoolSplit.SEALED})
    start = _pool(20)
    placed = assign_splits(start, config, split_key="lin")
    sealed_at_start = {h for h, s in placed.items() if s == PoolSplit.SEALED}
    cats = {t.task_hash: t.category for t in start}
    joining = admission_config(config)
    assert joining.sealed_fraction == 0.0 and joining.overrides == {}
    assert joining.selection_fraction == config.selection_fraction
    for gen in range(1, 6):  # four admitted tasks per generation, one pinned to sealed by id
        new = [
            SplitCandidate(task_hash=f"{gen:030x}{i:034x}", task_id="task-1" if i == 0 else f"g{gen}-t{i}", category=c)
            for i, c in enumerate(["files", "text", "discovered", "discovered"])
        ]
        existing: dict[str, dict[PoolSplit, int]] = {}
        for h, split in placed.items():
            per = existing.setdefault(cats[h], {})
            per[split] = per.get(split, 0) + 1
        got = assign_splits(new, joining, split_key="lin", existing=existing)
        assert PoolSplit.SEALED not in got.values()
        placed.update(got)
        cats.update({t.task_hash: t.category for t in new})
    assert {h for h, s in placed.items() if s == PoolSplit.SEALED} == sealed_at_start
    assert split_counts(placed)[PoolSplit.SELECTION] == round(len(placed) * config.selection_fraction)
