"""Inputs and results of Expansion's audit and configuration-search activities.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mindforge.payloads.lineage import RunTrialsInput
from mindforge.payloads.spec import AuditJudge, LineageSpec


class StageTrialsInput(BaseModel):
    """Which stored trials an activity works on: one stage of one generation."""

    lineage_id: str
    generation: int
    stage: str
    judge: AuditJudge = Field(default_factory=AuditJudge)


class SearchStartInput(BaseModel):
    """Create the generation's configuration-search job (``search_start``)."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""


class SearchStartResult(BaseModel):
    """The search job, or why no search runs (refused before it starts, or nothing fails)."""

    job_id: str
    running: bool
    failing_tasks: int
    note: str = ""


class SearchPlanResult(BaseModel):
    """One planned step: trial batches per contract, and prompt edits fetched for it."""

    step: int
    stop_reason: str | None = None
    cells: list[dict] = Field(default_factory=list)
    batches: list[RunTrialsInput] = Field(default_factory=list)
    prompt_edits: list[dict] = Field(default_factory=list)
    prompt_rejections: list[str] = Field(default_factory=list)


class SearchObserveInput(BaseModel):
    """Fold one planned search step's trials into the search state (``search_observe``)."""

    lineage_id: str
    generation: int
    job_id: str
    plan: SearchPlanResult
    wall_sec: float | None = None
    judge: AuditJudge = Field(default_factory=AuditJudge)


class SearchStepInput(BaseModel):
    """Identity of a generation's search job, and the pair it searches around."""

    lineage_id: str
    generation: int
    job_id: str
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""


class SuccessorCheckPlan(BaseModel):
    """Held-out trials of the parent and the best search candidate (empty = nothing to compare)."""

    candidate_hash: str | None = None
    batches: list[RunTrialsInput] = Field(default_factory=list)
    note: str = ""
