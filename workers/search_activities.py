"""Expansion activities after the base evaluation: audit and configuration search.

Search runs as a loop of small steps that the ExpansionWorkflow drives: ``search_plan``
(pure planning from the last committed state, new candidates registered, prompt edits
fetched from the policy) -> ``run_trials`` per candidate contract -> ``search_observe``
(stored records read back, audited, folded into the state, committed). Every write is
idempotent, so a crash anywhere resumes from the last committed step without re-running
finished trials or re-adding candidates (``mindforge.store.search_state``). The
successor check that follows the search is :mod:`workers.successor_activities`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.agent.endpoint import resolve_endpoint
from mindforge.payloads import (
    AuditJudge,
    AuditTrialsInput,
    AuditTrialsResult,
    RunTrialsInput,
    SearchObserveInput,
    SearchObserveResult,
    SearchPlanResult,
    SearchStartResult,
    SearchStepInput,
    TrialSpec,
    TrialStage,
)
from mindforge.store import engine as store_engine
from mindforge.store import experience as experience_repo
from mindforge.store import lineages, pool, registry, trials
from mindforge.store import search as search_repo
from mindforge.store.errors import ContractNotRegisteredError


def _events(record) -> list[dict] | None:
    from mindforge.agent.transcript import read_transcript

    path = record.artifacts.get("transcript")
    return read_transcript(Path(path)) if path and Path(path).is_file() else None


#: limit on one audit judge call, seconds (the audit activity runs under the store timeout)
JUDGE_TIMEOUT_SEC = 30.0


class _ContractCache:
    """Registered contracts by hash, parsed once per activity (None for an unknown hash)."""

    def __init__(self, session) -> None:
        self.session = session
        self.parsed: dict[str, Any] = {}

    def get(self, content_hash: str | None):
        from mindforge.hcp import loads_contract

        if not content_hash:
            return None
        if content_hash not in self.parsed:
            row = registry.get_contract(session=self.session, content_hash=content_hash)
            self.parsed[content_hash] = loads_contract(row.toml_text) if row is not None else None
        return self.parsed[content_hash]


#: the previous generation's leading search candidates shortlisted again (its entrant and runner-up)
PREVIOUS_SEEDS = 2


def previous_entrants(session, lineage_id: str, generation: int) -> list[Any]:
    """The previous generation's search entrant and runner-up as seed chains (none in generation 0).

    Read from the previous search job's committed state: its candidates best first by the
    search's objective (:func:`mindforge.search.summary.ranked_candidates`). The chains
    are relative to the previous generation's root; the shortlist re-bases them on this
    generation's (:func:`mindforge.search.shortlist.rebase`), so the successor the gate
    promoted (now the root) adds nothing and its runner-up comes back as what it adds.
    """
    from mindforge.search.race_models import SeedChain
    from mindforge.search.summary import ranked_candidates
    from mindforge.store.search_state import load_state

    if generation <= 0:
        return []
    job_id = f"{lineage_id}-g{generation - 1}-search"
    job = search_repo.get_search_job(session=session, job_id=job_id)
    state = load_state(session=session, job_id=job_id) if job is not None and job.state else None
    if state is None:
        return []
    by_hash = {c.contract_hash: c for c in state.candidates}
    notes = ("entrant", "runner-up")
    return [
        SeedChain(edits=list(by_hash[h].edits), reason="previous", note=f"generation {generation - 1} {notes[i]}")
        for i, h in enumerate(ranked_candidates(state)[:PREVIOUS_SEEDS])
    ]


class SearchActivities:
    """Audit and search activities bound to one store.

    Args:
        engine: SQLAlchemy engine of the migrated store.
    """

    def __init__(self, engine) -> None:
        self.engine = engine

    # ----------------------------------------------------------------- audit
    @activity.defn(name="audit_trials")
    async def audit_trials(self, inp: AuditTrialsInput) -> AuditTrialsResult:
        """Audit every stored trial of the stage that did not pass and has no audit yet.

        Returns:
            owner -> number of audited trials (all of the stage's, stored or new).
        """
        return await asyncio.to_thread(self._audit_stage, inp)

    def _audit_stage(self, inp: AuditTrialsInput) -> AuditTrialsResult:
        stage = inp.stage.value
        with store_engine.session_scope(self.engine) as s:
            rows = trials.list_trials(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=stage
            )
            self._audit_records(s, [r.to_record() for r in rows], inp.judge)
            counts: dict[str, int] = defaultdict(int)
            for a in trials.list_audits(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=stage
            ):
                counts[str(a.owner)] += 1
            return AuditTrialsResult(by_owner=dict(counts))

    def _audit_records(self, s, records, judge: AuditJudge | None = None) -> dict[str, Any]:
        """Audit records lacking an audit; returns trial id -> AuditResult for all failed ones.

        Rules see the contract each trial ran under (its limits and hooks); with the judge
        on, what the rules flag ``needs_judge`` goes to the trial's own model
        (adapter, else ``model.id``) on the policy endpoint.
        """
        from mindforge.audit import AuditResult, audit_trial, needs_audit
        from mindforge.audit_judge import judge_audit

        contracts = _ContractCache(s)
        out: dict[str, Any] = {}
        for rec in records:
            if not needs_audit(rec):
                continue
            stored = trials.get_audit(session=s, trial_id=rec.trial_id)
            if stored is not None:
                out[rec.trial_id] = AuditResult(
                    trial_id=rec.trial_id,
                    failure_class=stored.failure_class,
                    owner=stored.owner,
                    rule=stored.evidence.get("rule", ""),
                    evidence=stored.evidence,
                    judged_by=stored.judged_by,
                )
                continue
            contract = contracts.get(rec.contract_hash)
            events = _events(rec)
            result = audit_trial(rec, events, contract=contract)
            if result.needs_judge and judge is not None and judge.enabled and contract is not None:
                url, key = resolve_endpoint(contract, judge.policy_url)
                model = rec.adapter or contract.model.adapter or contract.model.id
                result = judge_audit(
                    rec, events, result, base_url=url, model=model, api_key=key, timeout_sec=JUDGE_TIMEOUT_SEC
                )
            trials.record_audit(session=s, **result.store_fields())
            out[rec.trial_id] = result
        return out

    # ---------------------------------------------------------------- search
    @activity.defn(name="start_search")
    async def start_search(self, inp: SearchStepInput) -> SearchStartResult:
        """Create the generation's search job from the base evaluation's failing tasks (idempotent).

        A search the budget cannot afford (fewer than two candidates) or an edit space
        with fewer than two candidates is refused before it starts; the reason is recorded
        on the job and in the generation record, and no search step runs.

        Raises:
            ApplicationError: non-retryable (``ContractNotRegisteredError``) when the
                generation's contract is not registered.
        """
        try:
            return await asyncio.to_thread(self._start, inp)
        except ContractNotRegisteredError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc

    def _start(self, inp: SearchStepInput) -> SearchStartResult:
        from mindforge.hcp import loads_contract
        from mindforge.search import init_search, search_tasks_from_audits
        from mindforge.search.allocator import SearchRefused
        from mindforge.search.state import CostEstimate, SearchBudget, SearchConfig
        from mindforge.store.search_state import commit_state, require_state

        job_id = f"{inp.lineage_id}-g{inp.generation}-search"
        b = inp.expansion.search
        if not b.enabled:
            with store_engine.session_scope(self.engine) as s:
                lineages.update_generation(
                    session=s, lineage_id=inp.lineage_id, index=inp.generation, record={"search": {"disabled": True}}
                )
            return SearchStartResult(
                job_id="", running=False, failing_tasks=0, note="search disabled in the lineage spec"
            )
        budget = SearchBudget(max_attempts=b.max_attempts, max_tokens=b.max_tokens, max_wall_sec=b.max_wall_sec)
        with store_engine.session_scope(self.engine) as s:
            job = search_repo.get_search_job(session=s, job_id=job_id)
            if job is not None and job.state:  # started by an earlier attempt of this activity
                existing = require_state(session=s, job_id=job_id)
                return SearchStartResult(job_id=job_id, running=not existing.done, failing_tasks=len(existing.tasks))
            if job is not None and job.stop_reason:  # refused by an earlier attempt
                return SearchStartResult(job_id=job_id, running=False, failing_tasks=0, note=job.stop_reason)
            rows = trials.list_trials(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=TrialStage.EXPANSION.value
            )
            records = [r.to_record() for r in rows]
            audits = self._audit_records(s, records, AuditJudge.of(inp.expansion, inp.runtime))
            tasks = search_tasks_from_audits(records, audits)
            real = [r for r in records if r.has_real_reward] or records
            cost = CostEstimate(
                tokens_per_attempt=sum(r.prompt_tokens + r.completion_tokens for r in real) / max(1, len(real)),
                wall_sec_per_attempt=sum(r.timings.total_sec for r in real) / max(1, len(real)),
            )
            root = loads_contract(registry.require_contract(session=s, content_hash=inp.contract_hash).toml_text)
            search_repo.create_search_job(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation,
                budget=budget.model_dump(exclude_none=True), job_id=job_id,
            )
            latest = experience_repo.latest_snapshot_row(session=s, lineage_id=inp.lineage_id)
            config = SearchConfig(
                seed=b.seed, cells_per_step=b.cells_per_step, examples=list(b.examples),
                experience_snapshot=latest.document if latest is not None else None,
                seeds=previous_entrants(s, inp.lineage_id, inp.generation),
            )
            try:
                state = init_search(job_id=job_id, root=root, tasks=tasks, budget=budget, config=config, cost=cost)
            except SearchRefused as exc:
                note = f"refused: {exc}"
                search_repo.save_search_state(session=s, job_id=job_id, state={}, spent={}, stop_reason=note)
                lineages.update_generation(
                    session=s, lineage_id=inp.lineage_id, index=inp.generation,
                    record={"search": {"job_id": job_id, "refused": str(exc), "failing_tasks": len(tasks)}},
                )
                return SearchStartResult(job_id=job_id, running=False, failing_tasks=len(tasks), note=note)
            commit_state(session=s, job_id=job_id, state=state)
            return SearchStartResult(job_id=job_id, running=not state.done, failing_tasks=len(tasks))

    @activity.defn(name="plan_search_step")
    async def plan_search_step(self, inp: SearchStepInput) -> SearchPlanResult:
        """Plan the next step from the committed state; register its new candidates; fetch prompt edits.

        Raises:
            StageSplitError: a planned cell's task is not on the search split
                (non-retryable by name: ``workflows.options.NON_RETRYABLE``).
        """
        return await asyncio.to_thread(self._plan, inp)

    def _plan(self, inp: SearchStepInput) -> SearchPlanResult:
        from mindforge.search import plan_step, propose_prompt_edit
        from mindforge.search.allocator import root_contract
        from mindforge.store.search_state import register_candidates, require_state

        with store_engine.session_scope(self.engine) as s:
            state = require_state(session=s, job_id=inp.job_id)
            plan = plan_step(state)
            root = root_contract(state)
            register_candidates(session=s, job_id=inp.job_id, root=root, candidates=plan.new_candidates)
            paths = {t.id: t.path for t in pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id)}
            pool.check_trial_splits(
                session=s, lineage_id=inp.lineage_id, stage=TrialStage.SEARCH,
                trials=[(c.trial_id, c.task_hash) for c in plan.cells],
            )
        out = SearchPlanResult(step=plan.step, stop_reason=plan.stop_reason, cells=list(plan.cells))
        by_contract: dict[str, list[TrialSpec]] = defaultdict(list)
        for c in plan.cells:
            by_contract[c.contract_hash].append(
                TrialSpec(trial_id=c.trial_id, task_path=paths[c.task_hash], task_hash=c.task_hash, attempt=c.attempt)
            )
        out.batches = [
            RunTrialsInput(
                lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.SEARCH, contract_hash=h,
                adapter=inp.adapter, policy_url=inp.runtime.policy_url, trials=specs,
            )
            for h, specs in sorted(by_contract.items())
        ]
        model = root.model.adapter or root.model.id
        for request in plan.prompt_requests:
            if not inp.runtime.policy_url:
                out.prompt_rejections.append("no policy endpoint for prompt proposals")
                continue
            url, key = resolve_endpoint(root, inp.runtime.policy_url)
            proposal = propose_prompt_edit(root, request, base_url=url, model=model, api_key=key)
            if proposal.edit is not None:
                out.prompt_edits.append(proposal.edit)
            else:
                out.prompt_rejections.append(proposal.rejected or "rejected")
        return out

    @activity.defn(name="observe_search_step")
    async def observe_search_step(self, inp: SearchObserveInput) -> SearchObserveResult:
        """Fold the step's stored trials into the state and commit it; returns True when the search is done.

        Idempotent: a step already observed (the state moved on) changes nothing.
        """
        return await asyncio.to_thread(self._observe, inp)

    def _observe(self, inp: SearchObserveInput) -> SearchObserveResult:
        from mindforge.search import cell_result_from_record, observe
        from mindforge.search.state import StepResults
        from mindforge.store.search_state import commit_state, require_state

        with store_engine.session_scope(self.engine) as s:
            state = require_state(session=s, job_id=inp.job_id)
            if state.step != inp.plan.step:
                return SearchObserveResult(done=state.done)
            cells = inp.plan.cells
            records = {}
            for c in cells:
                row = trials.get_trial(session=s, trial_id=c.trial_id)
                if row is not None:
                    records[c.trial_id] = row.to_record()
            audits = self._audit_records(s, list(records.values()), inp.judge)
            results = StepResults(
                step=inp.plan.step,
                results=[
                    cell_result_from_record(records[c.trial_id], c, audits.get(c.trial_id))
                    for c in cells
                    if c.trial_id in records
                ],
                prompt_edits=list(inp.plan.prompt_edits),
                prompt_rejections=inp.plan.prompt_rejections,
                wall_sec=inp.wall_sec,
            )
            state = observe(state, results)
            commit_state(session=s, job_id=inp.job_id, state=state)
            return SearchObserveResult(done=state.done)

    @activity.defn(name="finish_search")
    async def finish_search(self, inp: SearchStepInput) -> None:
        """Write the search summary (budget, spending, stop reason, coverage, best single) to the generation."""

        def work() -> None:
            from mindforge.search.summary import search_summary
            from mindforge.store.search_state import require_state

            with store_engine.session_scope(self.engine) as s:
                job = search_repo.get_search_job(session=s, job_id=inp.job_id)
                if job is None or not job.state:  # refused or never started: search_start recorded why
                    return
                state = require_state(session=s, job_id=inp.job_id)
                lineages.update_generation(
                    session=s, lineage_id=inp.lineage_id, index=inp.generation, record={"search": search_summary(state)}
                )

        await asyncio.to_thread(work)

    def all(self) -> list[Any]:
        """Every activity of this class (all on the orchestration queue)."""
        return [
            self.audit_trials, self.start_search, self.plan_search_step, self.observe_search_step, self.finish_search,
        ]
