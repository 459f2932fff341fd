"""ExpansionWorkflow: base evaluation -> audit -> configuration search within budget -> successor check.

1. Base evaluation: ``spec.attempts`` trials of the current pair per search-split task.
2. Audit: every failed trial gets a failure class and an owner (infra / task / config / model).
3. Search: the failing tasks (minus broken ones) go to adaptive configuration search,
   step by step (plan -> run trials per candidate contract -> observe), until the budget
   is spent or every failing task is covered; the stop reason is recorded. A search the
   budget cannot afford is refused before it starts, and the refusal is recorded.
4. Successor: the best single search contract and the parent run on the selection split;
   a child is promoted only on that evidence (``mindforge.evaluation.choose_successor``),
   never on search coverage and never on sealed trials.
Coverage, search summary and successor choice land in the generation's record.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.payloads import (
        AuditJudge,
        ExpansionInput,
        ExpansionResult,
        RunTrialsInput,
        SearchObserveInput,
        SearchPlanResult,
        SearchStartInput,
        SearchStartResult,
        SearchStepInput,
        StageTrialsInput,
        SuccessorCheckPlan,
        TrialSpec,
        TrialStage,
    )
    from workflows import options as o

#: upper bound on search steps in one workflow run (each step is a few activities)
MAX_SEARCH_STEPS = 200


@workflow.defn(name="ExpansionWorkflow")
class ExpansionWorkflow:
    """Expansion stage of one generation."""

    @workflow.run
    async def run(self, inp: ExpansionInput) -> ExpansionResult:
        """Run the four steps; returns coverage counts and the successor contract."""
        trials: list[TrialSpec] = await o.store_activity(o.PLAN_TRIALS, inp, list[TrialSpec])
        size = inp.spec.trial_batch_size
        batches = [trials[i : i + size] for i in range(0, len(trials), size)]
        await asyncio.gather(
            *(
                o.run_trials(
                    RunTrialsInput(
                        lineage_id=inp.lineage_id,
                        generation=inp.generation,
                        stage=TrialStage.EXPANSION,
                        contract_hash=inp.contract_hash,
                        adapter=inp.adapter,
                        policy_url=inp.spec.policy_url,
                        trials=batch,
                    ),
                    inp.spec.heartbeat_timeout_sec,
                )
                for batch in batches
            )
        )
        result: ExpansionResult = await o.store_activity(o.SUMMARIZE_EXPANSION, inp, ExpansionResult)
        audited = StageTrialsInput(
            lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.EXPANSION.value, judge=AuditJudge.of(inp.spec)
        )
        await o.store_activity(o.AUDIT_TRIALS, audited, dict)
        step_inp = SearchStepInput(
            lineage_id=inp.lineage_id, generation=inp.generation, job_id="", spec=inp.spec,
            contract_hash=inp.contract_hash, adapter=inp.adapter,
        )
        start: SearchStartResult = await o.store_activity(
            o.SEARCH_START,
            SearchStartInput(
                lineage_id=inp.lineage_id, generation=inp.generation, spec=inp.spec,
                contract_hash=inp.contract_hash, adapter=inp.adapter,
            ),
            SearchStartResult,
        )
        step_inp.job_id = start.job_id
        if start.running:
            await self._search(step_inp)
        await o.store_activity(o.SEARCH_FINISH, step_inp)
        result.successor_contract_hash = await self._successor(step_inp)
        return result

    async def _search(self, inp: SearchStepInput) -> None:
        for _ in range(MAX_SEARCH_STEPS):
            plan: SearchPlanResult = await o.store_activity(o.SEARCH_PLAN, inp, SearchPlanResult)
            if plan.stop_reason is None:
                started = workflow.now()
                await asyncio.gather(*(o.run_trials(b, inp.spec.heartbeat_timeout_sec) for b in plan.batches))
                wall = (workflow.now() - started).total_seconds()
            else:
                wall = 0.0
            done: bool = await o.store_activity(
                o.SEARCH_OBSERVE,
                SearchObserveInput(
                    lineage_id=inp.lineage_id, generation=inp.generation, job_id=inp.job_id, plan=plan, wall_sec=wall,
                    judge=AuditJudge.of(inp.spec),
                ),
                bool,
            )
            if done:
                return

    async def _successor(self, inp: SearchStepInput) -> str:
        check: SuccessorCheckPlan = await o.store_activity(o.PLAN_SUCCESSOR_CHECK, inp, SuccessorCheckPlan)
        if check.batches:
            await asyncio.gather(*(o.run_trials(b, inp.spec.heartbeat_timeout_sec) for b in check.batches))
        return await o.store_activity(o.CHOOSE_SUCCESSOR, inp, str)
