"""A fix the audit does not point at: once the edits it names failed a task, the others get their turn.

In the e2e search world (``tests/e2e/test_search_lineage.py``) one task's fix was an edit
no audit rule names; the race spent 109 of 160 trials on that task, on compositions of the
edits the audit named (each of which had already failed it), and never tried the fix.
Here the same situation in simulation (:func:`benchmarks.simulate.global_world` with the
fix off the shortlist, made certain: the drawn operator edit passes every task): a task
whose named edits each ran ``max_attempts_per_cell`` attempts without a pass has its hint
dropped, so every single edit is tried on it before compositions are.
"""

from __future__ import annotations

from benchmarks.simulate import WorldOracle, global_world
from mindforge.search import SearchBudget, SearchConfig, StepResults, init_search, observe, plan_step
from mindforge.search.affinity import affinity
from mindforge.search.allocator import _single_edits, root_contract
from mindforge.search.arms import Arms, _Context, offer_new_arms
from mindforge.search.state import CellStats


def _run(seed: int, budget: int) -> tuple[int, int]:
    world = global_world(seed, 1.0, n_tasks=5, fix="operator")
    oracle = WorldOracle(world, seed=seed)
    config = SearchConfig(seed=seed, cells_per_step=8, experience_snapshot=world.snapshot_json)
    state = init_search(
        job_id=f"unhinted-{seed}", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=budget),
        config=config,
    )
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
    return state.covered, len(state.tasks)


def test_an_unhinted_certain_fix_is_found_within_the_e2e_search_budget() -> None:
    # the fix is drawn per seed among the 34 operator edits; 160 trials is the e2e's budget
    results = [_run(seed, 160) for seed in range(4)]
    assert all(covered == n for covered, n in results), results


def _with_named_edits_run(cells: dict[int, CellStats]) -> tuple[dict, int]:
    """A fresh search whose task 0's named single edits are known candidates with the given cells on task 0
    (by their order among the named edits; missing: untried). Returns (task 0's table, named edits)."""
    world = global_world(0, 1.0, n_tasks=5, fix="operator")
    config = SearchConfig(seed=0, cells_per_step=8, experience_snapshot=world.snapshot_json)
    state = init_search(job_id="hint", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=96),
                        config=config)
    root = root_contract(state)
    arms = Arms(state, root)
    offer_new_arms(arms, state, _single_edits(root, state.config), [0])
    probe = _Context(state, root, [0], arms.all())
    named = [c for c in arms.all() if len(c.edits) == 1 and affinity(probe.tables[0], probe.arm(c)[0]) >= 1]
    assert named, "task 0's audit names no edit: nothing to test"
    known = list(state.candidates) + [c for c in named if c not in state.candidates]
    index = {c.contract_hash: i for i, c in enumerate(known)}
    stats = {f"0:{index[c.contract_hash]}": cells[k] for k, c in enumerate(named) if k in cells}
    state = state.model_copy(update={"candidates": known, "cells": {**state.cells, **stats}})
    arms = Arms(state, root)
    offer_new_arms(arms, state, _single_edits(root, state.config), [0])
    return _Context(state, root, [0], arms.all()).tables[0], len(named)


def test_the_hint_is_dropped_only_when_every_edit_it_names_failed_the_task_at_the_cell_cap() -> None:
    cap = SearchConfig().max_attempts_per_cell
    failed = CellStats(attempts=cap, usable=cap)
    table, n = _with_named_edits_run({})
    assert table  # nothing tried: the audit's hint stands
    table, _ = _with_named_edits_run(dict.fromkeys(range(n), failed))
    assert table == {}  # every named edit failed cap times: every edit is now as likely as any other
    if n > 1:  # one named edit still untried: kept
        assert _with_named_edits_run(dict.fromkeys(range(n - 1), failed))[0]
    for other in (CellStats(attempts=cap, usable=cap, successes=1), CellStats(attempts=cap, usable=cap, progress=1),
                  CellStats(attempts=cap - 1, usable=cap - 1)):
        assert _with_named_edits_run({**dict.fromkeys(range(n), failed), 0: other})[0]  # a pass, progress, or too few
