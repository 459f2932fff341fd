"""Update activities of the orchestration queue: register, hand off, promotion gate, outcome.

These are store and HTTP activities; the on-policy loop's planning and selection are in
:mod:`workers.iteration_activities`, training and validation, which submit Ray tasks
from the sandbox queue, in :mod:`workers.training_activities`. Every Update
activity writes its part of the generation record under ``record["update"]``
(``selection``, ``training``, ``adapter``, ``successor_contract``, ``handoff``,
``promotion``, ``outcome``, ``next_pair``). Training reads search-split trials only; the
promotion gate reads selection-split trials only (``promotion.decided_on``); the sealed
lift is measured after the stage, for the whole generation
(:mod:`workers.evaluation_activities`).

Errors: bad input (no base model path, an unregistered contract), a pair off the training
contract (``OffContractError``: registration or the promotion gate under another harness
than the one Update trained under) and hand-off refusals are non-retryable
``ApplicationError``s; a validation failure is non-retryable with the validation error's
class name as its type (the workflow records it as ``rejected``); an unreachable endpoint
is retryable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation import PoolSplit, PromotionDecision
from mindforge.evaluation.decisions import decide_pair
from mindforge.evaluation.on_contract import OffContractError, check_same_harness
from mindforge.payloads import (
    HandOffInput,
    HandOffResult,
    PlanPromotionInput,
    PromotionPlan,
    RecordUpdateInput,
    RegisterAdapterInput,
    RegisterAdapterResult,
    TrialStage,
)
from mindforge.policy.handoff import (
    EndpointUnavailableError,
    ServingError,
    hand_off,
)
from mindforge.store import engine as store_engine
from mindforge.store import lineages, registry
from mindforge.store.errors import ContractNotRegisteredError
from mindforge.store.models import AdapterRevisionCreate
from workers.evaluation_activities import drop_read, pair_trial_batches, reused_trials, split_records

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
    @activity.defn(name="register_adapter")
    async def register_adapter(self, inp: RegisterAdapterInput) -> RegisterAdapterResult:
        """Register the validated adapter revision (immutable) and the successor contract that names it.

        Raises:
            ApplicationError: non-retryable when a contract is not registered
                (``ContractNotRegisteredError``), the adapter name is bound to other
                weights (``AdapterImmutableError``), or the successor's contract is not
                the training contract (``OffContractError``).
        """
        from mindforge.store.errors import AdapterImmutableError

        try:
            return await asyncio.to_thread(self._register, inp)
        except (ContractNotRegisteredError, InputError, AdapterImmutableError, OffContractError) as exc:
            raise non_retryable_error(exc) from exc

    def _contract(self, session, content_hash: str):
        from mindforge.hcp import loads_contract

        row = registry.require_contract(session=session, content_hash=content_hash)
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
            base = self._contract(s, inp.trained_under or inp.successor_contract_hash or inp.parent.contract_hash)
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
        settings = get_settings()
        urls = list(dict.fromkeys([inp.runtime.policy_url or settings.policy_url, *inp.serving_urls]))
        key = settings.policy_api_key.get_secret_value() if settings.policy_api_key else None
        records = []
        for url in urls:
            activity.heartbeat({"endpoint": url})
            try:
                records.append(await asyncio.to_thread(hand_off, url, inp.adapter_name, inp.adapter_dir, api_key=key))
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
        """Selection trials of the trained pair and the kept pair (same tasks, same attempts).

        A pair's trials already read on selection (the kept pair's from the successor race,
        or from an earlier generation that read it: :func:`workers.evaluation_activities.split_records`)
        are not run again.

        Raises:
            ApplicationError: non-retryable ``OffContractError`` when the trained pair's
                contract is not the training contract's harness (``trained_under``), or
                ``ContractNotRegisteredError`` when one of them is not registered.
        """

        def work() -> PromotionPlan:
            with store_engine.session_scope(self.engine) as s:
                self._check_gate(s, inp)
                pairs = [inp.without, inp.with_adapter]
                batches, n = pair_trial_batches(
                    s, inp.lineage_id, inp.generation, inp.runtime, inp.evaluation, PoolSplit.SELECTION, pairs
                )
                records, _tasks = split_records(s, inp.lineage_id, inp.generation, PoolSplit.SELECTION)
            return PromotionPlan(batches=drop_read(batches, records), tasks=n)

        try:
            return await asyncio.to_thread(work)
        except (ContractNotRegisteredError, InputError, OffContractError) as exc:
            raise non_retryable_error(exc) from exc

    def _check_gate(self, session, inp: PlanPromotionInput) -> None:
        """The trained pair runs under the training contract's harness (no check when it is not named).

        The kept pair it is compared with keeps its own contract (the successor check's, or
        the parent's): the gate decides the pair handed on (contract and adapter) as one.
        """
        if not inp.trained_under:
            return
        trained = self._contract(session, inp.trained_under)
        check_same_harness("pair gate", trained, self._contract(session, inp.with_adapter.contract_hash))

    @activity.defn(name="decide_promotion")
    async def decide_promotion(self, inp: PlanPromotionInput) -> PromotionDecision:
        """The pair gate on selection trials only (:func:`mindforge.evaluation.decisions.decide_pair`); recorded.

        The decision (``decided_on: "selection"``, the trial ids read and the generations that
        ran them, the trained pair's selection lift over the kept pair) goes to
        ``record["update"]["promotion"]``.
        """

        def work() -> PromotionDecision:
            with store_engine.session_scope(self.engine) as s:
                records, tasks = split_records(s, inp.lineage_id, inp.generation, PoolSplit.SELECTION)
                decision = decide_pair(
                    records, inp.without, inp.with_adapter, tasks,
                    min_tasks=inp.evaluation.splits.min_tasks, margin=inp.update.promotion_margin,
                    resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed,
                )
                decision.reused = reused_trials(
                    s, inp.lineage_id, inp.generation, PoolSplit.SELECTION, decision.trial_ids
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
            self.register_adapter,
            self.hand_off_adapter,
            self.plan_promotion_trials,
            self.decide_promotion,
            self.record_update,
        ]
