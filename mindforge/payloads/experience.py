"""Inputs and results of the experience library's activity (``grow_experience``).

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.payloads.spec import ExperienceSpec


class ExperienceRound(StrEnum):
    """Which candidates one round of ``grow_experience`` mines.

    ``oracle``: the reference solutions of search-split pool tasks not yet in the library
    (run before the search). ``model``: the generation's passed search-split trials of the
    stages ``expansion`` and ``search`` (run after it).
    """

    ORACLE = "oracle"
    MODEL = "model"


class GrowExperienceInput(BaseModel):
    """One round of growing a lineage's experience library.

    Attributes:
        lineage_id / generation: where the round runs (the generation record gets its report).
        round: ``oracle`` or ``model``.
        experience: replays per candidate and the per-task cap.
    """

    lineage_id: str
    generation: int = Field(ge=0)
    round: ExperienceRound
    experience: ExperienceSpec = Field(default_factory=ExperienceSpec)


class GrowExperienceResult(BaseModel):
    """What one round did (also the generation record's ``experience.<round>`` entry).

    Attributes:
        round: the round.
        snapshot_id: the library's snapshot after the round ("" while the library is empty).
        entries: the library's entries after the round, by provenance (``oracle``, ``model``).
        added: entries the round added, by provenance.
        rejected: the round's rejections by reason (``failed``, ``flaky``, ``duplicate``, ``too_long``).
        candidates: candidates mined (before duplicates of the library were dropped).
        replayed: candidates replayed.
        capped: candidates left out by ``max_model_per_task``.
    """

    round: ExperienceRound
    snapshot_id: str = ""
    entries: dict[str, int] = Field(default_factory=dict)
    added: dict[str, int] = Field(default_factory=dict)
    rejected: dict[str, int] = Field(default_factory=dict)
    candidates: int = 0
    replayed: int = 0
    capped: int = 0
