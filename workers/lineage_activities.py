"""Lineage activities: store bookkeeping on the orchestration queue, trial fan-out on the sandbox queue.

Activities take small inputs (ids, specs), do the I/O, and return small results; trial
records go to the store, big artifacts stay files. ``run_trials`` submits one Ray task per
trial that has no stored record yet, heartbeats while it waits, and stores each record as
it arrives, so a retried activity (after a worker crash) never runs or counts a finished
trial twice. Bad input raises non-retryable ``ApplicationError``s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation import (
    PoolSplit,
    SplitCandidate,
    SplitTooSmallError,
    StageSplitError,
    assign_splits,
    check_split_sizes,
    split_counts,
)
from mindforge.payloads import (
    ExpansionInput,
    ExpansionResult,
    GenerationEvent,
    LineageEvent,
    LineageSpec,
    PlanTrialsResult,
    PrepareLineageInput,
    PrepareLineageResult,
    RunTrialsInput,
    RunTrialsResult,
    TrialSpec,
    TrialStage,
)
from mindforge.payloads.ray_tasks import RunTrialTaskInput, RunTrialTaskResult, SandboxSettings
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, registry, trials
from mindforge.store.errors import NotFoundError
from mindforge.store.models import Lineage, RunStatus, TaskSource
from mindforge.trials.record import TrialRecord, utcnow


def _non_retryable(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


def pool_assignment(spec: LineageSpec, lineage_id: str, tasks: list[Any]) -> dict[str, PoolSplit]:
    """The splits of a lineage's starting pool (:func:`mindforge.evaluation.assign_splits`).

    Args:
        spec: the lineage spec (its ``splits`` config).
        lineage_id: the split key.
        tasks: loaded tasks (``mindforge.tasks.model.Task``).

    Returns:
        task content hash -> split.
    """
    candidates = [
        SplitCandidate(task_hash=t.content_hash, task_id=t.id, category=t.config.metadata.category) for t in tasks
    ]
    return assign_splits(candidates, spec.evaluation.splits, split_key=lineage_id)


class LineageActivities:
    """Activities bound to one store.

    Args:
        db_url: SQLAlchemy URL of the store (migrated on construction).
        settings: the worker's settings; their artifact root and Docker settings travel
            in every trial's Ray task input (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, db_url: str, settings: Settings | None = None) -> None:
        self.engine = store_engine.init_db(db_url)
        self.sandbox = SandboxSettings.from_settings(settings or get_settings())

    # ------------------------------------------------------------ orchestration queue
    @activity.defn(name="prepare_lineage")
    async def prepare_lineage(self, inp: PrepareLineageInput) -> PrepareLineageResult:
        """Register the lineage, its root contract and its task pool on three splits (idempotent).

        Raises:
            ApplicationError: non-retryable, for an unreadable contract or task, or a split
                below the minimum (``SplitTooSmallError``) without ``allow_small_splits``.
        """
        try:
            return await asyncio.to_thread(self._prepare, inp)
        except (InputError, SplitTooSmallError) as exc:
            raise _non_retryable(exc) from exc

    def _prepare(self, inp: PrepareLineageInput) -> PrepareLineageResult:
        from mindforge.hcp import dump_contract, load_contract
        from mindforge.tasks.loader import load_tasks

        spec = inp.spec
        contract = load_contract(spec.contract_path)
        tasks = load_tasks([Path(p) for p in spec.tasks])
        assignment = pool_assignment(spec, inp.lineage_id, tasks)
        counts = split_counts(assignment)
        warnings = check_split_sizes(counts, spec.evaluation.splits)
        with store_engine.session_scope(self.engine) as s:
            if s.get(Lineage, inp.lineage_id) is None:
                stored = {**spec.model_dump(mode="json"), "split_warnings": warnings}
                s.add(Lineage(id=inp.lineage_id, name=spec.name, spec=stored, workflow_id=inp.workflow_id))
                s.flush()
            try:
                registry.register_hcp_contract(session=s, contract=contract)
            except NotFoundError:
                # a lineage may start from a derived contract whose parent this store has
                # never seen: it is this lineage's root (its TOML still names the parent)
                registry.register_contract(
                    session=s,
                    name=contract.mindforge.name,
                    revision=contract.mindforge.revision,
                    content_hash=contract.content_hash,
                    toml_text=dump_contract(contract),
                    edit=contract.mindforge.edit,
                )
            for t in tasks:
                pool.add_task(session=s, task=t, source=TaskSource.BUNDLED)
                pool.add_to_pool(
                    session=s, lineage_id=inp.lineage_id, task_hash=t.content_hash, split=assignment[t.content_hash],
                    added_generation=0,
                )
        return PrepareLineageResult(
            contract_hash=contract.content_hash,
            search_tasks=counts[PoolSplit.SEARCH],
            selection_tasks=counts[PoolSplit.SELECTION],
            sealed_tasks=counts[PoolSplit.SEALED],
            warnings=warnings,
        )

    @activity.defn(name="set_lineage_status")
    async def set_lineage_status(self, event: LineageEvent) -> None:
        """Write a lineage's status and current generation."""

        def work() -> None:
            with store_engine.session_scope(self.engine) as s:
                lineages.update_lineage(
                    session=s,
                    lineage_id=event.lineage_id,
                    status=event.status,
                    current_generation=event.current_generation,
                )

        await asyncio.to_thread(work)

    @activity.defn(name="record_generation")
    async def record_generation(self, event: GenerationEvent) -> None:
        """Create or update a generation row: status, pair, stages run, and the result merged into its record."""

        def work() -> None:
            with store_engine.session_scope(self.engine) as s:
                lineages.create_generation(
                    session=s, lineage_id=event.lineage_id, index=event.index, contract_hash=event.contract_hash,
                    exist_ok=True,
                )
                running = event.status == RunStatus.RUNNING
                lineages.update_generation(
                    session=s,
                    lineage_id=event.lineage_id,
                    index=event.index,
                    status=event.status,
                    record=event.result.model_dump(mode="json") if event.result is not None else None,
                    started_at=utcnow() if running else None,
                    finished_at=None if running else utcnow(),
                )
                for stage in event.stages_run:
                    lineages.mark_stage_run(
                        session=s, lineage_id=event.lineage_id, generation_index=event.index, stage=stage
                    )

        await asyncio.to_thread(work)

    @activity.defn(name="plan_expansion_trials")
    async def plan_expansion_trials(self, inp: ExpansionInput) -> PlanTrialsResult:
        """Trial specs for ``attempts`` trials of every search-split task, with deterministic ids.

        Raises:
            ApplicationError: non-retryable ``StageSplitError`` when a planned trial's task
                is not on the search split (never, unless the pool query is wrong).
        """

        def work() -> PlanTrialsResult:
            with store_engine.session_scope(self.engine) as s:
                tasks = pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id, split=PoolSplit.SEARCH)
                plan = PlanTrialsResult(trials=[
                    TrialSpec(
                        trial_id=trials.make_trial_id(
                            lineage_id=inp.lineage_id,
                            generation_index=inp.generation,
                            stage=TrialStage.EXPANSION.value,
                            task_hash=t.id,
                            contract_hash=inp.contract_hash,
                            adapter=inp.adapter,
                            attempt=a,
                        ),
                        task_path=t.path,
                        task_hash=t.id,
                        attempt=a,
                    )
                    for t in tasks
                    for a in range(inp.expansion.attempts)
                ])
                pool.check_trial_splits(
                    session=s, lineage_id=inp.lineage_id, stage=TrialStage.EXPANSION,
                    trials=[(t.trial_id, t.task_hash) for t in plan.trials],
                )
                return plan

        try:
            return await asyncio.to_thread(work)
        except StageSplitError as exc:
            raise _non_retryable(exc) from exc

    @activity.defn(name="summarize_expansion")
    async def summarize_expansion(self, inp: ExpansionInput) -> ExpansionResult:
        """Coverage of the pair on the search split from the stored trials; written to the generation record."""

        def work() -> ExpansionResult:
            with store_engine.session_scope(self.engine) as s:
                rows = trials.list_trials(
                    session=s, lineage_id=inp.lineage_id, generation_index=inp.generation,
                    stage=TrialStage.EXPANSION.value,
                )
                n_tasks = len(pool.list_pool(session=s, lineage_id=inp.lineage_id, split=PoolSplit.SEARCH))
                passed = [r for r in rows if r.reward is not None and r.reward >= 1.0]
                result = ExpansionResult(
                    trials=len(rows), passed=len(passed), solved_tasks=len({r.task_hash for r in passed}), tasks=n_tasks
                )
                lineages.update_generation(
                    session=s,
                    lineage_id=inp.lineage_id,
                    index=inp.generation,
                    record={"expansion": result.model_dump(mode="json")},
                )
                return result

        return await asyncio.to_thread(work)

    # ------------------------------------------------------------------ sandbox queue
    @activity.defn(name="run_trials")
    async def run_trials(self, inp: RunTrialsInput) -> RunTrialsResult:
        """Run the batch's trials on Ray; store each record as it arrives.

        Trials whose id is already stored are skipped (a retry after a crash). Heartbeats
        carry the number of trials done. On cancellation the Ray tasks are cancelled
        (their sandboxes are removed by the runner, or reaped on the next engine start).

        Raises:
            ApplicationError: non-retryable when the contract is not registered, or
                (``StageSplitError``) when a trial's task is on another split than the
                batch's stage allows (:func:`mindforge.evaluation.split_of_stage`).
        """
        import ray

        try:
            todo, skipped, toml_text = await asyncio.to_thread(self._todo, inp)
        except StageSplitError as exc:
            raise _non_retryable(exc) from exc
        payloads = [self._payload(inp, t, toml_text, self.sandbox) for t in todo]
        refs = [run_trial_ref(p) for p in payloads]
        ran = passed = errors = 0
        pending = list(refs)
        try:
            while pending:
                activity.heartbeat({"done": ran, "pending": len(pending)})
                ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=2.0)
                for ref in ready:
                    out: RunTrialTaskResult = ray.get(ref)
                    rec = out.record
                    await asyncio.to_thread(self._store, inp, rec)
                    ran += 1
                    passed += int(rec.passed)
                    errors += int(not rec.has_real_reward)
        except asyncio.CancelledError:
            for ref in pending:
                ray.cancel(ref)
            raise
        return RunTrialsResult(ran=ran, skipped_existing=skipped, passed=passed, errors=errors)

    def _todo(self, inp: RunTrialsInput) -> tuple[list[TrialSpec], int, str]:
        with store_engine.session_scope(self.engine) as s:
            contract = registry.get_contract(session=s, content_hash=inp.contract_hash)
            if contract is None:
                raise ApplicationError(
                    f"contract {inp.contract_hash} is not registered", type="InputError", non_retryable=True
                )
            pool.check_trial_splits(
                session=s, lineage_id=inp.lineage_id, stage=inp.stage,
                trials=[(t.trial_id, t.task_hash) for t in inp.trials],
            )
            todo = [t for t in inp.trials if not trials.trial_exists(session=s, trial_id=t.trial_id)]
            return todo, len(inp.trials) - len(todo), contract.toml_text

    @staticmethod
    def _payload(inp: RunTrialsInput, t: TrialSpec, toml_text: str, sandbox: SandboxSettings) -> RunTrialTaskInput:
        return RunTrialTaskInput(
            task_path=t.task_path,
            trial_id=t.trial_id,
            run_id=f"{inp.lineage_id}/g{inp.generation}/{inp.stage.value}",
            attempt=t.attempt,
            agent="model",
            contract_toml=toml_text,
            contract_hash=inp.contract_hash,
            policy_url=inp.policy_url,
            sandbox=sandbox,
        )

    def _store(self, inp: RunTrialsInput, rec: TrialRecord) -> None:
        with store_engine.session_scope(self.engine) as s:
            trials.insert_trial(
                session=s, record=rec, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=inp.stage.value
            )

    def all(self) -> list[Any]:
        """Every activity of this class, for worker registration."""
        return [
            self.prepare_lineage,
            self.set_lineage_status,
            self.record_generation,
            self.plan_expansion_trials,
            self.summarize_expansion,
            self.run_trials,
        ]


def run_trial_ref(payload: RunTrialTaskInput) -> Any:
    """Submit one trial to Ray; returns its ObjectRef."""
    from workers.ray_trials import run_trial_task

    return run_trial_task.remote(payload)
