"""UpdateWorkflow: [rollouts] -> selection -> training -> validation -> registration -> hand-off -> promotion gate.

Each step is an activity called by stable name. With ``update.rollout_attempts`` the stage
first rolls the next pair's contract out on the search split (on-policy GRPO groups).
Training reads search-split trials only,
and runs with validation on the sandbox queue (Ray tasks; training asks for a GPU when
the cluster has one and heartbeats step, loss and reward statistics). The candidate pair
is the new adapter revision plus the successor contract (Expansion's pick, or the
parent's contract) with ``model.adapter`` naming the revision. The promotion gate then
runs that pair and the successor contract with the parent's adapter on the selection
split (same tasks, same attempts) and promotes the adapter only on that evidence
(:func:`mindforge.evaluation.decide_promotion`); the sealed split is not read here.

When selection (or tokenisation) leaves no group with signal, validation rejects the
adapter, or the gate does not promote it, the next pair keeps the parent's adapter (with
Expansion's successor contract): a recorded outcome, not a failure.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from mindforge.evaluation import PairRef, PromotionDecision
    from mindforge.payloads import (
        HandOffInput,
        HandOffResult,
        PlanPromotionInput,
        PromotionPlan,
        RecordUpdateInput,
        RegisterAdapterInput,
        RegisterAdapterResult,
        RolloutPlan,
        RunTrialsInput,
        SelectTrajectoriesResult,
        TrainAdapterInput,
        TrainAdapterResult,
        TrialStage,
        UpdateInput,
        UpdateOutcome,
        UpdateResult,
        ValidateAdapterInput,
        ValidationFailure,
    )
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
        """Train, validate, register and hand off a new adapter revision; promote it on selection evidence."""
        heartbeat = inp.runtime.heartbeat_timeout_sec
        # the next pair when the new adapter is not promoted: Expansion's contract, the parent's adapter
        kept = PairRef(contract_hash=inp.successor_contract_hash or inp.contract_hash, adapter=inp.adapter)
        if inp.update.rollout_attempts:
            await self._rollouts(inp, kept)
        sel: SelectTrajectoriesResult = await o.store_activity(o.SELECT_TRAJECTORIES, inp, SelectTrajectoriesResult)
        counts = {"selected_groups": sel.report.kept_groups, "selected_trials": sel.report.kept_trials}
        if not sel.report.groups:
            record = self._record(inp, UpdateOutcome.NO_SIGNAL, kept, reason="selection kept no group with signal")
            return await self._finish(record, counts)
        training = TrainAdapterInput(
            lineage_id=inp.lineage_id, generation=inp.generation, update=inp.update, runtime=inp.runtime,
            adapter_name=sel.adapter_name, groups=sel.report.groups, parent_adapter_path=sel.parent_adapter_path,
        )
        train: TrainAdapterResult = await o.sandbox_activity(
            o.TRAIN_ADAPTER, training, TrainAdapterResult, timeout=o.TRAIN_TIMEOUT, heartbeat_timeout_sec=heartbeat
        )
        if not train.trained or train.train is None:
            return await self._finish(self._record(inp, UpdateOutcome.NO_SIGNAL, kept, reason=train.reason), counts)
        validation = ValidateAdapterInput(
            adapter_dir=train.adapter_dir, base_model_path=inp.update.base_model_path or "",
            max_rank=inp.update.max_rank,
        )
        try:
            report: AdapterReport = await o.sandbox_activity(
                o.VALIDATE_ADAPTER, validation, AdapterReport,
                timeout=o.VALIDATE_TIMEOUT, heartbeat_timeout_sec=heartbeat,
            )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in VALIDATION_ERRORS:
                failure = ValidationFailure(error=cause.type, message=cause.message)
                return await self._finish(self._record(inp, UpdateOutcome.REJECTED, kept, validation=failure), counts)
            raise
        reg: RegisterAdapterResult = await o.store_activity(
            o.REGISTER_ADAPTER,
            RegisterAdapterInput(
                lineage_id=inp.lineage_id,
                generation=inp.generation,
                adapter_name=sel.adapter_name,
                revision=sel.revision,
                parent=inp.pair,
                successor_contract_hash=inp.successor_contract_hash,
                base_model_path=inp.update.base_model_path or "",
                trainer=inp.update.trainer,
                report=report,
                train=train.train,
                trial_ids=sel.report.trial_ids,
            ),
            RegisterAdapterResult,
        )
        handoff = HandOffInput(
            lineage_id=inp.lineage_id, generation=inp.generation, runtime=inp.runtime,
            serving_urls=inp.update.serving_urls, adapter_name=reg.adapter_name, adapter_dir=train.adapter_dir,
        )
        await workflow.execute_activity(
            o.HAND_OFF_ADAPTER,
            handoff,
            result_type=HandOffResult,
            start_to_close_timeout=o.HAND_OFF_TIMEOUT,
            heartbeat_timeout=o.HAND_OFF_HEARTBEAT,
            retry_policy=o.STORE_RETRY,
        )
        successor = PairRef(contract_hash=reg.successor_contract_hash, adapter=reg.adapter_name)
        decision = await self._promotion(inp, kept, successor)
        outcome = UpdateOutcome.PROMOTED if decision.promoted else UpdateOutcome.NOT_PROMOTED
        record = self._record(inp, outcome, successor if decision.promoted else kept)
        return await self._finish(record, counts, adapter_revision_id=reg.adapter_revision_id, promotion=decision)

    async def _rollouts(self, inp: UpdateInput, pair: PairRef) -> None:
        """On-policy rollouts on the search split (GRPO groups), under the contract the plan names."""
        plan: RolloutPlan = await o.store_activity(o.PLAN_ROLLOUT_TRIALS, inp, RolloutPlan)
        size = inp.runtime.trial_batch_size
        await asyncio.gather(
            *(
                o.run_trials(
                    RunTrialsInput(
                        lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.ROLLOUT,
                        contract_hash=plan.contract_hash, adapter=pair.adapter, policy_url=inp.runtime.policy_url,
                        trials=plan.trials[i : i + size],
                    ),
                    inp.runtime.heartbeat_timeout_sec,
                )
                for i in range(0, len(plan.trials), size)
            )
        )

    async def _promotion(self, inp: UpdateInput, without: PairRef, with_adapter: PairRef) -> PromotionDecision:
        """Run both pairs on the selection split (same tasks and attempts), then decide."""
        gate = PlanPromotionInput(
            lineage_id=inp.lineage_id, generation=inp.generation, runtime=inp.runtime, evaluation=inp.evaluation,
            update=inp.update, without=without, with_adapter=with_adapter,
        )
        plan: PromotionPlan = await o.store_activity(o.PLAN_PROMOTION_TRIALS, gate, PromotionPlan)
        await asyncio.gather(*(o.run_trials(b, inp.runtime.heartbeat_timeout_sec) for b in plan.batches))
        return await o.store_activity(o.DECIDE_PROMOTION, gate, PromotionDecision)

    @staticmethod
    def _record(inp: UpdateInput, outcome: UpdateOutcome, next_pair: PairRef, **detail) -> RecordUpdateInput:
        return RecordUpdateInput(
            lineage_id=inp.lineage_id, generation=inp.generation, outcome=outcome, next_pair=next_pair, **detail
        )

    async def _finish(
        self,
        record: RecordUpdateInput,
        counts: dict[str, int],
        *,
        adapter_revision_id: str | None = None,
        promotion: PromotionDecision | None = None,
    ) -> UpdateResult:
        await o.store_activity(o.RECORD_UPDATE, record)
        return UpdateResult(
            outcome=record.outcome,
            contract_hash=record.next_pair.contract_hash,
            adapter=record.next_pair.adapter,
            adapter_revision_id=adapter_revision_id,
            promotion=promotion,
            **counts,
        )
