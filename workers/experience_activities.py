"""The experience library's activity: one growth round, replays fanned out to Ray.

``grow_experience`` runs twice per Expansion (``workflows/expansion.py``): the ``oracle``
round before the search (reference solutions of search-split tasks not judged yet), the
``model`` round after it (the generation's passed search-split trials; see
:mod:`mindforge.experience.rounds` for what is mined and why). One round:

1. mine candidates from the store (search split only: :mod:`mindforge.experience.mining`
   refuses anything else, and so does the store), then
   :func:`~mindforge.experience.validation.plan_replays` against the lineage's latest
   stored snapshot and :func:`~mindforge.experience.rounds.cap_per_task`;
2. replay each planned candidate in its own Ray task (``workers/ray_trials.py:replay_entry_task``),
   heartbeating while they run;
3. :func:`~mindforge.experience.growth.fold_round`, then in one transaction: ``add_entries``,
   ``record_rejections``, ``publish_snapshot`` (not for an empty library), the round's
   report under ``experience.<round>`` in the generation record and, when the library grew,
   the sealed readings' labels checked again against it
   (:func:`workers.sealed_labels.refresh_labels`: a pinned task an entry restates is read
   apart, a sealed instance whose answer an entry holds is copyable).

Idempotent on retry: the report is written in the same transaction as the entries, so a
retried round that finds its report returns it without mining or replaying again, and a
round retried before that point writes nothing twice (every write is insert-if-absent).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation import PoolSplit
from mindforge.experience import (
    ExperienceEntry,
    ExperienceSnapshot,
    ReplayPlan,
    mine_solution,
    mine_trial,
    plan_replays,
)
from mindforge.experience.growth import fold_round
from mindforge.experience.rounds import MODEL_STAGES, cap_per_task, oracle_pending, record_round
from mindforge.payloads import ExperienceRound, GrowExperienceInput, GrowExperienceResult
from mindforge.payloads.ray_tasks import ReplayEntryTaskInput, SandboxSettings
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as store_engine
from mindforge.store import experience as experience_repo
from mindforge.store import lineages, pool, trials
from mindforge.trials.replay import ReplayVerdict
from workers.sealed_labels import refresh_labels


@dataclass
class _Round:
    """A planned round: the library before it, the replay plan and where each task lives."""

    snapshot: ExperienceSnapshot
    plan: ReplayPlan
    paths: dict[str, str]
    candidates: int = 0
    capped: int = 0
    verdicts: list[ReplayVerdict] = field(default_factory=list)


class _Tasks:
    """The lineage's pool by content hash: search-split task paths, and every pool task's split.

    Mining is handed each task's real split (``splits``), so its search-split check
    (:func:`mindforge.experience.mining.check_search_split`) is a live second guard; the
    first is the store, which refuses an expansion or search trial on a task of another
    split when it is inserted (:class:`mindforge.evaluation.stages.StageSplitError`).
    """

    def __init__(self, session, lineage_id: str) -> None:
        self.splits: dict[str, str] = {}
        self._all: dict[str, str] = {}
        for split in PoolSplit:
            for row in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=split):
                self.splits[row.id], self._all[row.id] = split.value, row.path
        self.paths = {h: path for h, path in self._all.items() if self.splits[h] == PoolSplit.SEARCH}
        self._loaded: dict[str, Any] = {}

    def load(self, task_hash: str):
        from mindforge.tasks.loader import load_task

        if task_hash not in self._loaded:
            self._loaded[task_hash] = load_task(Path(self._all[task_hash]))
        return self._loaded[task_hash]


def _oracle_candidates(session, inp: GrowExperienceInput, tasks: _Tasks) -> list[ExperienceEntry]:
    """Candidates from the reference solutions of search-split tasks not judged yet (tasks without one skipped).

    Each is dated to the generation whose round mined it (the entry id does not depend on it).
    """
    judged = experience_repo.judged_oracle_tasks(session=session, lineage_id=inp.lineage_id)
    out: list[ExperienceEntry] = []
    for task_hash in oracle_pending(tasks.paths, judged):
        task = tasks.load(task_hash)
        solve_sh = task.solution_dir / "solve.sh"
        if not solve_sh.is_file():
            continue
        entry = mine_solution(
            task_id=task.id, task_hash=task_hash, instruction=task.instruction, solve_sh=solve_sh,
            split=tasks.splits.get(task_hash), lineage=inp.lineage_id,
        )
        if entry is not None:
            out.append(entry.model_copy(update={"generation": inp.generation}))
    return out


def _events(record) -> list[dict[str, Any]] | None:
    """The trial's transcript events, or None when it has no readable transcript."""
    from mindforge.agent.transcript import read_transcript

    path = record.artifacts.get("transcript")
    if not path or not Path(path).is_file():
        return None
    try:
        return read_transcript(Path(path))
    except (OSError, ValueError):
        return None


def _model_candidates(session, inp: GrowExperienceInput, tasks: _Tasks) -> list[ExperienceEntry]:
    """Candidates from the generation's passed trials on search-split tasks (stages :data:`MODEL_STAGES`)."""
    out: list[ExperienceEntry] = []
    for stage in MODEL_STAGES:
        rows = trials.list_trials(
            session=session, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=stage
        )
        for row in rows:
            record = row.to_record()
            if not record.passed or row.task_hash not in tasks.splits:  # a task outside the pool: not mined
                continue
            events = _events(record)
            if events is None:
                continue
            task = tasks.load(row.task_hash)
            entry = mine_trial(
                trial_id=record.trial_id, passed=True, task_id=task.id, task_hash=row.task_hash,
                instruction=task.instruction, contract_hash=record.contract_hash or "", generation=inp.generation,
                events=events, split=tasks.splits[row.task_hash], lineage=inp.lineage_id,
            )
            if entry is not None:
                out.append(entry)
    return out


def _stored_report(session, inp: GrowExperienceInput) -> GrowExperienceResult | None:
    """The round's report when an earlier attempt of this activity already wrote it."""
    generation = lineages.get_generation(session=session, lineage_id=inp.lineage_id, index=inp.generation)
    rounds = (generation.record or {}).get("experience") if generation is not None else None
    stored = rounds.get(str(inp.round)) if isinstance(rounds, dict) else None
    return GrowExperienceResult.model_validate(stored) if stored is not None else None


def _non_retryable(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


class ExperienceActivities:
    """The experience library's activity, bound to one store (sandbox queue: it runs Ray tasks).

    Args:
        engine: SQLAlchemy engine of the migrated store.
        settings: the worker's settings; their artifact root and Docker settings travel in
            each replay's Ray task input (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, engine, settings: Settings | None = None) -> None:
        self.engine = engine
        self.sandbox = SandboxSettings.from_settings(settings or get_settings())

    @activity.defn(name="grow_experience")
    async def grow_experience(self, inp: GrowExperienceInput) -> GrowExperienceResult:
        """Run one growth round (mine, plan, replay on Ray, fold, store); see the module docstring.

        Returns:
            the round's report (also written under ``experience.<round>`` in the generation record).

        Raises:
            ApplicationError: non-retryable, type ``SplitRefused``, when a candidate's task
                is not on the lineage's search split (mining is filtered to it, so never
                unless the pool changed under the round), or ``InputError`` for an
                unreadable reference solution.
        """
        try:
            planned = await asyncio.to_thread(self._plan, inp)
            if isinstance(planned, GrowExperienceResult):
                return planned
            planned.verdicts = await self._replay(inp, planned)
            return await asyncio.to_thread(self._store, inp, planned)
        except InputError as exc:  # SplitRefused (mindforge.experience.mining) is one
            raise _non_retryable(exc) from exc

    def _plan(self, inp: GrowExperienceInput) -> _Round | GrowExperienceResult:
        with store_engine.session_scope(self.engine) as s:
            stored = _stored_report(s, inp)
            if stored is not None:
                return stored
            tasks = _Tasks(s, inp.lineage_id)
            if inp.round == ExperienceRound.ORACLE:
                candidates = _oracle_candidates(s, inp, tasks)
            else:
                candidates = _model_candidates(s, inp, tasks)
            snapshot = experience_repo.latest_snapshot(session=s, lineage_id=inp.lineage_id) or ExperienceSnapshot()
        plan, capped = cap_per_task(plan_replays(candidates, snapshot.entries), inp.experience.max_model_per_task)
        return _Round(snapshot=snapshot, plan=plan, paths=tasks.paths, candidates=len(candidates), capped=capped)

    async def _replay(self, inp: GrowExperienceInput, planned: _Round) -> list[ReplayVerdict]:
        """Replay every planned candidate in its own Ray task; verdicts in plan order."""
        import ray

        from workers.ray_trials import replay_entry_task

        run_id = f"{inp.lineage_id}/g{inp.generation}/experience-{inp.round}"
        refs = [
            replay_entry_task.remote(
                ReplayEntryTaskInput(
                    entry=entry.model_dump(mode="json"), task_path=planned.paths[entry.task_hash], run_id=run_id,
                    runs=inp.experience.replays, sandbox=self.sandbox,
                )
            )
            for entry in planned.plan.to_replay
        ]
        pending = list(refs)
        try:
            while pending:
                activity.heartbeat({"replayed": len(refs) - len(pending), "pending": len(pending)})
                _ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=2.0)
        except asyncio.CancelledError:
            for ref in pending:
                ray.cancel(ref)
            raise
        return list(await asyncio.to_thread(ray.get, refs))

    def _store(self, inp: GrowExperienceInput, planned: _Round) -> GrowExperienceResult:
        kept = [v.entry for v in planned.verdicts if v.kept]
        failed = [v.rejection for v in planned.verdicts if v.rejection is not None]
        grown, rejections, report = fold_round(planned.snapshot, planned.plan, kept, failed)
        result = GrowExperienceResult(
            round=inp.round, snapshot_id=report.snapshot_id if grown.entries else "", entries=report.entries,
            added=report.added, rejected=report.rejected, candidates=planned.candidates,
            replayed=len(planned.plan.to_replay), capped=planned.capped,
        )
        with store_engine.session_scope(self.engine) as s:
            stored = _stored_report(s, inp)
            if stored is not None:  # a concurrent attempt finished first: its report stands
                return stored
            experience_repo.add_entries(session=s, lineage_id=inp.lineage_id, entries=kept)
            experience_repo.record_rejections(
                session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, rejections=rejections
            )
            if grown.entries:  # an empty library is not a snapshot the search could move to
                experience_repo.publish_snapshot(
                    session=s, lineage_id=inp.lineage_id, generation_index=inp.generation, snapshot=grown
                )
            if kept:  # the library grew: what it holds may restate a pinned sealed task
                refresh_labels(s, inp.lineage_id, f"generation {inp.generation}: experience {inp.round} round")
            generation = lineages.get_generation(session=s, lineage_id=inp.lineage_id, index=inp.generation)
            if generation is not None:
                stored_json = result.model_dump(mode="json")
                rounds = record_round(generation.record.get("experience"), str(inp.round), stored_json)
                lineages.update_generation(
                    session=s, lineage_id=inp.lineage_id, index=inp.generation, record={"experience": rounds}
                )
        return result

    def all(self) -> list[Any]:
        """Every activity of this class (all on the sandbox queue)."""
        return [self.grow_experience]
