"""UpdateWorkflow: selection -> training -> validation -> registration -> hand-off -> held-out lift.

Each step is an activity called by stable name. Training and validation run on the
sandbox queue (Ray tasks; training asks for a GPU when the cluster has one and heartbeats
step, loss and reward statistics). The successor pair is the new adapter revision plus
the successor contract (Expansion's pick, or the parent's contract) with
``model.adapter`` naming the revision. Parent and successor pairs are then evaluated on
the held-out split in the same run, and the paired lift with its bootstrap interval goes
into the generation record.

When selection (or tokenisation) leaves no group with signal, or validation rejects the
adapter, nothing is registered and the next pair is the parent pair: a recorded outcome,
not a failure.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from mindforge.orchestration import (
        SANDBOX_QUEUE,
        HandOffInput,
        HandOffResult,
        HeldoutPlan,
        MeasureLiftInput,
        PlanHeldoutInput,
        RecordUpdateInput,
        RegisterAdapterInput,
        RegisterAdapterResult,
        RunTrialsInput,
        RunTrialsResult,
        SelectTrajectoriesResult,
        Stage,
        TrainAdapterInput,
        TrainAdapterResult,
        TrialSpec,
        UpdateInput,
        UpdateOutcome,
        UpdateResult,
        ValidateAdapterInput,
    )
    from mindforge.trainer.lift import LiftReport, PairRef
    from mindforge.trainer.validate_adapter import AdapterReport
    from workflows import options as o

#: ApplicationError types of adapter validation failures (recorded as ``rejected``)
VALIDATION_ERRORS = frozenset(
    {"EmptyAdapterError", "UnservableAdapterError", "RankLimitError", "ZeroAdapterError", "NoEffectError"}
)


@workflow.defn(name="UpdateWorkflow")
class UpdateWorkflow:
    """Update stage of one generation."""

    @workflow.run
    async def run(self, inp: UpdateInput) -> UpdateResult:
        """Train, validate, register and hand off a new adapter revision; measure its held-out lift."""
        parent = PairRef(contract_hash=inp.contract_hash, adapter=inp.adapter)
        sel: SelectTrajectoriesResult = await o.store_activity(
            o.SELECT_TRAJECTORIES,
            inp,
            SelectTrajectoriesResult,
        )
        counts = {"selected_groups": sel.report.kept_groups, "selected_trials": sel.report.kept_trials}
        if not sel.report.groups:
            detail = {"reason": "selection kept no group with signal"}
            return await self._finish(inp, UpdateOutcome.NO_SIGNAL, parent, detail, counts)
        train: TrainAdapterResult = await workflow.execute_activity(
            o.TRAIN_ADAPTER,
            TrainAdapterInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                spec=inp.spec,
                adapter_name=sel.adapter_name,
                groups=sel.report.groups,
                parent_adapter_path=sel.parent_adapter_path,
            ),
            result_type=TrainAdapterResult,
            task_queue=SANDBOX_QUEUE,
            start_to_close_timeout=timedelta(hours=24),
            heartbeat_timeout=timedelta(seconds=inp.spec.heartbeat_timeout_sec),
            retry_policy=o.TRIALS_RETRY,
        )
        if not train.trained or train.train is None:
            return await self._finish(inp, UpdateOutcome.NO_SIGNAL, parent, {"reason": train.reason}, counts)
        try:
            report: AdapterReport = await workflow.execute_activity(
                o.VALIDATE_ADAPTER,
                ValidateAdapterInput(
                    adapter_dir=train.adapter_dir,
                    base_model_path=inp.spec.base_model_path or "",
                    max_rank=inp.spec.max_rank,
                ),
                result_type=AdapterReport,
                task_queue=SANDBOX_QUEUE,
                start_to_close_timeout=timedelta(hours=2),
                heartbeat_timeout=timedelta(seconds=inp.spec.heartbeat_timeout_sec),
                retry_policy=o.TRIALS_RETRY,
            )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in VALIDATION_ERRORS:
                detail = {"validation": {"error": cause.type, "message": cause.message}}
                return await self._finish(inp, UpdateOutcome.REJECTED, parent, detail, counts)
            raise
        reg: RegisterAdapterResult = await o.store_activity(
            o.REGISTER_ADAPTER,
            RegisterAdapterInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                adapter_name=sel.adapter_name,
                revision=sel.revision,
                parent=parent,
                successor_contract_hash=inp.successor_contract_hash,
                base_model_path=inp.spec.base_model_path or "",
                trainer=inp.spec.trainer,
                report=report,
                train=train.train,
                trial_ids=sel.report.trial_ids,
            ),
            RegisterAdapterResult,
        )
        await workflow.execute_activity(
            o.HAND_OFF_ADAPTER,
            HandOffInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                spec=inp.spec,
                adapter_name=reg.adapter_name,
                adapter_dir=train.adapter_dir,
            ),
            result_type=HandOffResult,
            start_to_close_timeout=timedelta(minutes=30),
            heartbeat_timeout=timedelta(minutes=10),
            retry_policy=o.STORE_RETRY,
        )
        successor = PairRef(contract_hash=reg.successor_contract_hash, adapter=reg.adapter_name)
        lift = await self._heldout(inp, parent, successor)
        return await self._finish(
            inp, UpdateOutcome.REGISTERED, successor, {}, counts, adapter_revision_id=reg.adapter_revision_id, lift=lift
        )

    async def _heldout(self, inp: UpdateInput, parent: PairRef, successor: PairRef) -> LiftReport:
        """Run both pairs on the held-out split (same tasks and attempts), then measure the lift."""
        plan: HeldoutPlan = await o.store_activity(
            o.PLAN_HELDOUT_TRIALS,
            PlanHeldoutInput(
                lineage_id=inp.lineage_id, generation=inp.generation, spec=inp.spec, parent=parent, successor=successor
            ),
            HeldoutPlan,
        )
        size = inp.spec.trial_batch_size
        runs = []
        for pair, specs in ((parent, plan.parent), (successor, plan.successor)):
            for start in range(0, len(specs), size):
                runs.append(self._run_trials(inp, pair, specs[start : start + size]))
        await asyncio.gather(*runs)
        return await o.store_activity(
            o.MEASURE_LIFT,
            MeasureLiftInput(
                lineage_id=inp.lineage_id, generation=inp.generation, spec=inp.spec, parent=parent, successor=successor
            ),
            LiftReport,
        )

    async def _run_trials(self, inp: UpdateInput, pair: PairRef, batch: list[TrialSpec]) -> RunTrialsResult:
        return await o.run_trials(
            RunTrialsInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                stage=Stage.HELDOUT,
                contract_hash=pair.contract_hash,
                adapter=pair.adapter,
                policy_url=inp.spec.policy_url,
                trials=batch,
            ),
            inp.spec.heartbeat_timeout_sec,
        )

    async def _finish(
        self,
        inp: UpdateInput,
        outcome: UpdateOutcome,
        next_pair: PairRef,
        detail: dict,
        counts: dict,
        *,
        adapter_revision_id: str | None = None,
        lift: LiftReport | None = None,
    ) -> UpdateResult:
        await o.store_activity(
            o.RECORD_UPDATE,
            RecordUpdateInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                outcome=outcome,
                next_pair=next_pair,
                detail=detail,
            ),
        )
        return UpdateResult(
            outcome=outcome,
            contract_hash=next_pair.contract_hash,
            adapter=next_pair.adapter,
            adapter_revision_id=adapter_revision_id,
            lift=lift,
            **counts,
        )
