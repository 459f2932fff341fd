"""UpdateWorkflow: plan -> on-policy GRPO iterations -> validation -> registration -> hand-off -> promotion gate.

One contract: ``plan_update`` fixes the *training contract* - the contract Expansion's
successor check decided on the selection split, else the parent's - and every rollout,
training trial, the promotion gate and the successor pair use it (the activities refuse
anything else with ``OffContractError``; see :mod:`workers.iteration_activities` for why
the contract is decided before training). When it passed nothing, Update records so and
trains nothing.

With ``update.iterations`` N >= 1 the stage runs up to N on-policy iterations within
``update.time_budget_sec`` (rollouts and training share it: see ``_iterations``): each
draws ``group_size`` rollouts of up to
``tasks_per_iteration`` curriculum tasks from the current adapter, drops flat groups and
draws again from tasks that showed variance (DAPO's dynamic sampling), trains the next
adapter from the current one (a Ray task) and hands it to the policy endpoint; every
iteration is recorded (``record_iteration``). With N = 0 it trains once on the
generation's search-split trials under the training contract.

The candidate pair is the last trained adapter, registered as the new revision, plus the
training contract with ``model.adapter`` naming it. The pair gate runs it and the *kept*
pair - what the next generation gets otherwise: Expansion's successor contract (or the
parent's) with the parent's adapter - on the selection split (same tasks, same attempts)
and hands it on only on its own gain over the kept pair; the sealed split is not read here.
When nothing trained, validation rejects the adapter, or the gate does not promote it, the
next pair keeps the parent's adapter (with Expansion's successor contract): a recorded
outcome, not a failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from mindforge.evaluation import PairRef, PromotionDecision
    from mindforge.payloads import (
        HandOffInput,
        HandOffResult,
        IterationRecord,
        PlanPromotionInput,
        PromotionPlan,
        RecordIterationInput,
        RecordUpdateInput,
        RegisterAdapterInput,
        RegisterAdapterResult,
        RolloutDrawInput,
        RolloutPlan,
        RunTrialsInput,
        SelectTrajectoriesInput,
        SelectTrajectoriesResult,
        TrainAdapterInput,
        TrainAdapterResult,
        TrialStage,
        UpdateInput,
        UpdateOutcome,
        UpdatePlan,
        UpdateResult,
        ValidateAdapterInput,
        ValidationFailure,
    )
    from mindforge.payloads.training import AdapterReport, TrainResult
    from workflows import options as o

#: ApplicationError types of adapter validation failures (recorded as ``rejected``)
VALIDATION_ERRORS = frozenset(
    {"EmptyAdapterError", "UnservableAdapterError", "RankLimitError", "ZeroAdapterError", "NoEffectError"}
)


@dataclass
class _Loop:
    """What the training part of one Update produced: the last trained adapter and its totals."""

    train: TrainAdapterResult | None = None
    trial_ids: list[str] = field(default_factory=list)
    groups: int = 0
    trials: int = 0
    iterations: int = 0
    reason: str = ""
    #: the Update's deadline (loop start + ``update.time_budget_sec``; None: no budget)
    deadline: datetime | None = None
    #: seconds the latest draw of rollouts took (what the next one is expected to take)
    draw_sec: float = 0.0


@workflow.defn(name="UpdateWorkflow")
class UpdateWorkflow:
    """Update stage of one generation."""

    @workflow.run
    async def run(self, inp: UpdateInput) -> UpdateResult:
        """Train under the training contract, validate, register, hand off; promote on selection evidence."""
        heartbeat = inp.runtime.heartbeat_timeout_sec
        # the next pair when the new adapter is not promoted: Expansion's contract, the parent's adapter
        kept = PairRef(contract_hash=inp.successor_contract_hash or inp.contract_hash, adapter=inp.adapter)
        plan: UpdatePlan = await o.store_activity(o.PLAN_UPDATE, inp, UpdatePlan)
        if not plan.contract_hash:
            return await self._finish(self._record(inp, UpdateOutcome.NO_SIGNAL, kept, reason=plan.note), _Loop())
        loop = await (self._iterations(inp, plan) if inp.update.iterations else self._offline(inp, plan))
        train = loop.train
        if train is None or train.train is None:
            reason = loop.reason or "no group with signal: nothing trained"
            return await self._finish(self._record(inp, UpdateOutcome.NO_SIGNAL, kept, reason=reason), loop)
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
                return await self._finish(self._record(inp, UpdateOutcome.REJECTED, kept, validation=failure), loop)
            raise
        reg: RegisterAdapterResult = await o.store_activity(
            o.REGISTER_ADAPTER,
            RegisterAdapterInput(
                lineage_id=inp.lineage_id, generation=inp.generation, adapter_name=plan.adapter_name,
                revision=plan.revision, parent=inp.pair, successor_contract_hash=inp.successor_contract_hash,
                trained_under=plan.contract_hash, base_model_path=inp.update.base_model_path or "",
                trainer=inp.update.trainer, report=report, train=train.train, trial_ids=loop.trial_ids,
            ),
            RegisterAdapterResult,
        )
        await self._hand_off(inp, reg.adapter_name, train.adapter_dir, inp.update.serving_urls)
        successor = PairRef(contract_hash=reg.successor_contract_hash, adapter=reg.adapter_name)
        decision = await self._promotion(inp, successor, plan.contract_hash, kept)
        outcome = UpdateOutcome.PROMOTED if decision.promoted else UpdateOutcome.NOT_PROMOTED
        record = self._record(inp, outcome, successor if decision.promoted else kept)
        return await self._finish(
            record, loop, adapter_revision_id=reg.adapter_revision_id, promotion=decision,
            trained_under=plan.contract_hash,
        )

    async def _offline(self, inp: UpdateInput, plan: UpdatePlan) -> _Loop:
        """``update.iterations`` 0: one update on the generation's search-split trials under the training contract."""
        sel: SelectTrajectoriesResult = await o.store_activity(
            o.SELECT_TRAJECTORIES,
            SelectTrajectoriesInput(
                lineage_id=inp.lineage_id, generation=inp.generation, update=inp.update,
                contract_hash=plan.contract_hash,
            ),
            SelectTrajectoriesResult,
        )
        loop = _Loop(groups=sel.report.kept_groups, trials=sel.report.kept_trials)
        if not sel.report.groups:
            loop.reason = "selection kept no group with signal"
            return loop
        loop.train = await self._train(inp, plan.adapter_name, sel, plan.parent_adapter_path)
        loop.reason = loop.train.reason
        loop.trial_ids = sel.report.trial_ids
        return loop

    async def _iterations(self, inp: UpdateInput, plan: UpdatePlan) -> _Loop:
        """On-policy GRPO: per iteration, draw groups from the current adapter, drop flat ones, redraw, train.

        Stops after ``update.iterations``, when the curriculum has no task, when the
        training contract passed neither a search-split trial nor any of the first
        iteration's rollouts, or when ``update.time_budget_sec`` is spent. The budget is a
        deadline (loop start + budget, workflow clock) that rollouts and training share: a
        draw of rollouts other than the loop's first starts only when it is expected to end
        before the deadline (it takes as long as the draw before it), and training, handed
        the deadline, stops between optimizer steps when the next step would end past it
        (:mod:`mindforge.trainer.budget`; it takes at least one step). Each trained
        iteration's adapter is handed to the policy endpoint before the next iteration
        draws from it.
        """
        spec = inp.update
        started = workflow.now()
        loop = _Loop()
        if spec.time_budget_sec is not None:
            loop.deadline = started + timedelta(seconds=spec.time_budget_sec)
        adapter, path = inp.adapter, plan.parent_adapter_path
        for i in range(spec.iterations):
            began = workflow.now()
            if i and not self._draw_fits(loop):
                spent = (began - started).total_seconds()
                loop.reason = (
                    f"the time budget of {spec.time_budget_sec:g} s would be spent before another iteration's "
                    f"rollouts end ({spent:.0f} s spent, a draw {loop.draw_sec:.0f} s): {i} iteration(s) ran"
                )
                break
            draws, tasks, note = await self._draws(inp, plan.contract_hash, adapter, i, loop)
            if not draws:
                loop.reason = note
                break
            sel: SelectTrajectoriesResult = await o.store_activity(
                o.SELECT_TRAJECTORIES,
                SelectTrajectoriesInput(
                    lineage_id=inp.lineage_id, generation=inp.generation, update=spec,
                    contract_hash=plan.contract_hash, trial_ids=draws,
                ),
                SelectTrajectoriesResult,
            )
            loop.iterations += 1
            it = IterationRecord(
                iteration=i, adapter=adapter, tasks=tasks, draws=len(draws), groups=sel.groups_drawn,
                flat_groups=sel.flat_groups,
                flat_fraction=sel.flat_groups / sel.groups_drawn if sel.groups_drawn else 0.0,
                guided_groups=sel.guided_groups,
                rollouts=sel.rollouts, passed=sel.passed, mean_reward=sel.mean_reward,
            )
            stop = i == 0 and not sel.passed and not plan.on_contract_passes
            if stop:
                it.reason = "the training contract passed none of the first iteration's rollouts: nothing to train"
                loop.reason = it.reason
            elif not sel.report.groups:
                it.reason = "every group was flat"
            else:
                train = await self._train(inp, f"{plan.adapter_name}-i{i}", sel, path, loop.deadline)
                if train.trained and train.train is not None:
                    self._count_trained(loop, it, train, train.train, sel)
                    path = train.adapter_dir
                    if i + 1 < spec.iterations:  # the next iteration draws from this adapter
                        await self._hand_off(inp, it.trained_adapter, train.adapter_dir, [])
                        adapter = it.trained_adapter
                else:
                    it.reason = train.reason
            it.seconds = (workflow.now() - began).total_seconds()
            await o.store_activity(
                o.RECORD_ITERATION,
                RecordIterationInput(lineage_id=inp.lineage_id, generation=inp.generation, record=it),
            )
            if stop:
                break
        return loop

    @staticmethod
    def _count_trained(
        loop: _Loop, it: IterationRecord, train: TrainAdapterResult, result: TrainResult, sel: SelectTrajectoriesResult
    ) -> None:
        """Record a trained iteration (``result`` is ``train.train``): its figures, and the loop's totals."""
        it.trained_adapter, it.steps = result.adapter_dir.name, result.steps
        it.planned_steps, it.stop_reason = result.planned_steps, result.stop_reason
        it.tokens_trained, it.loss = result.tokens_trained, result.mean_loss
        loop.train = train
        loop.trial_ids += sel.report.trial_ids
        loop.groups += sel.report.kept_groups
        loop.trials += sel.report.kept_trials

    @staticmethod
    def _draw_fits(loop: _Loop) -> bool:
        """Whether another draw of rollouts is expected to end before the deadline (always, with no budget)."""
        if loop.deadline is None:
            return True
        return workflow.now() + timedelta(seconds=loop.draw_sec) < loop.deadline

    async def _draws(
        self, inp: UpdateInput, contract: str, adapter: str, iteration: int, loop: _Loop
    ) -> tuple[list[list[str]], int, str]:
        """Run one iteration's draws (first draw, then redraws for flat groups); their trial ids per draw.

        A redraw starts only when it is expected to end before the deadline (:meth:`_draw_fits`).
        """
        draws: list[list[str]] = []
        tasks: set[str] = set()
        note = ""
        for d in range(inp.update.max_draws):
            if d and not self._draw_fits(loop):
                break
            drawn_at = workflow.now()
            draw = RolloutDrawInput(
                lineage_id=inp.lineage_id, generation=inp.generation, update=inp.update, contract_hash=contract,
                adapter=adapter, iteration=iteration, draw=d, draws=draws,
            )
            plan: RolloutPlan = await o.store_activity(o.PLAN_ROLLOUT_TRIALS, draw, RolloutPlan)
            note = plan.note
            if not plan.trials:
                break
            size = inp.runtime.trial_batch_size
            await asyncio.gather(
                *(
                    o.run_trials(
                        RunTrialsInput(
                            lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.ROLLOUT,
                            contract_hash=plan.contract_hash, adapter=adapter, policy_url=inp.runtime.policy_url,
                            trials=plan.trials[i : i + size],
                        ),
                        inp.runtime.heartbeat_timeout_sec,
                    )
                    for i in range(0, len(plan.trials), size)
                )
            )
            draws = [*draws, [t.trial_id for t in plan.trials]]
            tasks |= set(plan.tasks)
            loop.draw_sec = (workflow.now() - drawn_at).total_seconds()
        return draws, len(tasks), note

    async def _train(
        self, inp: UpdateInput, name: str, sel: SelectTrajectoriesResult, parent_path: str | None,
        deadline: datetime | None = None,
    ) -> TrainAdapterResult:
        """Train adapter ``name`` on the selected groups, from ``parent_path`` (a Ray task on the sandbox queue).

        ``deadline``: the Update's; the trainer stops between optimizer steps when it comes.
        """
        training = TrainAdapterInput(
            lineage_id=inp.lineage_id, generation=inp.generation, update=inp.update, runtime=inp.runtime,
            adapter_name=name, groups=sel.report.groups, parent_adapter_path=parent_path, deadline_at=deadline,
        )
        return await o.sandbox_activity(
            o.TRAIN_ADAPTER, training, TrainAdapterResult, timeout=o.TRAIN_TIMEOUT,
            heartbeat_timeout_sec=inp.runtime.heartbeat_timeout_sec,
        )

    async def _hand_off(self, inp: UpdateInput, name: str, adapter_dir: str, serving_urls: list[str]) -> None:
        """Load adapter ``name`` into the policy endpoint (and ``serving_urls``)."""
        handoff = HandOffInput(
            lineage_id=inp.lineage_id, generation=inp.generation, runtime=inp.runtime,
            serving_urls=serving_urls, adapter_name=name, adapter_dir=adapter_dir,
        )
        await workflow.execute_activity(
            o.HAND_OFF_ADAPTER,
            handoff,
            result_type=HandOffResult,
            start_to_close_timeout=o.HAND_OFF_TIMEOUT,
            heartbeat_timeout=o.HAND_OFF_HEARTBEAT,
            retry_policy=o.STORE_RETRY,
        )

    async def _promotion(
        self, inp: UpdateInput, with_adapter: PairRef, trained_under: str, kept: PairRef
    ) -> PromotionDecision:
        """The pair gate: the trained pair and the kept pair on the selection split (same tasks, attempts), decided.

        ``kept`` is the pair handed on otherwise (Expansion's contract, the parent's adapter):
        the trained pair is handed on only on its own gain over it, so a new harness's lift
        never carries an adapter that changes nothing.
        """
        gate = PlanPromotionInput(
            lineage_id=inp.lineage_id, generation=inp.generation, runtime=inp.runtime, evaluation=inp.evaluation,
            update=inp.update, without=kept, with_adapter=with_adapter, trained_under=trained_under,
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
        loop: _Loop,
        *,
        adapter_revision_id: str | None = None,
        promotion: PromotionDecision | None = None,
        trained_under: str = "",
    ) -> UpdateResult:
        await o.store_activity(o.RECORD_UPDATE, record)
        return UpdateResult(
            outcome=record.outcome,
            contract_hash=record.next_pair.contract_hash,
            adapter=record.next_pair.adapter,
            adapter_revision_id=adapter_revision_id,
            promotion=promotion,
            selected_groups=loop.groups,
            selected_trials=loop.trials,
            iterations=loop.iterations,
            trained_under=trained_under,
        )
