"""A crash between plan and observe resumes from the committed state without repeating trials or candidates.

The search runs against a real SQLite store (trials by deterministic id, candidates by
(job, hash), state in the search job); outcomes come from the simulated oracles of
:mod:`benchmarks.simulate`, standing in for sandbox + policy.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select

from benchmarks.simulate import UnlockOracle, WorldOracle, base_search_tasks, global_world, make_unlock_tasks
from mindforge.hcp import derive, load_contract
from mindforge.search import (
    CellResult,
    SearchBudget,
    SearchConfig,
    StepResults,
    init_search,
    observe,
    plan_step,
)
from mindforge.search.summary import ranked_candidates, search_summary
from mindforge.store import (
    LineageCreate,
    SearchCandidate,
    Trial,
    init_db,
    lineages,
    search,
    session_scope,
    trials,
)
from mindforge.store.search_state import (
    commit_state,
    load_state,
    register_candidates,
    register_contract,
)
from mindforge.trials.record import TrialRecord

REPO = Path(__file__).resolve().parents[3]
BASE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
ROOT = derive(
    BASE,
    name="bench",
    revision="1.0.0",
    edit="tools: bash and finish only",
    changes={"tools.allow": ["bash", "finish"]},
)


def final_steps(engine, job_id: str) -> int:
    with session_scope(engine) as s:
        return load_state(session=s, job_id=job_id).step


def crash_and_resume(tmp_path: Path, root, failing, oracle, config: SearchConfig, budget: int, job_id: str):
    """Run a search against a real store, the worker dying twice; returns (final state, trials run, stored rows).

    Step 1 dies after running half its cells (nothing observed, nothing committed); step 2
    dies after observe, before the commit. Trials are stored by id and skipped when found.
    """
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="resume"))
        register_contract(s, BASE, None)
        if root.content_hash != BASE.content_hash:
            register_contract(s, root, BASE.content_hash)
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=root.content_hash)
        job = search.create_search_job(
            session=s, lineage_id=lineage.id, generation_index=0, budget={"attempts": budget}, job_id=job_id
        )  # a fixed id: the allocator's draws are seeded by it, so every run takes the same path
        state = init_search(
            job_id=job.id, root=root, tasks=failing, budget=SearchBudget(max_attempts=budget), config=config
        )
        commit_state(session=s, job_id=job.id, state=state)
    executed: list[str] = []

    def run_cells(plan, limit=None) -> StepResults:
        """Run planned cells whose trial is not stored yet; return all results from the store."""
        with session_scope(engine) as s:
            state_now = load_state(session=s, job_id=job.id)
            fresh = oracle.execute(state_now, plan.model_copy(update={"cells": plan.cells[:limit]}))
            for cell, result in zip(plan.cells, fresh.results, strict=False):
                if trials.trial_exists(session=s, trial_id=cell.trial_id):
                    continue
                executed.append(cell.trial_id)
                trials.insert_trial(
                    session=s,
                    record=TrialRecord(
                        trial_id=cell.trial_id, run_id=job.id, task_id=cell.task_id, task_hash=cell.task_hash,
                        agent="model", contract_hash=cell.contract_hash, attempt=cell.attempt, reward=result.reward,
                    ),
                    lineage_id=lineage.id, generation_index=0, stage="search",
                )  # fmt: skip
            stored = [trials.get_trial(session=s, trial_id=c.trial_id) for c in plan.cells[:limit]]
            results = [
                CellResult(
                    trial_id=t.trial_id, task_hash=t.task_hash, contract_hash=t.contract_hash, attempt=t.attempt,
                    reward=t.reward,
                )
                for t in stored
            ]  # fmt: skip
        return StepResults(step=plan.step, results=results)

    crashed_plans = {}
    crash_at = {1: "after_half_the_cells", 2: "after_observe_before_commit"}
    while True:
        with session_scope(engine) as s:
            state = load_state(session=s, job_id=job.id)
        if state.done:
            break
        plan = plan_step(state)
        with session_scope(engine) as s:
            register_candidates(session=s, job_id=job.id, root=root, candidates=plan.new_candidates)
        mode = crash_at.pop(state.step, None)
        if state.step in crashed_plans:
            assert plan == crashed_plans[state.step]  # the re-plan is the same step: same cells, same candidates
        if mode == "after_half_the_cells":
            run_cells(plan, limit=len(plan.cells) // 2)
            crashed_plans[state.step] = plan
            continue  # the worker dies: nothing observed, nothing committed
        results = run_cells(plan)
        new_state = observe(state, results)
        if mode == "after_observe_before_commit":
            crashed_plans[state.step] = plan
            continue  # the state after observe is lost with the worker
        with session_scope(engine) as s:
            commit_state(session=s, job_id=job.id, state=new_state)
    assert len(crashed_plans) == 2 and not crash_at and final_steps(engine, job.id) > 2
    with session_scope(engine) as s:
        final = load_state(session=s, job_id=job.id)
        stored = s.exec(select(Trial)).all()
        rows = s.exec(select(SearchCandidate).where(SearchCandidate.job_id == job.id)).all()
        saved = search.get_search_job(session=s, job_id=job.id)
    assert len(executed) == len(set(executed)) == len(stored) == final.spent.attempts
    assert sorted(r.contract_hash for r in rows) == sorted(c.contract_hash for c in final.candidates)
    assert len({c.contract_hash for c in final.candidates}) == len(final.candidates)
    assert saved.spent["attempts"] == final.spent.attempts and saved.stop_reason == final.stop_reason
    return final


def uninterrupted(root, failing, oracle, config: SearchConfig, budget: int, job_id: str):
    limit = SearchBudget(max_attempts=budget)
    state = init_search(job_id=job_id, root=root, tasks=failing, budget=limit, config=config)
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
    return state


def test_crash_between_plan_and_observe_repeats_neither_trials_nor_candidates(tmp_path: Path) -> None:
    """The coverage allocator (``adaptive``): 12 tasks at 6 cells a step cannot all be covered in step 1."""
    tasks = make_unlock_tasks(12, ["tool:read_file", "plan", "observation", "skill:show_tree.sh"])
    config = SearchConfig(strategy="adaptive", cells_per_step=6)
    final = crash_and_resume(
        tmp_path, ROOT, base_search_tasks(tasks, ROOT), UnlockOracle(ROOT, tasks, seed=5), config, 400, "resume-crash"
    )
    assert final.stop_reason == "full_coverage"


def test_a_search_that_crashes_mid_race_resumes_without_repeating_trials_or_losing_candidates(tmp_path: Path) -> None:
    """The race: the worker dies while the shortlist runs its probes and again as the first round closes.

    The resumed search ends exactly where an uninterrupted one with the same job id does:
    the same candidates, entrants, predictions, trials and ranking.
    """
    world = global_world(4, 0.3)
    config = SearchConfig(seed=4, cells_per_step=8, experience_snapshot=world.snapshot_json)
    final = crash_and_resume(
        tmp_path, world.root, world.failing, WorldOracle(world, seed=4), config, 96, "resume-race"
    )
    clean = uninterrupted(world.root, world.failing, WorldOracle(world, seed=4), config, 96, "resume-race")
    assert final.stop_reason == "budget_attempts" and final.spent.attempts == 96
    # step 1 still ran the shortlist's probes (four library entries, three attempts each, eight cells a step)
    assert len(final.entrants) >= 4 and (final.race.round >= 1 or any(e.status != "racing" for e in final.entrants))
    assert final.model_dump(exclude={"spent"}) == clean.model_dump(exclude={"spent"})
    assert ranked_candidates(final) == ranked_candidates(clean)


def test_search_summary_for_the_generation_record() -> None:
    tasks = make_unlock_tasks(6, ["tool:read_file", "plan"])
    oracle = UnlockOracle(ROOT, tasks, seed=1)
    state = init_search(
        job_id="sum", root=ROOT, tasks=base_search_tasks(tasks, ROOT), budget=SearchBudget(max_attempts=96)
    )
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
    summary = search_summary(state)
    # the race keeps solved tasks in the pool: it stops at its budget, coverage is reported beside the objective
    assert summary["stop_reason"] == "budget_attempts" and summary["strategy"] == "race"
    assert summary["budget"] == {"max_attempts": 96} and summary["spent"]["attempts"] == state.spent.attempts == 96
    assert 0 < summary["best_single"]["covered"] <= summary["covered"] <= summary["failing_tasks"] == 6
    best = next(c for c in state.candidates if c.contract_hash == summary["best_single"]["contract_hash"])
    assert (
        sum(oracle.unlocks(t.task_hash, oracle.contracts[best.contract_hash]) for t in tasks)
        >= summary["best_single"]["covered"]
    )
    ranking = summary["ranking"]
    assert ranking and [r["rate"] for r in ranking] == sorted((r["rate"] for r in ranking), reverse=True)
    assert ranking[0]["contract_hash"] == ranked_candidates(state)[0] and ranking[0]["passes"] >= 1
    assert set(summary["pareto_front"]) <= {c.contract_hash for c in state.candidates}
    assert summary["predictions"] and {p["verdict"] for p in summary["predictions"]} <= {
        "untested", "confirmed", "refuted"
    }  # fmt: skip
