"""GenerationWorkflow: Discovery -> Expansion -> Update as child workflows, then the sealed lift.

Child ids derive from the lineage id (``<lineage>-gen-<i>-<stage>``). After the enabled
stages, the generation measures the pair it hands on against its parent (and against
generation 0's pair, and - when contract and adapter both changed - against the
harness-only pair, for the attribution) on the sealed split: the only place sealed trials
run, and nothing is decided on them.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.domain import RunStatus
    from mindforge.evaluation import PairRef
    from mindforge.payloads import (
        DiscoveryInput,
        DiscoveryResult,
        ExpansionInput,
        ExpansionResult,
        GenerationEvent,
        GenerationInput,
        GenerationResult,
        SealedEvaluationInput,
        SealedLiftResult,
        SealedPlan,
        Stage,
        UpdateInput,
        UpdateResult,
    )
    from workflows import options as o
    from workflows.discovery import DiscoveryWorkflow
    from workflows.expansion import ExpansionWorkflow
    from workflows.update import UpdateWorkflow


@workflow.defn(name="GenerationWorkflow")
class GenerationWorkflow:
    """One generation of a lineage."""

    @workflow.run
    async def run(self, inp: GenerationInput) -> GenerationResult:
        """Run the enabled stages in order, measure the sealed lift, and record the generation."""
        await self._record(inp, RunStatus.RUNNING)
        ran: list[str] = []
        result = GenerationResult(index=inp.index, stages_run=ran, contract_hash=inp.contract_hash, adapter=inp.adapter)
        clock = workflow.now()
        if Stage.DISCOVERY in inp.spec.stages:
            disc: DiscoveryResult = await self._child(
                inp, Stage.DISCOVERY, DiscoveryWorkflow.run, self._discovery_input(inp), DiscoveryResult
            )
            ran.append(Stage.DISCOVERY.value)
            result.admitted_tasks = disc.admitted
            clock = self._lap(result, "discovery", clock)
        if Stage.EXPANSION in inp.spec.stages:
            exp: ExpansionResult = await self._child(
                inp, Stage.EXPANSION, ExpansionWorkflow.run, self._expansion_input(inp), ExpansionResult
            )
            ran.append(Stage.EXPANSION.value)
            result.trials, result.passed, result.solved_tasks = exp.trials, exp.passed, exp.solved_tasks
            result.successor_contract_hash = exp.successor_contract_hash
            if exp.successor_contract_hash:
                result.contract_hash = exp.successor_contract_hash
            result.stage_sec.update({f"expansion.{k}": v for k, v in exp.stage_sec.items()})
            clock = workflow.now()
        trained_under = ""
        if Stage.UPDATE in inp.spec.stages:
            upd: UpdateResult = await self._child(
                inp, Stage.UPDATE, UpdateWorkflow.run, self._update_input(inp, result.successor_contract_hash),
                UpdateResult,
            )
            ran.append(Stage.UPDATE.value)
            # the next generation's pair, as the Update's promotion gate decided it
            result.contract_hash, result.adapter = upd.contract_hash, upd.adapter
            result.update_outcome = str(upd.outcome)
            if result.adapter != inp.adapter:
                trained_under = upd.trained_under
            clock = self._lap(result, "update", clock)
        # the harness-only pair: the new harness with the parent's adapter (the training contract's when the
        # trained pair is handed on, else the contract Expansion's successor check chose)
        harness_contract = trained_under or result.successor_contract_hash
        harness = PairRef(contract_hash=harness_contract, adapter=inp.adapter) if harness_contract else None
        lift = await self._sealed(inp, PairRef(contract_hash=result.contract_hash, adapter=result.adapter), harness)
        result.sealed_lifts = lift.lifts  # one figure per sealed reading, each named
        self._lap(result, "sealed", clock)
        result.stages_run = ran
        await self._record(inp, RunStatus.COMPLETED, result)
        return result

    async def _sealed(self, inp: GenerationInput, successor: PairRef, harness: PairRef | None) -> SealedLiftResult:
        """Run the parent, the successor, generation 0's pair and the harness-only pair on the sealed split.

        The harness-only pair (new contract, old adapter) runs only when it is neither the
        parent nor the successor: it splits the lift into a harness and a weights part.
        """
        sealed = SealedEvaluationInput(
            lineage_id=inp.lineage_id,
            generation=inp.index,
            runtime=inp.spec.runtime,
            evaluation=inp.spec.evaluation,
            parent=PairRef(contract_hash=inp.contract_hash, adapter=inp.adapter),
            successor=successor,
            root=inp.root if inp.index > 0 else None,
            harness=harness,
        )
        plan: SealedPlan = await o.store_activity(o.PLAN_SEALED_TRIALS, sealed, SealedPlan)
        await asyncio.gather(*(o.run_trials(b, inp.spec.runtime.heartbeat_timeout_sec) for b in plan.batches))
        return await o.store_activity(o.MEASURE_SEALED_LIFT, sealed, SealedLiftResult)

    @staticmethod
    def _lap(result: GenerationResult, part: str, since: datetime) -> datetime:
        """Record ``part``'s wall seconds since ``since`` (the workflow's clock, replay-safe); returns now."""
        now = workflow.now()
        result.stage_sec[part] = (now - since).total_seconds()
        return now

    @staticmethod
    def _discovery_input(inp: GenerationInput) -> DiscoveryInput:
        """Discovery on the generation's pair, with the lineage's Discovery spec."""
        return DiscoveryInput(
            lineage_id=inp.lineage_id, generation=inp.index, contract_hash=inp.contract_hash, adapter=inp.adapter,
            runtime=inp.spec.runtime, evaluation=inp.spec.evaluation, discovery=inp.spec.discovery,
        )

    @staticmethod
    def _expansion_input(inp: GenerationInput) -> ExpansionInput:
        """Expansion on the generation's pair, with the lineage's Expansion spec."""
        return ExpansionInput(
            lineage_id=inp.lineage_id, generation=inp.index, contract_hash=inp.contract_hash, adapter=inp.adapter,
            runtime=inp.spec.runtime, evaluation=inp.spec.evaluation, expansion=inp.spec.expansion,
        )

    @staticmethod
    def _update_input(inp: GenerationInput, successor_contract_hash: str | None) -> UpdateInput:
        """Update on the generation's pair, under Expansion's successor contract when it chose one."""
        return UpdateInput(
            lineage_id=inp.lineage_id, generation=inp.index, contract_hash=inp.contract_hash, adapter=inp.adapter,
            runtime=inp.spec.runtime, evaluation=inp.spec.evaluation, update=inp.spec.update,
            successor_contract_hash=successor_contract_hash,
        )

    @staticmethod
    async def _child(inp: GenerationInput, stage: Stage, run, arg, result_type):
        """Run one stage as a child workflow (ids and search attributes from the lineage)."""
        return await workflow.execute_child_workflow(
            run,
            arg,
            id=o.child_id(inp.lineage_id, inp.index, stage.value),
            search_attributes=o.search_attributes(inp.lineage_id, inp.index, stage.value),
            result_type=result_type,
        )

    async def _record(self, inp: GenerationInput, status: RunStatus, result: GenerationResult | None = None) -> None:
        event = GenerationEvent(
            lineage_id=inp.lineage_id,
            index=inp.index,
            status=status,
            contract_hash=inp.contract_hash,
            adapter=inp.adapter,
            stages_run=result.stages_run if result else [],
            result=result,
        )
        await o.store_activity(o.RECORD_GENERATION, event)
