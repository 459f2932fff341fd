"""The racing search: a shortlist from data, probes before drops, the fix found, coverage kept, pass-rate order.

Trial outcomes come from the simulated worlds of :mod:`benchmarks.simulate` (a
:class:`~benchmarks.simulate.WorldOracle` stands in for sandbox + policy); the shortlist,
the race, the predictions and the ranking are the product's code. Every job id is fixed:
the allocator's draws are seeded by it, so each test takes the same path on every run.
"""

from __future__ import annotations

from benchmarks.simulate import WorldOracle, global_world, sim_snapshot, today_world
from mindforge.hcp import load_contract
from mindforge.search import (
    Edit,
    SearchBudget,
    SearchConfig,
    SearchState,
    StepResults,
    init_search,
    make_candidate,
    observe,
    plan_step,
)
from mindforge.search.race_models import SeedChain
from mindforge.search.state import CellStats
from mindforge.search.summary import ranked_candidates, search_summary
from tests.conftest import REPO


def run_world(world, *, seed: int, budget: int, strategy: str = "race", job_id: str | None = None, check=None):
    """Run a search in ``world`` to its budget (8 cells a step, the main job's); ``check(state)`` after each step."""
    oracle = WorldOracle(world, seed=seed)
    config = SearchConfig(seed=seed, strategy=strategy, cells_per_step=8, experience_snapshot=world.snapshot_json)
    state = init_search(
        job_id=job_id or f"race-{seed}", root=world.root, tasks=world.failing,
        budget=SearchBudget(max_attempts=budget), config=config,
    )  # fmt: skip
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
        if check is not None:
            check(state)
    return state, oracle


def attempts_of(state: SearchState, contract_hash: str) -> int:
    index = next(i for i, c in enumerate(state.candidates) if c.contract_hash == contract_hash)
    return sum(s.attempts for key, s in state.cells.items() if key.endswith(f":{index}"))


def test_the_shortlist_comes_from_data_the_library_and_its_variants_and_the_previous_entrants() -> None:
    world = global_world(0, 0.3)
    snapshot = world.snapshot_json
    config = SearchConfig(
        experience_snapshot=snapshot,
        seeds=[SeedChain(edits=[*load_previous_chain(snapshot)], note="generation 0 entrant")],
    )
    state = init_search(
        job_id="shortlist", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=96), config=config
    )
    entries = [(e.reason, e.candidate.edit_keys) for e in state.entrants]
    library = world.fix_key
    assert entries[0] == ("previous", ("top_p=0.8", library))  # re-based: its stale library points at the latest
    assert entries[1] == ("library", (library,))
    assert [keys for reason, keys in entries[2:]] == [
        (library, "action_format=command"), (library, "stop=newline"), (library, "mode=single_command")
    ]  # fmt: skip
    assert all(e.prediction is not None and e.prediction.scope == "general" for e in state.entrants)
    # nothing of the audit: every task failed as the model's or as a cut output, none points at the library
    assert all(e.reason in ("previous", "library", "library_variant") for e in state.entrants)


def load_previous_chain(latest_snapshot: str):
    """A chain the previous generation raced: a sampling edit and the library as it was then (an older snapshot)."""
    from mindforge.experience import ExperienceSnapshot
    from mindforge.search.edits import Edit, snapshot_edit

    older = ExperienceSnapshot(entries=sim_snapshot().entries[:2])
    assert older.to_json() != latest_snapshot
    return [Edit(op="top_p", value=0.8), snapshot_edit(older.to_json())]


def test_every_shortlisted_candidate_gets_its_probe_attempts_before_any_is_dropped() -> None:
    world = global_world(1, 0.1)
    drops: list[int] = []

    def check(state: SearchState) -> None:
        for left in (e for e in state.entrants if e.left_step == state.step - 1):
            drops.append(left.left_step or 0)
            for entrant in state.entrants:
                if entrant.joined_step < (left.left_step or 0) or entrant.joined_step == 0:
                    assert attempts_of(state, entrant.candidate.contract_hash) >= state.config.probe_attempts

    state, _oracle = run_world(world, seed=1, budget=96, check=check)
    assert drops, "the race dropped no entrant: the probe rule was never put to the test"
    assert state.config.probe_attempts == 3


def test_in_the_global_fix_world_at_a_fixed_seed_the_fix_is_the_entrant() -> None:
    """One edit (the library) lifts every task at 0.1 among 34 decoys at 0 or 0.02; the audit points elsewhere."""
    world = global_world(0, 0.1)
    assert world.fix_key is not None and world.fix_key.startswith("experience_snapshot=")
    state, oracle = run_world(world, seed=0, budget=48)
    entrant = ranked_candidates(state)[0]
    assert world.has_fix(oracle.edit_keys[entrant])
    # today's allocator, on the same world and seed, does not find it: the audit points at decoys
    old, old_oracle = run_world(world, seed=0, budget=48, strategy="adaptive")
    assert not any(world.has_fix(old_oracle.edit_keys[h]) for h in ranked_candidates(old)[:1])


def test_in_todays_world_at_a_fixed_seed_coverage_is_no_lower_than_before() -> None:
    """Each task unlocked by its own edit at 0.6, hinted by the audit: the world the coverage allocator was made for."""
    world = today_world()
    race, _ = run_world(world, seed=0, budget=48)
    before, _ = run_world(world, seed=0, budget=48, strategy="adaptive")
    assert race.covered >= before.covered > 0
    summary = search_summary(race)
    assert summary["covered"] == race.covered and summary["ranking"]  # coverage is reported beside the objective


def test_ranked_candidates_go_by_pass_rate_not_by_tasks_solved() -> None:
    """A contract that passed two tasks once in ten tries each ranks below one that passed half its trials on one."""
    world = global_world(0, 0.3)
    state = init_search(
        job_id="rank", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=96),
        config=SearchConfig(strategy="adaptive"),
    )  # fmt: skip
    broad, sharp = (
        make_candidate(world.root, [Edit(op="temperature", value=0.0)], origin="operator", step=0),
        make_candidate(world.root, [Edit(op="top_p", value=0.8)], origin="operator", step=0),
    )
    state = state.model_copy(
        update={
            "candidates": [broad, sharp],
            "cells": {
                "0:0": CellStats(attempts=10, usable=10, successes=1),
                "1:0": CellStats(attempts=10, usable=10, successes=1),
                "2:1": CellStats(attempts=20, usable=20, successes=10),
            },
        }
    )
    assert ranked_candidates(state) == [sharp.contract_hash, broad.contract_hash]
    assert search_summary(state)["best_single"]["contract_hash"] == broad.contract_hash  # coverage says otherwise


def test_old_stored_states_load_and_keep_their_allocator() -> None:
    """A state stored before the race (no race fields, strategy ``adaptive``) loads and goes on as it was."""
    world = today_world()
    state, _ = run_world(world, seed=2, budget=16, strategy="adaptive")
    stored = state.model_dump(mode="json")
    for key in ("common_order", "entrants", "race", "predictions"):
        stored.pop(key)
    for cell in stored["cells"].values():
        cell.pop("progress_rules", None)
    old = SearchState.model_validate(stored)
    assert old.config.strategy == "adaptive" and not old.entrants
    later = old.model_copy(update={"budget": SearchBudget(max_attempts=32), "stop_reason": None})
    plan = plan_step(later)
    assert plan.cells and all(c.purpose == "explore" for c in plan.cells)
    assert ranked_candidates(old) == ranked_candidates(state)


def test_the_shipped_smollm2_root_with_a_library_races_its_variants() -> None:
    root = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    world = global_world(3, 0.3)
    assert world.root.content_hash == root.content_hash
    state, oracle = run_world(world, seed=3, budget=96)
    summary = search_summary(state)
    assert summary["race"]["entrants"][0]["reason"] == "library"
    assert world.has_fix(oracle.edit_keys[summary["ranking"][0]["contract_hash"]])
    assert summary["pareto_front"]
