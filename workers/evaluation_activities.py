"""Selection and sealed evaluation: trials of pairs on one split, and the sealed lift.

:func:`pair_trial_batches` turns the one planner of evaluation trials
(:func:`mindforge.evaluation.pair_trials.plan_pair_trials`: the same tasks of one split
and the same attempts for every pair, in batches of ``trial_batch_size``) into trial
batches with deterministic ids and task paths from the store. A pair evaluated twice on
the same split in one generation (the successor check's winner, then the promotion gate's
baseline) gets the same ids, so ``run_trials`` runs it once. Decisions read ``selection``
trials (:mod:`workers.successor_activities`, :mod:`workers.update_activities`); the
sealed lift, here, reads ``sealed`` trials and decides nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.evaluation import PairRef, PoolSplit, paired_lift
from mindforge.evaluation.compounding import GenerationCompounding, measure_generation
from mindforge.evaluation.curriculum import (
    HEADLINE_READINGS,
    READING_NAMES,
    READING_ORDER,
    ReadingsRecord,
    SealedReading,
)
from mindforge.evaluation.lift import Baseline, LiftReport
from mindforge.evaluation.pair_trials import STAGE_OF_SPLIT, pair_stage, plan_pair_trials
from mindforge.payloads import (
    EvaluationSpec,
    RuntimeSpec,
    RunTrialsInput,
    SealedEvaluationInput,
    SealedLiftResult,
    SealedPlan,
    TrialSpec,
)
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, trials
from mindforge.store.errors import SealedSplitFrozenError
from mindforge.store.models import TaskSource
from workers.sealed_labels import current_readings, refresh_labels


def split_tasks(session, lineage_id: str, split: PoolSplit) -> set[str]:
    """Content hashes of a lineage's tasks on one split."""
    return {m.task_hash for m in pool.list_pool(session=session, lineage_id=lineage_id, split=split)}


def check_sealed_frozen(session, lineage_id: str) -> None:
    """Check that the sealed split is the one the lineage started with.

    Raises:
        SealedSplitFrozenError: a sealed task joined the pool after the lineage started: a
            discovered task, or one added by a later generation (only ``prepare_lineage``
            puts tasks on the sealed split).
    """
    late = [m.task_hash for m in pool.list_pool(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED)
            if m.added_generation]
    late += [
        t.id for t in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED)
        if t.source == TaskSource.DISCOVERED
    ]
    if late:
        raise SealedSplitFrozenError(
            f"lineage {lineage_id!r}: sealed task(s) {', '.join(sorted(h[:12] for h in set(late)))} joined after the "
            "lineage started; the sealed split is frozen when the lineage starts"
        )


def pair_trial_batches(
    session,
    lineage_id: str,
    generation: int,
    runtime: RuntimeSpec,
    evaluation: EvaluationSpec,
    split: PoolSplit,
    pairs: list[PairRef],
) -> tuple[list[RunTrialsInput], int]:
    """Trial batches of ``pairs`` on every task of ``split``, planned by :func:`plan_pair_trials`.

    Args:
        session: an open store session.
        lineage_id / generation: where the trials run.
        runtime: batch size and policy endpoint.
        evaluation: attempts per task and pair (on the sealed split, the sealed-instances
            reading's tasks get ``sealed_instance_attempts`` when it is set).
        split: ``selection`` or ``sealed``.
        pairs: the pairs (a pair listed twice is planned once).

    Returns:
        ``(batches, number of tasks on the split)``; trial ids from
        :func:`mindforge.store.trials.make_trial_id`.

    Raises:
        ValueError: ``split`` is the search split (it is never evaluated this way).
        mindforge.evaluation.StageSplitError: a planned trial's task is not on ``split``
            (non-retryable by name: ``workflows.options.NON_RETRYABLE``).
    """
    stage = pair_stage(split)
    tasks = pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=split)
    paths = {t.id: t.path for t in tasks}
    attempts = (evaluation.sealed_attempts or evaluation.attempts) if split == PoolSplit.SEALED else evaluation.attempts
    attempts_of = None
    if split == PoolSplit.SEALED and evaluation.sealed_instance_attempts:
        instances = current_readings(session, lineage_id).readings.get(SealedReading.INSTANCES, [])
        attempts_of = dict.fromkeys(instances, evaluation.sealed_instance_attempts)
    planned = plan_pair_trials(
        pairs, [t.id for t in tasks], attempts=attempts, batch_size=runtime.trial_batch_size, attempts_of=attempts_of
    )
    batches = [
        RunTrialsInput(
            lineage_id=lineage_id, generation=generation, stage=stage, contract_hash=batch[0].contract_hash,
            adapter=batch[0].adapter, policy_url=runtime.policy_url,
            trials=[
                TrialSpec(
                    trial_id=trials.make_trial_id(
                        lineage_id=lineage_id, generation_index=generation, stage=stage.value, task_hash=c.task_hash,
                        contract_hash=c.contract_hash, adapter=c.adapter, attempt=c.attempt,
                    ),
                    task_path=paths[c.task_hash],
                    task_hash=c.task_hash,
                    attempt=c.attempt,
                )
                for c in batch
            ],
        )
        for batch in planned
    ]
    pool.check_trial_splits(
        session=session, lineage_id=lineage_id, stage=stage,
        trials=[(t.trial_id, t.task_hash) for b in batches for t in b.trials],
    )
    return batches, len(tasks)


def lineage_readings(session, lineage_id: str) -> ReadingsRecord:
    """The lineage's sealed readings as last checked (:func:`workers.sealed_labels.current_readings`).

    A lineage prepared before readings were recorded reads its whole sealed split as
    *sealed tasks*.
    """
    return current_readings(session, lineage_id)


def lineage_sealed_records(session, lineage_id: str) -> tuple[list[Any], set[str]]:
    """Every sealed trial of the lineage (all generations) on its sealed tasks, and those tasks.

    The sealed split is frozen and a pair's sealed trials do not depend on the generation
    that ran them, so every generation reads a pair's trials wherever they were run: a
    pair is run once per lineage (``plan_sealed_trials`` drops what is stored), and a later
    generation that reads it again re-reads the same trials, never a different figure.
    """
    tasks = split_tasks(session, lineage_id, PoolSplit.SEALED)
    rows = trials.list_trials(session=session, lineage_id=lineage_id, stage=STAGE_OF_SPLIT[PoolSplit.SEALED].value)
    return [r.to_record() for r in rows if r.task_hash in tasks], tasks


def trial_generations(session, lineage_id: str, split: PoolSplit) -> dict[str, int]:
    """Trial id -> the generation that ran it, for the lineage's evaluation trials on ``split``."""
    rows = trials.list_trials(session=session, lineage_id=lineage_id, stage=STAGE_OF_SPLIT[split].value)
    return {r.trial_id: r.generation_index for r in rows if r.generation_index is not None}


def split_records(session, lineage_id: str, generation: int, split: PoolSplit) -> tuple[list[Any], set[str]]:
    """The evaluation trials on one split that generation ``generation`` reads, and the split's task hashes.

    The split is frozen and a trial's sampling seed depends on its task and attempt only
    (:func:`mindforge.trials.seeds.paired_seed`), so a pair's trial of one task attempt
    measures the same thing in whichever generation it ran: the generation reads every
    trial of generations ``0..generation``, one per (contract, adapter, task, attempt)
    (the earliest), and a pair measured before - the parent, handed on from the last
    generation's gate - is not run again. Reusing the parent's trials from the gate that
    chose it can only favour the parent (they won that gate), never a new candidate.
    """
    tasks = split_tasks(session, lineage_id, split)
    rows = trials.list_trials(session=session, lineage_id=lineage_id, stage=STAGE_OF_SPLIT[split].value)
    first: dict[tuple[str, str, str, int], Any] = {}
    for r in sorted(rows, key=lambda r: (r.generation_index if r.generation_index is not None else -1)):
        if r.task_hash not in tasks or (r.generation_index or 0) > generation:
            continue
        first.setdefault((r.contract_hash or "", r.adapter, r.task_hash, r.attempt), r)
    return [r.to_record() for r in first.values()], tasks


def reused_trials(session, lineage_id: str, generation: int, split: PoolSplit, trial_ids: list[str]) -> list[dict]:
    """Which earlier generations ran the trials a decision or reading of generation ``generation`` read.

    Args:
        session: an open store session.
        lineage_id / generation: the reader.
        split: the split the trials are on (``selection`` or ``sealed``).
        trial_ids: the ids read.

    Returns:
        ``{"generation", "contract_hash", "adapter", "trials"}`` per earlier generation and pair,
        oldest first (empty when every trial read was run by ``generation`` itself).
    """
    wanted = set(trial_ids)
    counts: dict[tuple[int, str, str], int] = {}
    for r in trials.list_trials(session=session, lineage_id=lineage_id, stage=STAGE_OF_SPLIT[split].value):
        g = r.generation_index if r.generation_index is not None else -1
        if r.trial_id in wanted and g < generation:
            key = (g, r.contract_hash or "", r.adapter)
            counts[key] = counts.get(key, 0) + 1
    return [
        {"generation": g, "contract_hash": c, "adapter": a, "trials": n} for (g, c, a), n in sorted(counts.items())
    ]


def drop_read(batches: list[RunTrialsInput], records: list[Any]) -> list[RunTrialsInput]:
    """``batches`` without the trials whose (contract, adapter, task, attempt) ``records`` hold; none left empty."""
    read = {(r.contract_hash or "", r.adapter, r.task_hash, r.attempt) for r in records}
    kept = [
        b.model_copy(
            update={"trials": [t for t in b.trials if (b.contract_hash, b.adapter, t.task_hash, t.attempt) not in read]}
        )
        for b in batches
    ]
    return [b for b in kept if b.trials]


class EvaluationActivities:
    """Sealed evaluation activities bound to one store (all on the orchestration queue).

    Args:
        engine: SQLAlchemy engine of the migrated store.
    """

    def __init__(self, engine) -> None:
        self.engine = engine

    @activity.defn(name="plan_sealed_trials")
    async def plan_sealed_trials(self, inp: SealedEvaluationInput) -> SealedPlan:
        """Sealed trials of the parent, the successor, generation 0's pair and the harness-only pair.

        Every generation runs its parent on the sealed split even when it hands the
        parent on, so each pair of the compounding table has a sealed figure; the
        harness-only pair runs only when both the contract and the adapter changed.
        Nothing runs when the lineage has no sealed tasks.

        Raises:
            ApplicationError: non-retryable (``SealedSplitFrozenError``) when a sealed task
                joined the pool after the lineage started.
        """

        def work() -> SealedPlan:
            with store_engine.session_scope(self.engine) as s:
                check_sealed_frozen(s, inp.lineage_id)
                batches, n = pair_trial_batches(
                    s, inp.lineage_id, inp.generation, inp.runtime, inp.evaluation, PoolSplit.SEALED, self._pairs(inp)
                )
                records, _tasks = lineage_sealed_records(s, inp.lineage_id)
            if not n:
                return SealedPlan(note="the lineage has no sealed tasks")
            return SealedPlan(batches=drop_read(batches, records), tasks=n)

        try:
            return await asyncio.to_thread(work)
        except SealedSplitFrozenError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc

    @staticmethod
    def _pairs(inp: SealedEvaluationInput) -> list[PairRef]:
        pairs = [inp.parent, inp.successor]
        if inp.root is not None:
            pairs.append(inp.root)
        if inp.harness is not None:
            pairs.append(inp.harness)
        return list({(p.contract_hash, p.adapter): p for p in pairs}.values())

    @activity.defn(name="measure_sealed_lift")
    async def measure_sealed_lift(self, inp: SealedEvaluationInput) -> SealedLiftResult:
        """The successor's paired sealed lift on every sealed reading, apart; recorded.

        The labels are checked first (:func:`workers.sealed_labels.refresh_labels`). The
        generation record gets, per reading, never one reading under a general name:
        ``sealed_lifts`` and ``sealed_lifts_vs_root`` (reading -> ``{"mean", "lo", "hi",
        "n_tasks", "n_trials", "unit", "n_units", "method", "measured_on": "sealed", ...}``
        or None, the headline readings - instances, families, tasks - always present) with
        ``sealed_lift_reasons``; the full reports under ``evaluation[reading]``; and the
        compounding rows under ``readings[reading]`` (and ``reading_parts``: the instances
        reading's copyable and needs-adaptation parts)
        (:class:`mindforge.evaluation.compounding.GenerationCompounding`: every pair's sealed
        score, ``lift_vs_prev``, ``lift_vs_root`` and the harness/weights attribution).
        Intervals are by unit: families for the family readings, tasks otherwise
        (:mod:`mindforge.evaluation.intervals`).
        """
        return await asyncio.to_thread(self._measure, inp)

    def _measure(self, inp: SealedEvaluationInput) -> SealedLiftResult:
        with store_engine.session_scope(self.engine) as s:
            records, all_tasks = lineage_sealed_records(s, inp.lineage_id)
            ran = trial_generations(s, inp.lineage_id, PoolSplit.SEALED)
            labels = refresh_labels(s, inp.lineage_id, f"generation {inp.generation}: before the sealed measurement")
            figures, reports = {}, {}
            for reading in READING_ORDER:
                if tasks := labels.tasks_of(reading) & all_tasks:
                    units, unit = labels.units_of(reading)
                    figures[reading.value] = self._compounding(inp, records, tasks, ran, units, unit)
                    reports[reading.value] = self._reports(inp, records, tasks, units, unit)
            units, unit = labels.units_of(SealedReading.INSTANCES)
            parts = {
                name: self._compounding(inp, records, tasks & all_tasks, ran, units, unit)
                for name, tasks in labels.parts_of_instances().items() if tasks & all_tasks
            }
            out = SealedLiftResult()
            vs_root: dict[str, Any] = {}
            for reading in READING_ORDER:
                row = figures.get(reading.value)
                if row is None and reading not in HEADLINE_READINGS:
                    continue
                out.lifts[reading.value] = row.lift_vs_prev if row is not None else None
                out.reasons[reading.value] = (
                    (row.lift_vs_prev_reason if row.lift_vs_prev is None else "") if row is not None
                    else f"the lineage has no {READING_NAMES[reading]}"
                )
                vs_root[reading.value] = row.lift_vs_root if row is not None and inp.root is not None else None
            record = {
                "sealed_lifts": out.lifts,
                "sealed_lift_reasons": out.reasons,
                "sealed_lifts_vs_root": vs_root,
                "evaluation": reports,
                "readings": {name: row.model_dump(mode="json") for name, row in figures.items()},
                "reading_parts": {name: row.model_dump(mode="json") for name, row in parts.items()},
            }
            lineages.update_generation(session=s, lineage_id=inp.lineage_id, index=inp.generation, record=record)
            return out

    @staticmethod
    def _compounding(
        inp: SealedEvaluationInput, records: list[Any], tasks: set[str], ran: dict[str, int] | None = None,
        units: dict[str, str] | None = None, unit: str = "task",
    ) -> GenerationCompounding:
        """One reading's compounding row: every pair's sealed score (and the generations that ran it), the lifts."""
        return measure_generation(
            records, tasks, generation=inp.generation, parent=inp.parent, successor=inp.successor, root=inp.root,
            harness=inp.harness, attempts=inp.evaluation.sealed_attempts or inp.evaluation.attempts,
            resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed, generation_of=ran,
            units=units if units is not None else {}, unit=unit,
        )

    @staticmethod
    def _reports(
        inp: SealedEvaluationInput, records: list[Any], tasks: set[str], units: dict[str, str], unit: str
    ) -> dict[str, Any]:
        """One reading's full lift reports (per task, every trial id read): over the parent and over the root."""

        def lift(parent: PairRef, baseline: Baseline) -> LiftReport:
            return paired_lift(
                records, parent, inp.successor, tasks, measured_on=PoolSplit.SEALED, baseline=baseline,
                resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed, units=units, unit=unit,
            )

        def same(a: PairRef, b: PairRef) -> bool:
            return (a.contract_hash, a.adapter) == (b.contract_hash, b.adapter)

        root = inp.root
        return {
            "sealed_tasks": len(tasks),
            "parent": None if same(inp.parent, inp.successor) else lift(inp.parent, "parent").model_dump(mode="json"),
            "root": lift(root, "root").model_dump(mode="json") if root is not None and not same(root, inp.successor)
            else None,
        }

    def all(self) -> list[Any]:
        """Every activity of this class."""
        return [self.plan_sealed_trials, self.measure_sealed_lift]
