"""Lineage activities: store bookkeeping on the orchestration queue.

Activities take small inputs (ids, specs), do the I/O, and return small results; trial
records go to the store, big artifacts stay files. Running the trials every stage plans
is :mod:`workers.trial_activities` (``run_trials``, on the sandbox queue). Bad input
raises non-retryable ``ApplicationError``s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation import (
    PairRef,
    PoolSplit,
    SplitCandidate,
    SplitTooSmallError,
    StageSplitError,
    assign_splits,
    check_split_sizes,
    split_counts,
)
from mindforge.evaluation.curriculum import ReadingsRecord, classify_sealed, sealed_origins
from mindforge.payloads import (
    ContinueLineageInput,
    ExpansionInput,
    ExpansionResult,
    GenerationEvent,
    LineageEvent,
    LineageInput,
    LineageSpec,
    PlanTrialsResult,
    PrepareCurriculumResult,
    PrepareLineageInput,
    PrepareLineageResult,
    TrialSpec,
    TrialStage,
)
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, registry, trials
from mindforge.store.errors import NotFoundError
from mindforge.store.models import Lineage, RunStatus, TaskSource
from mindforge.trials.record import utcnow
from workers.gate_sizing import gate_power_record
from workers.sealed_labels import check_labels, read_solution


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


class StartingPool:
    """A lineage's starting pool: the loaded tasks, the split of each and where each came from.

    Attributes:
        tasks: every task (hand-written, pinned sealed, family instances), each once.
        assignment: task content hash -> split.
        instances: task content hash -> the curriculum's record of a family instance.
        pinned: content hashes of the hand-written tasks pinned sealed (``--sealed-tasks``).
    """

    def __init__(
        self, tasks: list[Any], assignment: dict[str, PoolSplit], instances: dict[str, Any],
        pinned: set[str] | None = None,
    ) -> None:
        self.tasks, self.assignment, self.instances = tasks, assignment, instances
        self.pinned = set(pinned or ())

    def source_of(self, task: Any) -> tuple[TaskSource, dict[str, Any]]:
        """(source, provenance) of a pool task: a family instance names its family, parameters hash and level."""
        inst = self.instances.get(task.content_hash)
        if inst is None:
            return TaskSource.BUNDLED, {}
        return TaskSource.FAMILY, {"family": inst.family, "instance_id": inst.instance_id, "level": inst.level}


def pool_of(spec: LineageSpec, lineage_id: str, curriculum: PrepareCurriculumResult | None) -> StartingPool:
    """The starting pool: ``spec.tasks`` split by the fractions, ``spec.sealed_tasks`` sealed, instances as dealt.

    Raises:
        InputError: a task does not load, or one task is given both to split and to seal.
    """
    from mindforge.tasks.loader import load_tasks

    tasks = load_tasks([Path(p) for p in spec.tasks]) if spec.tasks else []
    assignment = pool_assignment(spec, lineage_id, tasks)
    sealed = load_tasks([Path(p) for p in spec.sealed_tasks]) if spec.sealed_tasks else []
    for t in sealed:
        if t.content_hash in assignment:
            raise InputError(t.path, "--sealed-tasks", "is also one of the tasks to split (--tasks)")
        assignment[t.content_hash] = PoolSplit.SEALED
    instances = list(curriculum.instances) if curriculum is not None else []
    loaded = load_tasks([Path(i.path) for i in instances]) if instances else []
    by_hash = {}
    for inst, task in zip(instances, loaded, strict=True):
        assignment.setdefault(task.content_hash, inst.split)
        by_hash[task.content_hash] = inst
    return StartingPool([*tasks, *sealed, *loaded], assignment, by_hash, {t.content_hash for t in sealed})


def readings_record(spec: LineageSpec, pool_tasks: StartingPool) -> ReadingsRecord:
    """The sealed readings of a starting pool, labelled by provenance and checked at lineage start.

    Each sealed task's origin (:class:`mindforge.evaluation.curriculum.SealedOrigin`): a
    family instance (of a training or a held-out family), a hand-written task pinned sealed
    (``--sealed-tasks`` or a split override) or one dealt to sealed by fraction. Then the
    restatement and copyable checks run against the search split's reference solutions,
    which the library's first round mines (:func:`workers.sealed_labels.check_labels`).
    """
    held_out = spec.curriculum.sealed_families if spec.curriculum is not None else []
    family_of = {h: inst.family for h, inst in pool_tasks.instances.items()}
    by_hash = {t.content_hash: t for t in pool_tasks.tasks}
    sealed = [h for h, split in pool_tasks.assignment.items() if split == PoolSplit.SEALED]
    overrides = {t for t, split in spec.evaluation.splits.overrides.items() if PoolSplit(split) == PoolSplit.SEALED}
    pinned = pool_tasks.pinned | {h for h in sealed if by_hash[h].id in overrides}
    origins = sealed_origins(sealed, family_of, held_out, pinned)
    record = ReadingsRecord(
        training_families=spec.curriculum.training_families if spec.curriculum is not None else [],
        sealed_families=list(held_out),
        readings=classify_sealed(sealed, family_of, held_out, origins),
        family_of=family_of,
        origins=origins,
        task_ids={h: by_hash[h].id for h in sealed},
    )
    solutions = {h: text for h, t in by_hash.items() if (text := read_solution(t.path)) is not None}
    search = {by_hash[h].id: solutions[h] for h, split in pool_tasks.assignment.items()
              if split == PoolSplit.SEARCH and h in solutions}
    return check_labels(
        record, sealed_solutions={h: solutions[h] for h in sealed if h in solutions}, search_solutions=search,
        event="lineage start",
    )


def register_root(session, contract) -> None:
    """Register a lineage's root contract (its parent's hash when the store knows the parent).

    A lineage may start from a derived contract whose parent this store has never seen: it
    is then registered as a root (parent None; its TOML still names the parent).
    """
    from mindforge.hcp import dump_contract

    try:
        registry.register_hcp_contract(session=session, contract=contract)
    except NotFoundError:
        registry.register_contract(
            session=session,
            name=contract.mindforge.name,
            revision=contract.mindforge.revision,
            content_hash=contract.content_hash,
            toml_text=dump_contract(contract),
            edit=contract.mindforge.edit,
        )


class LineageActivities:
    """Activities bound to one store (all on the orchestration queue).

    Args:
        db_url: SQLAlchemy URL of the store (migrated on construction).
    """

    def __init__(self, db_url: str) -> None:
        self.engine = store_engine.init_db(db_url)

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
        from mindforge.hcp import load_contract

        spec = inp.spec
        contract = load_contract(spec.contract_path)
        pool_tasks = pool_of(spec, inp.lineage_id, inp.curriculum)
        counts = split_counts(pool_tasks.assignment)
        warnings = check_split_sizes(counts, spec.evaluation.splits)
        readings = readings_record(spec, pool_tasks)
        with store_engine.session_scope(self.engine) as s:
            if s.get(Lineage, inp.lineage_id) is None:
                stored = {
                    **spec.model_dump(mode="json"), "split_warnings": warnings,
                    "readings": readings.model_dump(mode="json"),
                }
                if inp.curriculum is not None:
                    stored["curriculum_prep"] = inp.curriculum.model_dump(mode="json", exclude={"instances"})
                s.add(Lineage(id=inp.lineage_id, name=spec.name, spec=stored, workflow_id=inp.workflow_id))
                s.flush()
            # a root another lineage registered already is reused as stored: its parent may
            # have been unknown then (parent None) and known now, and the content is the same
            if registry.get_contract(session=s, content_hash=contract.content_hash) is None:
                register_root(s, contract)
            for t in pool_tasks.tasks:
                source, provenance = pool_tasks.source_of(t)
                pool.add_task(session=s, task=t, source=source, provenance=provenance)
                pool.add_to_pool(
                    session=s, lineage_id=inp.lineage_id, task_hash=t.content_hash,
                    split=pool_tasks.assignment[t.content_hash], added_generation=0,
                )
        return PrepareLineageResult(
            contract_hash=contract.content_hash,
            search_tasks=counts[PoolSplit.SEARCH],
            selection_tasks=counts[PoolSplit.SELECTION],
            sealed_tasks=counts[PoolSplit.SEALED],
            warnings=warnings,
        )

    @activity.defn(name="continue_lineage")
    async def continue_lineage(self, inp: ContinueLineageInput) -> LineageInput:
        """The state a run that adds generations to a stored lineage starts from (:mod:`workers.lineage_continue`).

        Raises:
            ApplicationError: non-retryable (``LineageNotContinuableError``) for an unknown
                lineage, one still running or paused, or one without a completed generation.
        """
        from workers.lineage_continue import LineageNotContinuableError, continuation

        def work() -> LineageInput:
            with store_engine.session_scope(self.engine) as s:
                return continuation(s, inp)

        try:
            return await asyncio.to_thread(work)
        except LineageNotContinuableError as exc:
            raise _non_retryable(exc) from exc

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
        """Create or update a generation row: status, pair, stages run, and the result merged into its record.

        When the generation starts, its record also gets ``gate_power``: each gate re-sized
        at the parent's measured selection rate (:func:`gate_power_record`).
        """

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
                if running:  # what this generation's gates can detect, at its parent's measured rate
                    parent = PairRef(contract_hash=event.contract_hash, adapter=event.adapter)
                    power = gate_power_record(s, event.lineage_id, event.index, parent)
                    if power:
                        lineages.update_generation(
                            session=s, lineage_id=event.lineage_id, index=event.index, record={"gate_power": power}
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

    def all(self) -> list[Any]:
        """Every activity of this class, for worker registration."""
        return [
            self.prepare_lineage,
            self.continue_lineage,
            self.set_lineage_status,
            self.record_generation,
            self.plan_expansion_trials,
            self.summarize_expansion,
        ]

