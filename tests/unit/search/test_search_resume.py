"""A crash between plan and observe resumes from the committed state without repeating trials or candidates.

The search runs against a real SQLite store (trials by deterministic id, candidates by
(job, hash), state in the search job); outcomes come from the simulated unlock oracle,
standing in for sandbox + policy.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select

from benchmarks.simulate import UnlockOracle, base_search_tasks, make_unlock_tasks
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
from mindforge.search.summary import search_summary
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


def test_crash_between_plan_and_observe_repeats_neither_trials_nor_candidates(tmp_path: Path) -> None:
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    tasks = make_unlock_tasks(12, ["tool:read_file", "plan", "observation", "skill:show_tree.sh"])
    oracle = UnlockOracle(ROOT, tasks, seed=5)
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="resume"))
        register_contract(s, BASE, None)
        register_contract(s, ROOT, BASE.content_hash)
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=ROOT.content_hash)
        job = search.create_search_job(
            session=s, lineage_id=lineage.id, generation_index=0, budget={"attempts": 400}, job_id="resume-crash"
        )  # a fixed id: the allocator's draws are seeded by it, so every run takes the same path
        state = init_search(
            job_id=job.id,
            root=ROOT,
            tasks=base_search_tasks(tasks, ROOT),
            budget=SearchBudget(max_attempts=400),
            config=SearchConfig(cells_per_step=6),
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
                    trial_id=t.trial_id,
                    task_hash=t.task_hash,
                    contract_hash=t.contract_hash,
                    attempt=t.attempt,
                    reward=t.reward,
                )
                for t in stored
            ]
        return StepResults(step=plan.step, results=results)

    crashed_plans = {}
    # 12 tasks at 6 cells a step cannot all be covered in step 1, so step 2 always comes
    crash_at = {1: "after_half_the_cells", 2: "after_observe_before_commit"}
    while True:
        with session_scope(engine) as s:
            state = load_state(session=s, job_id=job.id)
        if state.done:
            break
        plan = plan_step(state)
        with session_scope(engine) as s:
            register_candidates(session=s, job_id=job.id, root=ROOT, candidates=plan.new_candidates)
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
    assert final.stop_reason == "full_coverage" and saved.stop_reason == "full_coverage"
    assert len(executed) == len(set(executed)) == len(stored) == final.spent.attempts
    assert sorted(r.contract_hash for r in rows) == sorted(c.contract_hash for c in final.candidates)
    assert len({c.contract_hash for c in final.candidates}) == len(final.candidates)
    assert saved.spent["attempts"] == final.spent.attempts


def test_search_summary_for_the_generation_record() -> None:
    tasks = make_unlock_tasks(6, ["tool:read_file", "plan"])
    oracle = UnlockOracle(ROOT, tasks, seed=1)
    state = init_search(
        job_id="sum", root=ROOT, tasks=base_search_tasks(tasks, ROOT), budget=SearchBudget(max_attempts=200)
    )
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
    summary = search_summary(state)
    assert summary["stop_reason"] == "full_coverage" and summary["covered"] == summary["failing_tasks"] == 6
    assert summary["budget"] == {"max_attempts": 200} and summary["spent"]["attempts"] == state.spent.attempts
    assert 0 < summary["best_single"]["covered"] < 6  # read_file and plan_first tasks need different edits
    best = next(c for c in state.candidates if c.contract_hash == summary["best_single"]["contract_hash"])
    assert (
        sum(oracle.unlocks(t.task_hash, oracle.contracts[best.contract_hash]) for t in tasks)
        >= summary["best_single"]["covered"]
    )
