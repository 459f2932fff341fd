"""Update activities of the orchestration queue: select trajectories, register, hand off, promotion gate.

These are store and HTTP activities; training and validation, which submit Ray tasks
from the sandbox queue, are in :mod:`workers.training_activities`. Every Update
activity writes its part of the generation record under ``record["update"]``
(``selection``, ``training``, ``adapter``, ``successor_contract``, ``handoff``,
``promotion``, ``outcome``, ``next_pair``). Training reads search-split trials only; the
promotion gate reads selection-split trials only (``promotion.decided_on``); the sealed
lift is measured after the stage, for the whole generation
(:mod:`workers.evaluation_activities`).

Errors: bad input (no base model path, an unregistered contract) and hand-off refusals
are non-retryable ``ApplicationError``s; a validation failure is non-retryable with the
validation error's class name as its type (the workflow records it as ``rejected``); an
unreachable endpoint is retryable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation import PoolSplit, PromotionDecision, decide_promotion
from mindforge.payloads import (
    HandOffInput,
    HandOffResult,
    PlanPromotionInput,
    PromotionPlan,
    RecordUpdateInput,
    RegisterAdapterInput,
    RegisterAdapterResult,
    RolloutPlan,
    SelectTrajectoriesResult,
    TrialSpec,
    TrialStage,
    UpdateInput,
)
from mindforge.policy.handoff import (
    EndpointUnavailableError,
    ServingError,
    hand_off,
    versioned_adapter_name,
)
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, registry, trials
from mindforge.store.models import AdapterRevisionCreate
from mindforge.trainer.selection import select_groups
from workers.evaluation_activities import plan_pair_trials, split_records, split_tasks

#: the trial stages training reads (on search-split tasks): base evaluation, search, rollouts
TRAINED_STAGES = frozenset({TrialStage.EXPANSION.value, TrialStage.SEARCH.value, TrialStage.ROLLOUT.value})


def non_retryable_error(exc: Exception) -> ApplicationError:
    """``exc`` as a non-retryable ``ApplicationError`` typed with its class name."""
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


def successor_contract(base: Any, adapter_name: str) -> Any:
    """The successor contract: ``base`` with ``model.adapter`` set to the new revision's name.

    Derived with :func:`mindforge.hcp.derive` (recorded edit ``adapter -> <name>``); its
    revision is the base's with ``+<name>`` (a previous adapter's suffix replaced).
    """
    from mindforge.hcp import derive

    revision = base.mindforge.revision
    old = base.model.adapter
    if old and revision.endswith(f"+{old}"):
        revision = revision[: -len(old) - 1]
    edit = f"adapter -> {adapter_name}"
    return derive(base, revision=f"{revision}+{adapter_name}", edit=edit, changes={"model.adapter": adapter_name})


def merge_update_record(session, lineage_id: str, index: int, parts: dict[str, Any], top: dict | None = None) -> None:
    """Merge ``parts`` into the generation's ``record["update"]`` (and ``top`` into the record)."""
    generation = lineages.get_generation(session=session, lineage_id=lineage_id, index=index)
    current = dict(generation.record.get("update") or {}) if generation is not None else {}
    lineages.update_generation(
        session=session, lineage_id=lineage_id, index=index, record={"update": {**current, **parts}, **(top or {})}
    )


class UpdateActivities:
    """Activities bound to one store and artifact root.

    Args:
        engine: a SQLAlchemy engine of the migrated store.
        artifact_root: adapters go to ``<artifact_root>/adapters/<lineage>/<name>``.
    """

    def __init__(self, engine, artifact_root: Path) -> None:
        self.engine = engine
        self.artifact_root = Path(artifact_root)

    # ------------------------------------------------------------ orchestration queue
    @activity.defn(name="plan_rollout_trials")
    async def plan_rollout_trials(self, inp: UpdateInput) -> RolloutPlan:
        """``update.rollout_attempts`` trials of every search task, with the parent's adapter, for GRPO groups.

        They run under the next pair's contract when it passed a search-split trial this
        generation (base evaluation or search); otherwise under the contract that passed
        the most such trials (the search's best single contract: trajectories of what
        worked), and none when no contract passed any - rollouts could not hold a group
        with contrast. The choice reads search-split trials only. Deterministic ids
        (stage ``rollout``), so a retried workflow runs none twice; recorded under
        ``update.rollouts``.

        Raises:
            StageSplitError: a planned trial's task is not on the search split
                (non-retryable by name: ``workflows.options.NON_RETRYABLE``).
        """
        return await asyncio.to_thread(self._plan_rollouts, inp)

    def _plan_rollouts(self, inp: UpdateInput) -> RolloutPlan:
        next_contract = inp.successor_contract_hash or inp.contract_hash
        search_stages = (TrialStage.EXPANSION.value, TrialStage.SEARCH.value)
        with store_engine.session_scope(self.engine) as s:
            passed: dict[str, int] = {}
            rows = trials.list_trials(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, passed=True
            )
            for r in rows:
                if r.stage in search_stages and r.contract_hash:
                    passed[r.contract_hash] = passed.get(r.contract_hash, 0) + 1
            if passed.get(next_contract):
                contract_hash, note = next_contract, "the next pair's contract"
            elif passed:
                contract_hash = max(sorted(passed), key=lambda h: passed[h])
                note = "the next pair's contract passed no search trial; the search's best single contract"
            else:
                note = "skipped: no contract passed a search trial this generation"
                merge_update_record(s, inp.lineage_id, inp.generation, {"rollouts": {"note": note}})
                return RolloutPlan(note=note)
            tasks = pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id, split=PoolSplit.SEARCH)
            specs = [
                TrialSpec(
                    trial_id=trials.make_trial_id(
                        lineage_id=inp.lineage_id, generation_index=inp.generation, stage=TrialStage.ROLLOUT.value,
                        task_hash=t.id, contract_hash=contract_hash, adapter=inp.adapter, attempt=a,
                    ),
                    task_path=t.path, task_hash=t.id, attempt=a,
                )
                for t in tasks
                for a in range(inp.update.rollout_attempts)
            ]
            pool.check_trial_splits(
                session=s, lineage_id=inp.lineage_id, stage=TrialStage.ROLLOUT,
                trials=[(t.trial_id, t.task_hash) for t in specs],
            )
            merge_update_record(
                s, inp.lineage_id, inp.generation,
                {"rollouts": {"contract_hash": contract_hash, "trials": len(specs), "note": note}},
            )
        return RolloutPlan(contract_hash=contract_hash, trials=specs, note=note)

    @activity.defn(name="select_trajectories")
    async def select_trajectories(self, inp: UpdateInput) -> SelectTrajectoriesResult:
        """Build GRPO groups from the generation's trials; record the counts; name the new revision.

        Raises:
            ApplicationError: non-retryable ``InputError`` when the spec has no base model path.
        """
        try:
            return await asyncio.to_thread(self._select, inp)
        except InputError as exc:
            raise non_retryable_error(exc) from exc

    def _select(self, inp: UpdateInput) -> SelectTrajectoriesResult:
        if not inp.update.base_model_path:
            reason = "the Update stage needs a local base model directory to train on"
            raise InputError(f"lineage {inp.lineage_id} spec", "base_model_path", reason)
        with store_engine.session_scope(self.engine) as s:
            # selection and sealed tasks are never trained on
            not_search = (
                split_tasks(s, inp.lineage_id, PoolSplit.SELECTION) | split_tasks(s, inp.lineage_id, PoolSplit.SEALED)
            )
            rows = trials.list_trials(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
            records = [r.to_record() for r in rows if r.stage in TRAINED_STAGES]
            audits = {
                a.trial_id: a
                for a in trials.list_audits(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
            }
            report = select_groups(
                records,
                not_search,
                max_groups_per_task=inp.update.max_groups_per_task,
                max_trials_per_group=inp.update.max_trials_per_group,
                audits=audits,
            )
            adapters = registry.list_adapters(session=s, lineage_id=inp.lineage_id)
            prefix = versioned_adapter_name(inp.lineage_id, inp.generation, 0)[:-1]
            mine = [a for a in adapters if a.name.startswith(prefix)]  # a rerun of this generation's Update
            revision = mine[0].revision if mine else len(adapters)
            parent = registry.get_adapter_by_name(session=s, name=inp.adapter) if inp.adapter else None
            merge_update_record(s, inp.lineage_id, inp.generation, {"selection": report.counts()})
        return SelectTrajectoriesResult(
            report=report,
            adapter_name=versioned_adapter_name(inp.lineage_id, inp.generation, revision),
            revision=revision,
            parent_adapter_path=parent.path if parent is not None else None,
        )

    @activity.defn(name="register_adapter")
    async def register_adapter(self, inp: RegisterAdapterInput) -> RegisterAdapterResult:
        """Register the validated adapter revision (immutable) and the successor contract that names it.

        Raises:
            ApplicationError: non-retryable when a contract is not registered, or the
                adapter name is bound to other weights (``AdapterImmutableError``).
        """
        from mindforge.store.errors import AdapterImmutableError

        try:
            return await asyncio.to_thread(self._register, inp)
        except (InputError, AdapterImmutableError) as exc:
            raise non_retryable_error(exc) from exc

    def _contract(self, session, content_hash: str):
        from mindforge.hcp import loads_contract

        row = registry.get_contract(session=session, content_hash=content_hash)
        if row is None:
            raise InputError("store table contracts", content_hash, "contract is not registered")
        return loads_contract(row.toml_text, source=f"contract {content_hash}")

    def _register(self, inp: RegisterAdapterInput) -> RegisterAdapterResult:
        report, train = inp.report, inp.train
        with store_engine.session_scope(self.engine) as s:
            parent_contract = self._contract(s, inp.parent.contract_hash)
            parent_row = None
            if inp.parent.adapter:
                parent_row = registry.get_adapter_by_name(session=s, name=inp.parent.adapter)
            training_config = {
                "trainer": inp.trainer.model_dump(mode="json"),
                "base_model_path": inp.base_model_path,
                "generation": inp.generation,
                "parent_adapter_path": str(train.parent_adapter) if train.parent_adapter else None,
                "weight_sha256": report.weight_sha256,
                **train.model_dump(mode="json", include={"steps", "samples_used", "device", "dtype", "seed"}),
            }
            row = registry.register_adapter(
                session=s,
                adapter_in=AdapterRevisionCreate(
                    name=inp.adapter_name,
                    base_model=parent_contract.model.id,
                    lineage_id=inp.lineage_id,
                    revision=inp.revision,
                    parent_id=parent_row.id if parent_row is not None else None,
                    path=str(report.adapter_dir),
                    sha256=report.sha256,
                    rank=report.rank,
                    alpha=report.lora_alpha,
                    target_modules=report.target_modules,
                    training_config=training_config,
                    trial_ids=inp.trial_ids,
                ),
            )
            base = self._contract(s, inp.successor_contract_hash or inp.parent.contract_hash)
            successor = successor_contract(base, inp.adapter_name)
            registry.register_hcp_contract(session=s, contract=successor)
            fields = {"id", "name", "revision", "path", "sha256", "base_model", "rank", "alpha", "target_modules"}
            adapter = {
                **row.model_dump(mode="json", include=fields),
                "parent": inp.parent.adapter or None,
                "trials": len(row.trial_ids),
                "max_abs_logit_diff": report.max_abs_logit_diff,
            }
            contract = {"hash": successor.content_hash, "ref": successor.ref, "edit": successor.mindforge.edit}
            merge_update_record(s, inp.lineage_id, inp.generation, {"adapter": adapter, "successor_contract": contract})
            return RegisterAdapterResult(
                adapter_revision_id=row.id,
                adapter_name=row.name,
                sha256=row.sha256,
                successor_contract_hash=successor.content_hash,
                successor_contract_ref=successor.ref,
            )

    @activity.defn(name="hand_off_adapter")
    async def hand_off_adapter(self, inp: HandOffInput) -> HandOffResult:
        """Load the revision under its versioned name into the policy endpoint and ``serving_urls``; probe each.

        Raises:
            ApplicationError: retryable when an endpoint is unreachable; non-retryable
                when it refuses the name (bound to other weights), the adapter, or the probe.
        """
        from mindforge.settings import get_settings

        # the policy endpoint always gets it: the next rollouts and the evaluation trials ask it for the name
        urls = list(dict.fromkeys([inp.runtime.policy_url or get_settings().policy_url, *inp.serving_urls]))
        records = []
        for url in urls:
            activity.heartbeat({"endpoint": url})
            try:
                records.append(await asyncio.to_thread(hand_off, url, inp.adapter_name, inp.adapter_dir))
            except EndpointUnavailableError as exc:
                raise ApplicationError(str(exc), type=type(exc).__name__) from exc
            except ServingError as exc:
                raise non_retryable_error(exc) from exc
        endpoints = [r.model_dump(mode="json") for r in records]  # the generation record keeps JSON

        def work() -> None:
            with store_engine.session_scope(self.engine) as s:
                merge_update_record(s, inp.lineage_id, inp.generation, {"handoff": endpoints})

        await asyncio.to_thread(work)
        return HandOffResult(endpoints=records)

    @activity.defn(name="plan_promotion_trials")
    async def plan_promotion_trials(self, inp: PlanPromotionInput) -> PromotionPlan:
        """Selection trials of the successor contract with and without the new adapter (same tasks, attempts)."""

        def work() -> PromotionPlan:
            with store_engine.session_scope(self.engine) as s:
                pairs = [inp.without, inp.with_adapter]
                batches, n = plan_pair_trials(
                    s, inp.lineage_id, inp.generation, inp.runtime, inp.evaluation, PoolSplit.SELECTION, pairs
                )
            return PromotionPlan(batches=batches, tasks=n)

        return await asyncio.to_thread(work)

    @activity.defn(name="decide_promotion")
    async def decide_promotion(self, inp: PlanPromotionInput) -> PromotionDecision:
        """The promotion gate on selection trials only (:func:`mindforge.evaluation.decide_promotion`); recorded.

        The decision (``decided_on: "selection"``, the trial ids read, the selection lift)
        goes to ``record["update"]["promotion"]``.
        """

        def work() -> PromotionDecision:
            with store_engine.session_scope(self.engine) as s:
                records, tasks = split_records(s, inp.lineage_id, inp.generation, PoolSplit.SELECTION)
                decision = decide_promotion(
                    records, inp.without, inp.with_adapter, tasks, min_tasks=inp.evaluation.splits.min_tasks,
                    margin=inp.update.promotion_margin,
                    resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed,
                )
                merge_update_record(s, inp.lineage_id, inp.generation, {"promotion": decision.model_dump(mode="json")})
                return decision

        return await asyncio.to_thread(work)

    @activity.defn(name="record_update")
    async def record_update(self, inp: RecordUpdateInput) -> None:
        """Record the Update's outcome, its detail and the next generation's pair."""

        def work() -> None:
            with store_engine.session_scope(self.engine) as s:
                parts: dict[str, Any] = {"outcome": inp.outcome.value, "next_pair": inp.next_pair.model_dump()}
                if inp.reason:
                    parts["reason"] = inp.reason
                if inp.validation is not None:
                    parts["validation"] = inp.validation.model_dump()
                merge_update_record(s, inp.lineage_id, inp.generation, parts)

        await asyncio.to_thread(work)

    def orchestration_activities(self) -> list[Any]:
        """Activities of the orchestration queue (store and HTTP only)."""
        return [
            self.plan_rollout_trials,
            self.select_trajectories,
            self.register_adapter,
            self.hand_off_adapter,
            self.plan_promotion_trials,
            self.decide_promotion,
            self.record_update,
        ]
