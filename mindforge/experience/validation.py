"""Validation before promotion: which candidates are replayed, and what their replays mean.

A candidate entry is kept only if replaying its commands with **no model** in a fresh
sandbox of the same task, then running the task's verifier, passes on every replay
(``runs``, at least 2). Before any replay a candidate is rejected when it is too long
(more than ``MAX_ENTRY_STEPS`` commands or ``MAX_ENTRY_CHARS`` characters) or a duplicate
(its normalised commands equal a kept entry's, or an earlier candidate's in this batch).
Every rejection is recorded with its reason (:class:`RejectionReason`).

This module is pure: the replay itself runs in a Ray task (``workers/ray_trials.py``,
through :func:`mindforge.experience.replay.replay_entry`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mindforge.experience.entry import MAX_ENTRY_CHARS, MAX_ENTRY_STEPS, ExperienceEntry, Provenance

#: replays per candidate: a pass must repeat to count (task validation runs the oracle twice too)
DEFAULT_REPLAYS = 2


class RejectionReason(StrEnum):
    """Why a candidate entry was not kept."""

    FAILED = "failed"
    FLAKY = "flaky"
    DUPLICATE = "duplicate"
    TOO_LONG = "too_long"


class Rejection(BaseModel):
    """One rejected candidate.

    Attributes:
        entry_id / task_id / task_hash / provenance / trial_id / generation: the candidate.
        reason: why it was rejected.
        detail: evidence (the replay rewards, the entry it duplicates, its size).
    """

    model_config = ConfigDict(frozen=True)

    entry_id: str
    task_id: str
    task_hash: str
    provenance: Provenance
    trial_id: str
    generation: int = 0
    reason: RejectionReason
    detail: str = ""


def reject(entry: ExperienceEntry, reason: RejectionReason, detail: str) -> Rejection:
    """The rejection record of ``entry``."""
    return Rejection(
        entry_id=entry.entry_id,
        task_id=entry.task_id,
        task_hash=entry.task_hash,
        provenance=entry.provenance,
        trial_id=entry.trial_id,
        generation=entry.generation,
        reason=reason,
        detail=detail,
    )


class ReplayPlan(BaseModel):
    """What to replay and what was rejected before any replay.

    Attributes:
        to_replay: candidates to replay, in a deterministic order (oracle first, then by
            generation, task id, trial id, entry id).
        rejected: too long, or duplicates of a kept entry or of an earlier candidate.
    """

    to_replay: list[ExperienceEntry] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)


def _order(entry: ExperienceEntry) -> tuple[int, int, str, str, str]:
    return (0 if entry.provenance == Provenance.ORACLE else 1, entry.generation, entry.task_id, entry.trial_id,
            entry.entry_id)


def plan_replays(candidates: Iterable[ExperienceEntry], kept: Iterable[ExperienceEntry]) -> ReplayPlan:
    """Sort out the candidates to replay.

    Args:
        candidates: mined entries (not validated); the same entry id given twice counts once.
        kept: the library's entries so far (a candidate equal to one of them is a duplicate).

    Returns:
        the plan.
    """
    seen = {entry.dedupe_key: entry.entry_id for entry in kept}
    kept_ids = set(seen.values())
    plan = ReplayPlan()
    done: set[str] = set()
    for entry in sorted(candidates, key=_order):
        if entry.entry_id in done or entry.entry_id in kept_ids:
            continue
        done.add(entry.entry_id)
        if len(entry.steps) > MAX_ENTRY_STEPS or entry.size_chars > MAX_ENTRY_CHARS:
            plan.rejected.append(
                reject(entry, RejectionReason.TOO_LONG,
                       f"{len(entry.steps)} commands, {entry.size_chars} characters (at most {MAX_ENTRY_STEPS} "
                       f"commands and {MAX_ENTRY_CHARS} characters)")
            )
        elif entry.dedupe_key in seen:
            plan.rejected.append(
                reject(entry, RejectionReason.DUPLICATE, f"same normalised commands as {seen[entry.dedupe_key]}")
            )
        else:
            seen[entry.dedupe_key] = entry.entry_id
            plan.to_replay.append(entry)
    return plan


def replays_settled(rewards: list[float | None], runs: int) -> bool:
    """True once ``runs`` replays ran, or a pass and a non-pass have both been seen (flaky)."""
    passes = [r is not None and r >= 1.0 for r in rewards]
    return len(rewards) >= runs or (any(passes) and not all(passes))


def judge_replays(rewards: list[float | None]) -> RejectionReason | None:
    """The verdict on an entry's replays.

    Args:
        rewards: each replay's verifier reward (None = no real reward), at least one.

    Returns:
        None (keep it) when every replay passed, ``flaky`` when some did, ``failed`` when none did.

    Raises:
        ValueError: no replay.
    """
    if not rewards:
        raise ValueError("an entry is judged on at least one replay")
    passes = [r is not None and r >= 1.0 for r in rewards]
    if all(passes):
        return None
    return RejectionReason.FLAKY if any(passes) else RejectionReason.FAILED
