"""ExpansionWorkflow: base evaluation -> audit -> library -> configuration search -> library -> successor check.

1. Base evaluation: ``expansion.attempts`` trials of the current pair per search-split task.
2. Audit: every failed trial gets a failure class and an owner (infra / task / config / model).
3. Experience, ``oracle`` round (``grow_experience``, when ``expansion.experience.enabled``):
   the reference solutions of search-split tasks not yet judged, replayed and added to the
   lineage's library, so the search's ``experience_snapshot`` edit can move the contract to
   it (in generation 0 this seeds the library).
4. Search: the failing tasks (minus broken ones) go to adaptive configuration search,
   step by step (plan -> run trials per candidate contract -> observe), until the budget
   is spent or every failing task is covered; the stop reason is recorded. A search the
   budget cannot afford is refused before it starts, and the refusal is recorded.
5. Experience, ``model`` round: the generation's passed search-split trials (base evaluation
   and search), replayed and added, so the next generation's search sees them.
6. Successor: the search's best one or two contracts race the parent on the selection split,
   look by look until the outcome is settled (``mindforge.evaluation.race``); one is promoted
   only on a gain on that evidence (``mindforge.evaluation.choose_successor``), never on
   search coverage and never on sealed trials.
Coverage, search summary and successor choice land in the generation's record.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.evaluation import SuccessorChoice
    from mindforge.payloads import (
        AuditJudge,
        AuditTrialsInput,
        AuditTrialsResult,
        ExpansionInput,
        ExpansionResult,
        ExperienceRound,
        GrowExperienceInput,
        GrowExperienceResult,
        PlanTrialsResult,
        RunTrialsInput,
        SearchObserveInput,
        SearchObserveResult,
        SearchPlanResult,
        SearchStartResult,
        SearchStepInput,
        SuccessorCheckPlan,
        TrialStage,
    )
    from workflows import options as o

#: upper bound on search steps in one workflow run (each step is a few activities)
MAX_SEARCH_STEPS = 200
#: the patch id of the experience-library rounds (histories recorded before them replay without)
EXPERIENCE_PATCH = "experience-library-rounds"
#: upper bound on successor-race rounds (a race runs at most ``RaceConfig.looks``, 8, looks)
MAX_RACE_ROUNDS = 16


@workflow.defn(name="ExpansionWorkflow")
class ExpansionWorkflow:
    """Expansion stage of one generation."""

    @workflow.run
    async def run(self, inp: ExpansionInput) -> ExpansionResult:
        """Run the six steps; returns coverage counts and the successor contract."""
        began = workflow.now()
        plan: PlanTrialsResult = await o.store_activity(o.PLAN_EXPANSION_TRIALS, inp, PlanTrialsResult)
        size = inp.runtime.trial_batch_size
        batches = [plan.trials[i : i + size] for i in range(0, len(plan.trials), size)]
        await asyncio.gather(
            *(
                o.run_trials(
                    RunTrialsInput(
                        lineage_id=inp.lineage_id,
                        generation=inp.generation,
                        stage=TrialStage.EXPANSION,
                        contract_hash=inp.contract_hash,
                        adapter=inp.adapter,
                        policy_url=inp.runtime.policy_url,
                        trials=batch,
                    ),
                    inp.runtime.heartbeat_timeout_sec,
                )
                for batch in batches
            )
        )
        result: ExpansionResult = await o.store_activity(o.SUMMARIZE_EXPANSION, inp, ExpansionResult)
        judge = AuditJudge.of(inp.expansion, inp.runtime)
        audited = AuditTrialsInput(
            lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.EXPANSION, judge=judge
        )
        await o.store_activity(o.AUDIT_TRIALS, audited, AuditTrialsResult)
        searched = workflow.now()
        await self._grow(inp, ExperienceRound.ORACLE)
        step = SearchStepInput(**inp.model_dump())
        start: SearchStartResult = await o.store_activity(o.START_SEARCH, step, SearchStartResult)
        step.job_id = start.job_id
        if start.running:
            await self._search(step, judge)
        await o.store_activity(o.FINISH_SEARCH, step)
        await self._grow(inp, ExperienceRound.MODEL)
        raced = workflow.now()
        result.successor_contract_hash = await self._successor(step)
        ended = workflow.now()
        result.stage_sec = {
            "base": (searched - began).total_seconds(),
            "search": (raced - searched).total_seconds(),
            "race": (ended - raced).total_seconds(),
        }
        return result

    @staticmethod
    async def _grow(inp: ExpansionInput, round_: ExperienceRound) -> None:
        """One experience-library round on the sandbox queue (its replays run on Ray); nothing when off.

        Behind ``workflow.patched(EXPERIENCE_PATCH)``: an Expansion whose history was recorded
        before the rounds existed replays without them (and runs none), new runs record the
        marker and run both.
        """
        if not inp.expansion.experience.enabled or not workflow.patched(EXPERIENCE_PATCH):
            return
        grow = GrowExperienceInput(
            lineage_id=inp.lineage_id, generation=inp.generation, round=round_, experience=inp.expansion.experience
        )
        await o.sandbox_activity(
            o.GROW_EXPERIENCE, grow, GrowExperienceResult, timeout=o.EXPERIENCE_TIMEOUT,
            heartbeat_timeout_sec=inp.runtime.heartbeat_timeout_sec,
        )

    async def _search(self, inp: SearchStepInput, judge: AuditJudge) -> None:
        for _ in range(MAX_SEARCH_STEPS):
            plan: SearchPlanResult = await o.store_activity(o.PLAN_SEARCH_STEP, inp, SearchPlanResult)
            if plan.stop_reason is None:
                started = workflow.now()
                await asyncio.gather(*(o.run_trials(b, inp.runtime.heartbeat_timeout_sec) for b in plan.batches))
                wall = (workflow.now() - started).total_seconds()
            else:
                wall = 0.0
            observed: SearchObserveResult = await o.store_activity(
                o.OBSERVE_SEARCH_STEP,
                SearchObserveInput(
                    lineage_id=inp.lineage_id, generation=inp.generation, job_id=inp.job_id, plan=plan, wall_sec=wall,
                    judge=judge,
                ),
                SearchObserveResult,
            )
            if observed.done:
                return

    async def _successor(self, inp: SearchStepInput) -> str:
        """Race the best candidates on selection, look by look (each look's trials all at once), then decide."""
        for _ in range(MAX_RACE_ROUNDS):
            check: SuccessorCheckPlan = await o.store_activity(o.PLAN_SUCCESSOR_CHECK, inp, SuccessorCheckPlan)
            if not check.batches:
                break
            await asyncio.gather(*(o.run_trials(b, inp.runtime.heartbeat_timeout_sec) for b in check.batches))
        choice: SuccessorChoice = await o.store_activity(o.CHOOSE_SUCCESSOR, inp, SuccessorChoice)
        return choice.contract_hash
