"""Fill a real SQLite store with a lineage whose report has every section: shared by report tests.

The lineage is built by the real code paths: base-evaluation trials audited by the audit
rules on simulated transcripts, a configuration search run by the real allocator with
its candidates registered through :mod:`mindforge.store.search_state`, and selection / sealed trials
for two generations. Trial outcomes come from the simulated unlock oracle (standing in
for sandbox + policy).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel

from benchmarks.simulate import UnlockOracle, base_transcript, make_unlock_tasks
from mindforge.audit import audit_trial
from mindforge.evaluation import PairRef
from mindforge.evaluation.compounding import measure_generation
from mindforge.hcp import derive, load_contract
from mindforge.search import (
    SearchBudget,
    SearchConfig,
    init_search,
    observe,
    plan_step,
    search_tasks_from_audits,
)
from mindforge.store import (
    LineageCreate,
    PoolSplit,
    RunStatus,
    StoredTask,
    TaskSource,
    init_db,
    lineages,
    pool,
    search,
    session_scope,
    trials,
)
from mindforge.store.search_state import (
    commit_state,
    register_candidates,
    register_contract,
)
from mindforge.trials.record import FailureClass, PhaseTimings, TrialRecord

REPO = Path(__file__).resolve().parents[3]
SEARCH_KINDS = ["tool:read_file", "observation", "plan", "skill:run_tests.sh", "verify", "combo:read_file+plan"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class FilledStore(BaseModel):
    """What the filled store holds, for assertions."""

    db_url: str
    lineage_id: str
    lineage_name: str
    root_hash: str
    successor_hash: str
    search_tasks: int
    failing: int
    covered: int
    stop_reason: str
    attempts: int
    edit_counts: dict[str, int]


class _Clock:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> datetime:
        self.n += 1
        return T0 + timedelta(seconds=self.n)


def fill_store(db_url: str, *, evaluation: bool = True, discovery: bool = True) -> FilledStore:
    """Build the lineage ``demo-report`` in the database at ``db_url`` (migrated first)."""
    engine = init_db(db_url)
    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    root = derive(
        base,
        name="bench",
        revision="1.0.0",
        edit="tools: bash and finish only",
        changes={"tools.allow": ["bash", "finish"]},
    )
    tasks = make_unlock_tasks(12, SEARCH_KINDS)
    held = make_unlock_tasks(16, ["plan", "tool:read_file"])[12:]
    easy = make_unlock_tasks(17, ["plan"])[16]
    clock = _Clock()
    oracle = UnlockOracle(root, tasks + held, seed=11)
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(
            session=s, lineage_in=LineageCreate(name="demo-report", spec={"generations": 2})
        )
        register_contract(s, base, None)
        register_contract(s, root, base.content_hash)
        placed = [(t, PoolSplit.SEARCH) for t in [*tasks, easy]]
        placed += [(t, PoolSplit.SELECTION) for t in held[:2]] + [(t, PoolSplit.SEALED) for t in held[2:]]
        for task, split in placed:
            s.add(
                StoredTask(
                    id=task.task_hash, task_id=task.task_id, path=f"/tasks/{task.task_id}", source=TaskSource.BUNDLED
                )
            )
            s.flush()
            pool.add_to_pool(
                session=s, lineage_id=lineage.id, task_hash=task.task_hash, split=split, added_generation=0
            )
        record = {"discovery": {"proposed": 3, "admitted": 1, "proposals": [
            {"task_id": "csv-merge", "admitted": True, "reason": "validated"},
            {"task_id": "dup-of-logs", "admitted": False, "reason": "near-duplicate of a pool task"},
        ]}} if discovery else {}  # fmt: skip
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=root.content_hash)
        lineages.update_generation(session=s, lineage_id=lineage.id, index=0, status=RunStatus.COMPLETED, record=record)
        records, audits = [], {}
        for task in [*tasks, easy]:
            events, cls, limit = base_transcript(task.kind)
            for attempt in range(2):
                passed = task is easy
                rec = _record(
                    f"base-{task.task_id}-{attempt}", task, root.content_hash, attempt, 1.0 if passed else 0.0, clock
                )
                if not passed:
                    rec.failure_class, rec.limit_fired = cls, limit
                trials.insert_trial(session=s, record=rec, lineage_id=lineage.id, generation_index=0, stage="expansion")
                records.append(rec)
                if not passed:
                    audits[rec.trial_id] = audit_trial(rec, events, contract=root)
                    trials.record_audit(session=s, **audits[rec.trial_id].store_fields())
        failing = search_tasks_from_audits(records, audits)
        job = search.create_search_job(
            session=s, lineage_id=lineage.id, generation_index=0, budget={"max_attempts": 300}, job_id="demo-report-g0"
        )  # a fixed id: trial ids, and so the simulated outcomes, are the same on every run
        # the coverage allocator, run to full coverage: the report's coverage figures are checked against it
        config = SearchConfig(strategy="adaptive")
        budget = SearchBudget(max_attempts=300)
        state = init_search(job_id=job.id, root=root, tasks=failing, budget=budget, config=config)
        while not state.done:
            plan = plan_step(state)
            register_candidates(session=s, job_id=job.id, root=root, candidates=plan.new_candidates)
            results = oracle.execute(state, plan)
            for cell, result in zip(plan.cells, results.results, strict=True):
                task = next(t for t in tasks if t.task_hash == cell.task_hash)
                rec = _record(cell.trial_id, task, cell.contract_hash, cell.attempt, result.reward, clock)
                trials.insert_trial(session=s, record=rec, lineage_id=lineage.id, generation_index=0, stage="search")
                if not rec.passed:
                    trials.record_audit(session=s, **audit_trial(rec, None).store_fields())
            state = observe(state, results)
            commit_state(session=s, job_id=job.id, state=state)
        wins = {
            c.contract_hash: sum(v.successes for k, v in state.cells.items() if int(k.split(":")[1]) == i)
            for i, c in enumerate(state.candidates)
        }
        successor = max(wins, key=lambda h: (wins[h], h))
        if evaluation:
            split_of = dict((t.task_hash, split) for t, split in placed)
            lineages.create_generation(session=s, lineage_id=lineage.id, index=1, contract_hash=successor)
            ids: dict[tuple[int, str, PoolSplit], list[str]] = {}
            for generation, contract in [(0, root.content_hash), (0, successor), (1, successor)]:
                for task in held:
                    split = split_of[task.task_hash]
                    if generation == 1 and split == PoolSplit.SELECTION:
                        continue
                    for attempt in range(2):
                        tid = f"{split.value}-{generation}-{contract[:8]}-{task.task_id}-{attempt}"
                        unlocked = oracle.unlocks(task.task_hash, oracle.contracts.get(contract, root))
                        rec = _record(tid, task, contract, attempt, oracle.outcome(tid, unlocked), clock)
                        trials.insert_trial(
                            session=s, record=rec, lineage_id=lineage.id, generation_index=generation, stage=split.value
                        )
                        ids.setdefault((generation, contract, split), []).append(tid)
            selection_ids = ids[(0, root.content_hash, PoolSplit.SELECTION)] + ids[(0, successor, PoolSplit.SELECTION)]
            lineages.update_generation(
                session=s, lineage_id=lineage.id, index=0, record={
                    "successor": {
                        "decided_on": "selection", "contract_hash": successor, "promoted": True,
                        "reason": "selection lift +0.500 (95% CI +0.000..+1.000) on 2 tasks",
                        "scores": {root.content_hash: 0.0, successor: 0.5}, "trial_ids": sorted(selection_ids),
                    },
                    "sealed_lift": {
                        "mean": 0.25, "lo": 0.0, "hi": 0.5, "n_tasks": 2, "n_trials": 8, "measured_on": "sealed",
                        "baseline": "parent",
                    },
                },
            )
            lineages.update_generation(
                session=s, lineage_id=lineage.id, index=1,
                record={"sealed_lift": None, "sealed_lift_reason": "the generation kept its parent pair"},
            )
            # the compounding rows, measured by the real code on the stored sealed trials
            sealed = {t.task_hash for t, split in placed if split == PoolSplit.SEALED}
            pairs = {0: (root.content_hash, successor, None), 1: (successor, successor, root.content_hash)}
            for generation, (parent, child, first) in pairs.items():
                rows = trials.list_trials(session=s, lineage_id=lineage.id, generation_index=generation, stage="sealed")
                row = measure_generation(
                    [r.to_record() for r in rows], sealed, generation=generation,
                    parent=PairRef(contract_hash=parent), successor=PairRef(contract_hash=child),
                    root=PairRef(contract_hash=first) if first else None, harness=PairRef(contract_hash=child),
                    attempts=2, resamples=200,
                )
                lineages.update_generation(
                    session=s, lineage_id=lineage.id, index=generation,
                    record={"compounding": row.model_dump(mode="json")},
                )
    engine.dispose()
    return FilledStore(
        db_url=db_url,
        lineage_id=lineage.id,
        lineage_name=lineage.name,
        root_hash=root.content_hash,
        successor_hash=successor,
        search_tasks=len(tasks) + 1,
        failing=len(failing),
        covered=state.covered,
        stop_reason=state.stop_reason or "",
        attempts=state.spent.attempts,
        edit_counts={c.contract_hash: len(c.edits) for c in state.candidates},
    )


def _record(trial_id: str, task, contract_hash: str, attempt: int, reward: float | None, clock: _Clock) -> TrialRecord:
    started = clock()
    return TrialRecord(
        trial_id=trial_id,
        run_id="demo",
        task_id=task.task_id,
        task_hash=task.task_hash,
        agent="model",
        contract_hash=contract_hash,
        attempt=attempt,
        reward=reward,
        failure_class=None if reward == 1.0 else FailureClass.TASK_FAILED,
        prompt_tokens=2000,
        completion_tokens=300,
        num_turns=6,
        timings=PhaseTimings(agent_sec=20.0, verify_sec=2.0),
        worker=f"node-{attempt % 2}/{attempt % 2}a2b3c4d5e6f/{100 + attempt}",  # two Ray nodes, as a cluster has
        started_at=started,
        finished_at=started + timedelta(seconds=22),
    )
