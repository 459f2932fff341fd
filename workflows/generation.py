"""GenerationWorkflow: Discovery -> Expansion -> Update as child workflows.

Child ids derive from the lineage id (``<lineage>-gen-<i>-<stage>``). A stage that is
enabled in the lineage spec but has no workflow registered yet is skipped and reported
in ``stages_skipped``, so the lineage's status says exactly which stages ran.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.orchestration import (
        DiscoveryInput,
        DiscoveryResult,
        ExpansionInput,
        ExpansionResult,
        GenerationEvent,
        GenerationInput,
        GenerationResult,
        Stage,
        UpdateInput,
        UpdateResult,
    )
    from workflows import options as o
    from workflows.discovery import DiscoveryWorkflow
    from workflows.expansion import ExpansionWorkflow
    from workflows.update import UpdateWorkflow

#: stages whose workflows exist in this build
IMPLEMENTED_STAGES = frozenset({Stage.DISCOVERY, Stage.EXPANSION, Stage.UPDATE})


@workflow.defn(name="GenerationWorkflow")
class GenerationWorkflow:
    """One generation of a lineage."""

    @workflow.run
    async def run(self, inp: GenerationInput) -> GenerationResult:
        """Run the enabled stages in order and record the generation in the store."""
        await self._record(inp, "running")
        ran: list[str] = []
        skipped: list[str] = [s.value for s in inp.spec.stages if s not in IMPLEMENTED_STAGES]
        result = GenerationResult(
            index=inp.index, stages_run=ran, stages_skipped=skipped, contract_hash=inp.contract_hash, adapter=inp.adapter
        )
        if Stage.DISCOVERY in inp.spec.stages:
            disc: DiscoveryResult = await self._stage(
                inp,
                Stage.DISCOVERY,
                DiscoveryWorkflow.run,
                DiscoveryInput(
                    lineage_id=inp.lineage_id,
                    generation=inp.index,
                    spec=inp.spec,
                    contract_hash=inp.contract_hash,
                    adapter=inp.adapter,
                ),
            )
            ran.append(Stage.DISCOVERY.value)
            result.admitted_tasks = disc.admitted
        if Stage.EXPANSION in inp.spec.stages:
            exp: ExpansionResult = await self._stage(
                inp,
                Stage.EXPANSION,
                ExpansionWorkflow.run,
                ExpansionInput(
                    lineage_id=inp.lineage_id,
                    generation=inp.index,
                    spec=inp.spec,
                    contract_hash=inp.contract_hash,
                    adapter=inp.adapter,
                ),
            )
            ran.append(Stage.EXPANSION.value)
            result.trials, result.passed, result.solved_tasks = exp.trials, exp.passed, exp.solved_tasks
            result.successor_contract_hash = exp.successor_contract_hash
            if exp.successor_contract_hash:
                result.contract_hash = exp.successor_contract_hash
        if Stage.UPDATE in inp.spec.stages:
            upd: UpdateResult = await self._stage(
                inp,
                Stage.UPDATE,
                UpdateWorkflow.run,
                UpdateInput(
                    lineage_id=inp.lineage_id,
                    generation=inp.index,
                    spec=inp.spec,
                    contract_hash=inp.contract_hash,
                    adapter=inp.adapter,
                    successor_contract_hash=result.successor_contract_hash,
                ),
            )
            ran.append(Stage.UPDATE.value)
            # the next generation's pair: a registered adapter comes with its own successor
            # contract; otherwise the adapter stays and the contract is Expansion's choice
            if str(upd.outcome) == "registered":
                result.contract_hash, result.adapter = upd.contract_hash, upd.adapter
            result.update_outcome = str(upd.outcome)
        result.stages_run = ran
        await self._record(inp, "completed", result)
        return result

    @staticmethod
    async def _stage(inp: GenerationInput, stage: Stage, run, arg):
        """Run one stage as a child workflow, its id and search attributes derived from the lineage."""
        return await workflow.execute_child_workflow(
            run,
            arg,
            id=o.child_id(inp.lineage_id, inp.index, stage.value),
            search_attributes=o.search_attributes(inp.lineage_id, inp.index, stage.value),
        )

    async def _record(self, inp: GenerationInput, status: str, result: GenerationResult | None = None) -> None:
        event = GenerationEvent(
            lineage_id=inp.lineage_id,
            index=inp.index,
            status=status,
            contract_hash=inp.contract_hash,
            adapter=inp.adapter,
            stages_run=result.stages_run if result else [],
            stages_skipped=result.stages_skipped if result else [],
            record=result.model_dump(mode="json") if result else {},
        )
        await o.store_activity(o.RECORD_GENERATION, event)
