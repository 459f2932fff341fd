"""The previous generation's search entrant and runner-up are shortlisted again, re-based on the new root.

A real SQLite store holds generation 0's committed search state (a race in the simulated
global-fix world of :mod:`benchmarks.simulate`); generation 1's search reads it.
"""

from __future__ import annotations

from benchmarks.simulate import WorldOracle, global_world
from mindforge.search import SearchBudget, SearchConfig, StepResults, init_search, observe, plan_step
from mindforge.search.candidates import materialize
from mindforge.search.summary import ranked_candidates
from mindforge.store import LineageCreate, init_db, lineages, search, session_scope
from mindforge.store.search_state import commit_state, register_contract
from workers.search_activities import previous_entrants


def test_the_previous_entrant_and_runner_up_come_back_as_seeds(tmp_path) -> None:
    world = global_world(2, 0.3)
    engine = init_db(f"sqlite:///{tmp_path / 'mf.db'}")
    oracle = WorldOracle(world, seed=2)
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="seeds"))
        register_contract(s, world.root, None)
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=world.root.content_hash)
        job_id = f"{lineage.id}-g0-search"
        search.create_search_job(session=s, lineage_id=lineage.id, generation_index=0, budget={}, job_id=job_id)
        config = SearchConfig(seed=2, cells_per_step=8, experience_snapshot=world.snapshot_json)
        state = init_search(
            job_id=job_id, root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=48), config=config
        )
        while not state.done:
            plan = plan_step(state)
            results = oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step)
            state = observe(state, results)
        commit_state(session=s, job_id=job_id, state=state)
    with session_scope(engine) as s:
        assert previous_entrants(s, lineage.id, 0) == []  # generation 0 has no previous search
        assert previous_entrants(s, lineage.id, 5) == []  # nor a generation whose predecessor never searched
        seeds = previous_entrants(s, lineage.id, 1)
    top = ranked_candidates(state)[:2]
    by_hash = {c.contract_hash: c for c in state.candidates}
    assert [seed.edits for seed in seeds] == [by_hash[h].edits for h in top]
    assert [seed.note for seed in seeds] == ["generation 0 entrant", "generation 0 runner-up"]
    # the entrant won and became generation 1's root: re-based on it, its chain adds nothing, the runner-up's rest does
    new_root = materialize(world.root, by_hash[top[0]].edits)
    config = SearchConfig(experience_snapshot=world.snapshot_json, seeds=seeds)
    shortlist = init_search(
        job_id="g1", root=new_root, tasks=world.failing, budget=SearchBudget(max_attempts=96), config=config
    ).entrants
    previous = [e for e in shortlist if e.reason == "previous"]
    assert all(set(e.candidate.edit_keys) <= set(by_hash[top[1]].edit_keys) for e in previous)
    assert all(e.candidate.edit_keys != by_hash[top[0]].edit_keys for e in shortlist)
