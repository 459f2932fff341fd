"""LineageWorkflow: N generations of one model-harness pair, durable across crashes.

One generation per run, then continue-as-new with the successor pair, so the history
stays small however many generations run. Signals: ``pause`` (takes effect before the
next generation starts), ``resume``, ``cancel`` (cancels the running generation and ends
the lineage as cancelled). Query: ``status``.

A run started with ``extend`` (``mindforge lineage extend``, a nightly schedule) adds
generations to a lineage already in the store: ``continue_lineage`` gives the stored
spec, the next index (after the last completed generation), that generation's successor
pair and the root pair, and the run goes on from there.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from mindforge.domain import RunStatus
    from mindforge.evaluation import PairRef
    from mindforge.payloads import (
        ContinueLineageInput,
        GenerationInput,
        GenerationResult,
        LineageEvent,
        LineageInput,
        LineageState,
        LineageStatus,
        PrepareCurriculumInput,
        PrepareCurriculumResult,
        PrepareLineageInput,
        PrepareLineageResult,
    )
    from workflows import options as o
    from workflows.generation import GenerationWorkflow


@workflow.defn(name="LineageWorkflow")
class LineageWorkflow:
    """Runs a lineage's generations."""

    def __init__(self) -> None:
        self._paused = False
        self._cancel = False
        self._state = LineageState.STARTING
        self._inp: LineageInput | None = None
        self._stages: dict[int, list[str]] = {}
        self._child: workflow.ChildWorkflowHandle | None = None

    @workflow.signal
    def pause(self) -> None:
        """Pause before the next generation starts."""
        self._paused = True

    @workflow.signal
    def resume(self) -> None:
        """Resume a paused lineage."""
        self._paused = False

    @workflow.signal
    def cancel(self) -> None:
        """Cancel the running generation and end the lineage."""
        self._cancel = True
        if self._child is not None:
            self._child.cancel()

    @workflow.query
    def status(self) -> LineageStatus:
        """Current state, generation and the stages each generation ran."""
        inp = self._inp
        return LineageStatus(
            lineage_id=inp.lineage_id if inp else "",
            state=self._state,
            generation=inp.next_generation if inp else 0,
            generations=inp.spec.generations if inp else 0,
            paused=self._paused,
            stages_run=self._stages,
        )

    @workflow.run
    async def run(self, inp: LineageInput) -> LineageStatus:
        """Run the next generation, then continue-as-new; finish after ``spec.generations``."""
        if inp.extend and not inp.prepared:
            # a run that adds generations to a stored lineage: its pool, splits and pairs come from the store
            inp = await o.store_activity(
                o.CONTINUE_LINEAGE,
                ContinueLineageInput(
                    lineage_id=inp.lineage_id, generations=inp.extend, workflow_id=workflow.info().workflow_id,
                    run_id=workflow.info().run_id,
                ),
                LineageInput,
            )
        self._inp = inp
        self._paused = self._paused or inp.paused
        if not inp.prepared:
            curriculum = None
            if inp.spec.curriculum is not None:  # the family instances, drawn and validated on the sandbox queue
                curriculum = await o.sandbox_activity(
                    o.PREPARE_CURRICULUM,
                    PrepareCurriculumInput(lineage_id=inp.lineage_id, curriculum=inp.spec.curriculum),
                    PrepareCurriculumResult, timeout=o.CURRICULUM_TIMEOUT,
                    heartbeat_timeout_sec=inp.spec.runtime.heartbeat_timeout_sec,
                )
            prep: PrepareLineageResult = await o.store_activity(
                o.PREPARE_LINEAGE,
                PrepareLineageInput(
                    lineage_id=inp.lineage_id, spec=inp.spec, workflow_id=workflow.info().workflow_id,
                    curriculum=curriculum,
                ),
                PrepareLineageResult,
            )
            inp.contract_hash, inp.prepared = prep.contract_hash, True
            inp.root_contract_hash, inp.root_adapter = prep.contract_hash, inp.adapter
        if inp.next_generation >= inp.spec.generations:
            return await self._finish(inp, RunStatus.COMPLETED)
        if self._paused:
            self._state = LineageState.PAUSED
            await self._set_status(inp, RunStatus.PAUSED)
            await workflow.wait_condition(lambda: not self._paused or self._cancel)
        if self._cancel:
            return await self._finish(inp, RunStatus.CANCELLED)
        self._state = LineageState.RUNNING
        await self._set_status(inp, RunStatus.RUNNING)
        gen = inp.next_generation
        self._child = await workflow.start_child_workflow(
            GenerationWorkflow.run,
            GenerationInput(
                lineage_id=inp.lineage_id, index=gen, spec=inp.spec, contract_hash=inp.contract_hash,
                adapter=inp.adapter,
                root=PairRef(contract_hash=inp.root_contract_hash or inp.contract_hash, adapter=inp.root_adapter),
            ),
            id=o.child_id(inp.lineage_id, gen),
            search_attributes=o.search_attributes(inp.lineage_id, gen),
        )
        try:
            result: GenerationResult = await self._child
        except (ChildWorkflowError, asyncio.CancelledError):
            if self._cancel:
                return await self._finish(inp, RunStatus.CANCELLED)
            await self._set_status(inp, RunStatus.FAILED)
            raise
        self._child = None
        self._stages[gen] = result.stages_run
        if self._cancel:
            return await self._finish(inp, RunStatus.CANCELLED)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            LineageInput(
                lineage_id=inp.lineage_id,
                spec=inp.spec,
                next_generation=gen + 1,
                contract_hash=result.contract_hash,
                adapter=result.adapter,
                root_contract_hash=inp.root_contract_hash,
                root_adapter=inp.root_adapter,
                paused=self._paused,
                prepared=True,
            )
        )

    async def _set_status(self, inp: LineageInput, status: RunStatus) -> None:
        await o.store_activity(
            o.SET_LINEAGE_STATUS,
            # the generation in progress, or the last one once all have run (indices from 0)
            LineageEvent(
                lineage_id=inp.lineage_id, status=status,
                current_generation=min(inp.next_generation, inp.spec.generations - 1),
            ),
        )

    async def _finish(self, inp: LineageInput, status: RunStatus) -> LineageStatus:
        self._state = LineageState(status.value)
        await self._set_status(inp, status)
        return self.status()
