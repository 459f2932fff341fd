"""The sealed readings' labels, checked against what the lineage mined (the I/O of :mod:`mindforge.evaluation.labels`).

Two checks, run together at lineage start (``prepare_lineage``, on the starting pool), after
every Discovery admission (``admit_tasks``), after every growth round of the experience
library (``grow_experience``) and before each sealed measurement (``measure_sealed_lift``):

- **restatement**: a pinned hand-written sealed task whose reference solution shares a
  command shape with a command of a library entry or of a search task's reference solution
  (which the library's oracle round mines) - the project's rule,
  :func:`mindforge.search.restates.restated_commands` - moves to the *restated tasks* reading;
- **copyable**: a sealed instance whose answer (its reference solution's commands, each
  normalised as the library dedupes entries: :func:`answer_key`) equals a search task's
  reference solution or a library entry is copyable.

The lineage's current labels live in its stored spec under ``readings``
(:func:`current_readings`); each check that moves a task records itself there
(``moved_at``, ``checks``). The generation records keep the task sets each reading was
measured on, so an earlier figure stays what it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from mindforge.evaluation import PoolSplit
from mindforge.evaluation.curriculum import (
    ReadingsRecord,
    SealedReading,
    classify_sealed,
    copyable_instances,
    sealed_origins,
)
from mindforge.evaluation.labels import relabel
from mindforge.experience.entry import ExperienceEntry, normalise_command
from mindforge.experience.mining import solution_commands
from mindforge.search.restates import restated_commands
from mindforge.store import experience as experience_repo
from mindforge.store import lineages, pool


def answer_key(commands: Iterable[str]) -> str:
    """A solution's commands, each normalised (white space, trailing ``;``), joined by newlines."""
    return "\n".join(n for c in commands if (n := normalise_command(c)))


def solution_key(solve_sh: str) -> str:
    """:func:`answer_key` of a ``solve.sh`` (shebang, ``set`` lines and comments dropped)."""
    return answer_key(solution_commands(solve_sh))


def read_solution(task_dir: str | Path) -> str | None:
    """A task folder's ``solution/solve.sh``, or None when it has none."""
    path = Path(task_dir) / "solution" / "solve.sh"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def check_labels(
    record: ReadingsRecord,
    *,
    sealed_solutions: Mapping[str, str],
    search_solutions: Mapping[str, str],
    entries: Iterable[ExperienceEntry] = (),
    event: str,
) -> ReadingsRecord:
    """Run both checks and relabel (:func:`mindforge.evaluation.labels.relabel`).

    Args:
        record: the readings before the check.
        sealed_solutions: sealed task hash -> its ``solve.sh`` (tasks without one left out).
        search_solutions: search task id -> its ``solve.sh``.
        entries: the lineage's experience-library entries.
        event: the check, in words.

    Returns:
        the relabelled record.
    """
    entries = list(entries)
    mined = {f"search task {task_id} (reference solution)": solution_commands(text)
             for task_id, text in search_solutions.items()}
    mined |= {f"library entry {e.entry_id} ({e.provenance.value} of {e.task_id})": e.commands for e in entries}
    pinned = {h: text for h, text in sealed_solutions.items() if h in record.pinned()}
    restated: dict[str, list[str]] = {}
    for name, tasks in restated_commands(mined, pinned).items():
        for task_hash in tasks:
            restated.setdefault(task_hash, []).append(name)
    reachable = {solution_key(text) for text in search_solutions.values()} | {answer_key(e.commands) for e in entries}
    instances = record.tasks_of(SealedReading.INSTANCES)
    answers = {h: solution_key(text) for h, text in sealed_solutions.items() if h in instances}
    return relabel(record, restated=restated, copyable=copyable_instances(answers, reachable), event=event)


def current_readings(session, lineage_id: str) -> ReadingsRecord:
    """The lineage's sealed readings as last checked (its spec's ``readings``).

    A lineage prepared before readings were recorded reads its whole sealed split as
    *sealed tasks*.
    """
    lin = lineages.get_lineage(session=session, lineage_id=lineage_id)
    stored = (lin.spec or {}).get("readings") if lin is not None else None
    if stored:
        return ReadingsRecord.model_validate(stored)
    sealed = sorted(m.task_hash for m in pool.list_pool(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED))
    return ReadingsRecord(readings={SealedReading.TASKS: sealed})


def _within(path: str, roots: Iterable[str]) -> bool:
    """True when a task folder is one of ``roots`` or lies under one."""
    here = Path(path).resolve()
    return any(here == (root := Path(r).resolve()) or root in here.parents for r in roots)


def with_origins(record: ReadingsRecord, spec: Mapping, sealed: Mapping[str, object]) -> ReadingsRecord:
    """A record written before provenance was recorded, given each sealed task's origin from the stored spec.

    A hand-written sealed task is *pinned* when its folder is one of the spec's
    ``sealed_tasks`` (or under one) or a split override pins its id to sealed, else it was
    dealt by fraction. A record with origins, or a spec that names neither its tasks nor its
    sealed tasks (nothing to tell them apart by), is returned as it is.

    Args:
        record: the stored readings.
        spec: ``Lineage.spec`` as stored.
        sealed: sealed task hash -> its stored task (``path``, ``task_id``).
    """
    if record.origins or not ({"tasks", "sealed_tasks"} & set(spec)):
        return record
    overrides = ((spec.get("evaluation") or {}).get("splits") or {}).get("overrides") or {}
    pinned = {
        h for h, t in sealed.items()
        if _within(str(getattr(t, "path", "")), spec.get("sealed_tasks") or [])
        or overrides.get(getattr(t, "task_id", "")) == PoolSplit.SEALED.value
    }
    origins = sealed_origins(sealed, record.family_of, record.sealed_families, pinned)
    readings = classify_sealed(
        {h for tasks in record.readings.values() for h in tasks} or set(sealed), record.family_of,
        record.sealed_families, origins, record.restated,
    )
    return record.model_copy(update={"origins": origins, "readings": readings})


def refresh_labels(session, lineage_id: str, event: str) -> ReadingsRecord:
    """Check the lineage's labels against its library and search split now, and store them (one transaction).

    Args:
        session: an open store session (the caller commits).
        lineage_id: the lineage.
        event: the check, in words (``generation 1: Discovery admission``).

    Returns:
        the relabelled record (also stored in the lineage's spec under ``readings``).
    """
    sealed = {t.id: t for t in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED)}
    lin = lineages.get_lineage(session=session, lineage_id=lineage_id)
    record = with_origins(current_readings(session, lineage_id), (lin.spec if lin else None) or {}, sealed)
    wanted = record.pinned() | record.tasks_of(SealedReading.INSTANCES)
    sealed_solutions = {h: text for h, t in sealed.items() if h in wanted and (text := read_solution(t.path))}
    search_solutions = {
        t.task_id: text for t in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=PoolSplit.SEARCH)
        if (text := read_solution(t.path))
    }
    entries = experience_repo.list_entries(session=session, lineage_id=lineage_id)
    checked = check_labels(
        record, sealed_solutions=sealed_solutions, search_solutions=search_solutions, entries=entries, event=event
    )
    if not checked.task_ids:
        checked = checked.model_copy(update={"task_ids": {h: t.task_id for h, t in sealed.items()}})
    stored = {"readings": checked.model_dump(mode="json")}
    lineages.merge_lineage_spec(session=session, lineage_id=lineage_id, values=stored)
    return checked
