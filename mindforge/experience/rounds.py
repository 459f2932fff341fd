"""What one growth round mines and replays: the pure choices of ``grow_experience``.

A lineage's library grows in two rounds per generation (``workers/experience_activities.py``):

- ``oracle``, before the search: the reference solution of every search-split task that has
  one and has not been judged yet (no stored ``oracle`` entry and no ``oracle`` rejection:
  a task's content is immutable, so its solution's verdict is too). Tasks Discovery admits
  to the search split join in the next generation's round.
- ``model``, after the search: the generation's passed trials on search-split tasks of the
  stages in :data:`MODEL_STAGES`. Rollouts are not mined: Update runs after Expansion, so
  this generation's rollouts do not exist yet when the round runs, and the next
  generation's base evaluation runs the trained pair on the same search tasks anyway.
  Selection and sealed trials are never mined (nor accepted by the store).

This module is pure (no store, no Ray): the activity reads the store, calls these, and
writes back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from mindforge.experience.entry import ExperienceEntry, Provenance
from mindforge.experience.validation import ReplayPlan

#: trial stages whose passed search-split trials the ``model`` round mines, in this order
MODEL_STAGES = ("expansion", "search")


def oracle_pending(search_tasks: Iterable[str], judged: Iterable[str]) -> list[str]:
    """The search-split task hashes whose reference solution has not been judged yet.

    Args:
        search_tasks: content hashes of the lineage's search-split pool tasks.
        judged: content hashes with a stored ``oracle`` entry or ``oracle`` rejection.

    Returns:
        the hashes of ``search_tasks`` not in ``judged``, sorted, each once.
    """
    done = set(judged)
    return sorted({h for h in search_tasks if h not in done})


def cap_per_task(plan: ReplayPlan, max_model_per_task: int) -> tuple[ReplayPlan, int]:
    """Keep at most ``max_model_per_task`` model candidates per task in the replay list.

    The plan's order decides which ones are kept (``plan_replays``: oracle first, then by
    generation, task id and trial id); oracle candidates are never capped (one per task).

    Args:
        plan: the round's replay plan.
        max_model_per_task: model candidates replayed per task (at least 1).

    Returns:
        (the plan with the extra model candidates left out, how many were left out).

    Raises:
        ValueError: ``max_model_per_task`` below 1.
    """
    if max_model_per_task < 1:
        raise ValueError(f"max_model_per_task must be at least 1, not {max_model_per_task}")
    seen: dict[str, int] = defaultdict(int)
    kept: list[ExperienceEntry] = []
    for entry in plan.to_replay:
        if entry.provenance == Provenance.MODEL:
            seen[entry.task_hash] += 1
            if seen[entry.task_hash] > max_model_per_task:
                continue
        kept.append(entry)
    return ReplayPlan(to_replay=kept, rejected=list(plan.rejected)), len(plan.to_replay) - len(kept)


def record_round(previous: Any, round_name: str, report: dict[str, Any]) -> dict[str, Any]:
    """The generation record's ``experience`` entry with one round's report set.

    Args:
        previous: the record's ``experience`` value so far (a dict keyed by round, or None).
        round_name: ``oracle`` or ``model``.
        report: the round's report (JSON data).

    Returns:
        a new dict keyed by round: the other round's report is kept, this one replaced.
    """
    rounds = dict(previous) if isinstance(previous, dict) else {}
    rounds[round_name] = report
    return rounds
