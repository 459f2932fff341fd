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
    SealedOrigin,
    SealedReading,
    choose_sealed_families,
    classify_sealed,
    copyable_instances,
    deal_instances,
    nominal_counts,
    pick_selection,
    sealed_origins,
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


def test_copyable_instances_hold_an_answer_the_lineage_has_and_readings_never_pool():
    answers = {"x1": "cp /a /b", "x2": "cp /a /c", "x3": ""}  # x3: no reference solution
    # the answer is on search (or in the library): copyable, whatever the family it came from
    assert copyable_instances(answers, {"cp /a /b", "ls"}) == ["x1"]
    assert copyable_instances(answers, {""}) == []  # no answer is no copy
    family_of = {"x1": "fam-a", "x2": "fam-a", "x3": "fam-b", "f1": "fam-h"}
    readings = classify_sealed(["x1", "x2", "x3", "f1", "m1"], family_of, ["fam-h"])
    assert readings == {
        SealedReading.INSTANCES: ["x1", "x2", "x3"], SealedReading.FAMILIES: ["f1"], SealedReading.TASKS: ["m1"],
        SealedReading.RESTATED: [], SealedReading.DEALT: [],
    }
    record = ReadingsRecord(readings=readings, copyable=["x1"], family_of=family_of)
    assert record.parts_of_instances() == {COPYABLE: {"x1"}, NEEDS_ADAPTATION: {"x2", "x3"}}
    again = ReadingsRecord.model_validate(record.model_dump(mode="json"))
    assert again.tasks_of(SealedReading.FAMILIES) == {"f1"}


def test_hand_written_sealed_tasks_are_read_by_their_provenance():
    family_of = {"x1": "fam-a", "f1": "fam-h"}
    sealed = ["x1", "f1", "pin", "pin2", "deal"]
    origins = sealed_origins(sealed, family_of, ["fam-h"], pinned={"pin", "pin2"})
    assert origins == {
        "x1": SealedOrigin.FAMILY_INSTANCE, "f1": SealedOrigin.HELD_OUT_FAMILY, "pin": SealedOrigin.PINNED,
        "pin2": SealedOrigin.PINNED, "deal": SealedOrigin.DEALT,
    }
    readings = classify_sealed(sealed, family_of, ["fam-h"], origins, restated={"pin2", "deal"})
    # only a pinned task nothing restates is transfer to a human-written set; a dealt one is read apart
    assert readings[SealedReading.TASKS] == ["pin"] and readings[SealedReading.RESTATED] == ["pin2"]
    assert readings[SealedReading.DEALT] == ["deal"]
    # a record from before provenance was recorded still loads: its hand-written tasks count as pinned
    old = ReadingsRecord.model_validate({"readings": {"tasks": ["m1", "m2"]}, "copyable": []})
    assert old.pinned() == {"m1", "m2"} and old.origins == {} and old.units_of(SealedReading.TASKS) == ({}, "task")


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


def test_a_check_moves_restated_pinned_tasks_and_copyable_instances_and_never_undoes_a_move():
    from mindforge.evaluation.labels import moved_since, relabel

    family_of = {"x1": "fam-a", "x2": "fam-a"}
    sealed = ["x1", "x2", "pin", "pin2", "deal"]
    origins = sealed_origins(sealed, family_of, [], pinned={"pin", "pin2"})
    start = ReadingsRecord(readings=classify_sealed(sealed, family_of, [], origins), family_of=family_of,
                           origins=origins)
    first = relabel(start, restated={"pin": ["library entry e1"], "deal": ["e2"], "x1": ["e3"]}, copyable=["x2", "pin"],
                    event="generation 0: experience oracle round")
    # only a pinned task moves to the restated reading; only an instance becomes copyable
    assert first.readings[SealedReading.RESTATED] == ["pin"] and first.readings[SealedReading.TASKS] == ["pin2"]
    assert first.readings[SealedReading.DEALT] == ["deal"] and first.copyable == ["x2"]
    assert first.restated == {"pin": ["library entry e1"]}
    oracle = "generation 0: experience oracle round"
    assert first.moved_at == {"pin": oracle, "x2": oracle}
    assert moved_since(start, first) == {"restated": ["pin"], "copyable": ["x2"]}
    # a later check adds what it finds and keeps every earlier move with the check that made it
    second = relabel(first, restated={"pin2": ["e4"]}, copyable=[], event="generation 1: Discovery admission")
    assert second.readings[SealedReading.RESTATED] == ["pin", "pin2"] and second.readings[SealedReading.TASKS] == []
    assert second.copyable == ["x2"] and second.moved_at["pin"] == oracle
    assert second.moved_at["pin2"] == "generation 1: Discovery admission"
    again = relabel(second, restated={}, copyable=[], event="generation 1: Discovery admission")
    assert again.checks == second.checks  # a retried check is recorded once
