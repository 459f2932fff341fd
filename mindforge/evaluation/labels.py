"""Labels from provenance: which sealed reading a task is read in, rechecked as the lineage mines.

The sealed split's tasks are frozen at lineage start; the reading a task is read in is not.
What a lineage mines - its experience library (reference solutions and the pair's own
passed trials of search tasks, the guides the Update trains with are drawn from it) and the
search split's reference solutions the library mines - can come to share a command shape
with a pinned hand-written sealed task's reference solution (the project's restatement
rule, :mod:`mindforge.search.restates`): ``chmod u+x,go+rx`` restates ``chmod 600``, a
``mkdir -p`` restates a task that is only ``mkdir -p``. Such a task is no longer transfer to
a human-written set: :func:`relabel` moves it to the *restated tasks* reading (named in
every report with what restates it), and a sealed instance whose exact answer the lineage
now holds becomes *copyable*. The check runs at lineage start, after every Discovery
admission and every growth of the library, and before each sealed measurement
(``workers/sealed_labels.py``); a move is never undone (the library only grows), and each
move records the check that made it.

Pure: pydantic (the records of :mod:`mindforge.evaluation.curriculum`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mindforge.evaluation.curriculum import ReadingsRecord, SealedReading, classify_sealed


def relabel(
    record: ReadingsRecord, *, restated: Mapping[str, Iterable[str]], copyable: Iterable[str], event: str
) -> ReadingsRecord:
    """The record after one check: restated pinned tasks read apart, copyable instances added.

    Args:
        record: the lineage's readings before the check.
        restated: sealed task hash -> what restates it (names of library entries, search
            tasks' solutions); only pinned tasks (:meth:`ReadingsRecord.pinned`) move.
        copyable: sealed task hashes whose exact answer the lineage holds; only sealed
            instances count.
        event: the check, in words (``lineage start``, ``generation 2: experience model round``).

    Returns:
        a new record: earlier moves kept, new ones dated ``event`` in ``moved_at``, ``event``
        appended to ``checks``.
    """
    pinned = record.pinned()
    names = {h: set(record.restated.get(h, [])) for h in record.restated}
    for task_hash, by in restated.items():
        if task_hash in pinned and (by := set(by)):
            names.setdefault(task_hash, set()).update(by)
    instances = record.tasks_of(SealedReading.INSTANCES)
    copy = set(record.copyable) | (set(copyable) & instances)
    moved = dict(record.moved_at)
    for task_hash in (set(names) - set(record.restated)) | (copy - set(record.copyable)):
        moved.setdefault(task_hash, event)
    sealed = {h for tasks in record.readings.values() for h in tasks}
    readings = classify_sealed(sealed, record.family_of, record.sealed_families, record.origins or None, names)
    return record.model_copy(
        update={
            "readings": readings,
            "restated": {h: sorted(by) for h, by in sorted(names.items())},
            "copyable": sorted(copy),
            "moved_at": dict(sorted(moved.items())),
            # a retried activity checks again with the same words: recorded once
            "checks": record.checks if record.checks[-1:] == [event] else [*record.checks, event],
        }
    )


def moved_since(before: ReadingsRecord, after: ReadingsRecord) -> dict[str, list[str]]:
    """What a check moved: ``{"restated": [...], "copyable": [...]}`` task hashes, sorted."""
    return {
        "restated": sorted(set(after.restated) - set(before.restated)),
        "copyable": sorted(set(after.copyable) - set(before.copyable)),
    }
