"""Family curricula, pure: held-out families, where drawn instances go, the three sealed readings, and
the selection split sized by the gates' power."""

from __future__ import annotations

from collections import Counter

import pytest

from mindforge.evaluation.curriculum import (
    COPYABLE,
    NEEDS_ADAPTATION,
    DrawnInstance,
    ReadingsRecord,
    SealedReading,
    choose_sealed_families,
    classify_sealed,
    copyable_instances,
    deal_instances,
    nominal_counts,
    pick_selection,
)
from mindforge.evaluation.power import GateCannotPassError, configured_gates
from mindforge.evaluation.sizing import size_selection
from mindforge.evaluation.splits import PoolSplit

FAMILIES = [f"fam-{c}" for c in "abcdefgh"]


def test_held_out_families_are_seeded_by_the_lineage_and_leave_some_to_train_on():
    first = choose_sealed_families(FAMILIES, 2, key="lin-1")
    assert len(first) == 2 and set(first) <= set(FAMILIES)
    assert choose_sealed_families(list(reversed(FAMILIES)), 2, key="lin-1") == first  # order of the input is moot
    others = {tuple(choose_sealed_families(FAMILIES, 2, key=f"lin-{i}")) for i in range(20)}
    assert len(others) > 5  # another lineage holds out other families
    assert choose_sealed_families(FAMILIES, 0, key="x") == []
    with pytest.raises(ValueError, match="at least one must stay"):
        choose_sealed_families(FAMILIES, len(FAMILIES), key="x")


def _drawn(family: str, n: int, levels=("easy", "medium", "hard")) -> list[DrawnInstance]:
    return [
        DrawnInstance(instance_id=f"{family}-{i:08x}", family=family, level=levels[i % len(levels)]) for i in range(n)
    ]


def test_instances_are_dealt_per_family_and_level_and_held_out_families_are_all_sealed():
    drawn = _drawn("fam-a", 12) + _drawn("fam-b", 12) + _drawn("fam-c", 5)
    drawn = pick_selection(drawn, 3, key="lin")
    splits = deal_instances(drawn, sealed_fraction=0.25, key="lin", sealed_families=["fam-c"])
    per = Counter((d.family, splits[d.instance_id]) for d in drawn)
    assert per[("fam-c", PoolSplit.SEALED)] == 5 and per[("fam-c", PoolSplit.SEARCH)] == 0
    for fam in ("fam-a", "fam-b"):
        assert per[(fam, PoolSplit.SELECTION)] == 3
        assert (
            per[(fam, PoolSplit.SEALED)] in (2, 3) and per[(fam, PoolSplit.SEARCH)] + per[(fam, PoolSplit.SEALED)] == 9
        )
    # selection takes its instances from every level
    chosen = [d for d in drawn if d.role == "selection" and d.family == "fam-a"]
    assert {d.level for d in chosen} == {"easy", "medium", "hard"}
    # deterministic, and keyed by the lineage
    assert deal_instances(drawn, sealed_fraction=0.25, key="lin", sealed_families=["fam-c"]) == splits
    other = deal_instances(pick_selection(drawn, 3, key="other"), sealed_fraction=0.25, key="other")
    assert other != splits


def test_copyable_instances_share_a_search_sibling_solution_and_readings_never_pool():
    solutions = {
        "s1": ("fam-a", PoolSplit.SEARCH, "sol-1"),
        "x1": ("fam-a", PoolSplit.SEALED, "sol-1"),  # copyable: a search instance has its solution
        "x2": ("fam-a", PoolSplit.SEALED, "sol-2"),  # needs adaptation
        "x3": ("fam-b", PoolSplit.SEALED, "sol-1"),  # another family's solution does not count
        "q1": ("fam-a", PoolSplit.SELECTION, "sol-2"),  # selection siblings do not count either
    }
    assert copyable_instances(solutions) == ["x1"]
    family_of = {"x1": "fam-a", "x2": "fam-a", "x3": "fam-b", "f1": "fam-h"}
    readings = classify_sealed(["x1", "x2", "x3", "f1", "m1"], family_of, ["fam-h"])
    assert readings == {
        SealedReading.INSTANCES: ["x1", "x2", "x3"], SealedReading.FAMILIES: ["f1"], SealedReading.TASKS: ["m1"],
    }
    record = ReadingsRecord(readings=readings, copyable=["x1"], family_of=family_of)
    assert record.parts_of_instances() == {COPYABLE: {"x1"}, NEEDS_ADAPTATION: {"x2", "x3"}}
    again = ReadingsRecord.model_validate(record.model_dump(mode="json"))
    assert again.tasks_of(SealedReading.FAMILIES) == {"f1"}


def test_nominal_counts_add_up_the_curriculum():
    counts = nominal_counts(12, 2, instances=4, selection_instances=3, sealed_fraction=0.25)
    assert counts == {PoolSplit.SEARCH: 36, PoolSplit.SELECTION: 36, PoolSplit.SEALED: 12 + 8}


def _gates(k: int):
    return configured_gates(
        k, successor=True, promotion=True, attempts=2, min_tasks=5, candidates=2, race_budget=4, margin=0.0
    )


def test_selection_is_sized_so_every_gate_detects_the_target_lift():
    size = size_selection(_gates, families=12, baseline=0.0)
    assert size.per_family >= 1 and size.tasks == 12 * size.per_family
    assert min(size.power.values()) >= 0.8
    smaller = size_selection(_gates, families=12, baseline=0.0, lift=0.30)
    assert smaller.per_family < size.per_family  # a larger lift needs fewer tasks
    one_less = size_selection(_gates, families=12, fixed_tasks=size.tasks - 12, baseline=0.0)
    assert one_less.per_family == 1  # hand-written selection tasks count towards the size
    assert "0.10" in size.describe() and "passing nothing" in size.describe()


def test_a_size_that_cannot_reach_the_power_is_refused():
    with pytest.raises(GateCannotPassError, match="--selection-instances"):
        size_selection(_gates, families=1, baseline=0.5, max_per_family=3, draws=200)
