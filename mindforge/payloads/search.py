"""Inputs and results of Expansion's audit and configuration-search activities.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mindforge.payloads.lineage import ExpansionInput, RunTrialsInput
from mindforge.payloads.spec import AuditJudge, TrialStage
from mindforge.search.edits import Edit
from mindforge.search.state import PlannedCell


class AuditTrialsInput(BaseModel):
    """Which stored trials the audit works on: one trial stage of one generation (``audit_trials``)."""

    lineage_id: str
    generation: int
    stage: TrialStage
    judge: AuditJudge = Field(default_factory=AuditJudge)


class AuditTrialsResult(BaseModel):
    """How the stage's failed trials were audited.

    Attributes:
        by_owner: owner (infra, task, config, model) -> audited trials of the stage.
    """

    by_owner: dict[str, int] = Field(default_factory=dict)


class SearchStepInput(ExpansionInput):
    """A generation's search job and the pair it searches around (every search activity).

    Attributes:
        job_id: the search job ("" before ``start_search`` names it).
    """

    job_id: str = ""


class SearchStartResult(BaseModel):
    """The search job, or why no search runs (refused before it starts, or nothing fails)."""

    job_id: str
    running: bool
    failing_tasks: int
    note: str = ""


class SearchPlanResult(BaseModel):
    """One planned step: its cells, trial batches per contract, and prompt edits fetched for it."""

    step: int
    stop_reason: str | None = None
    cells: list[PlannedCell] = Field(default_factory=list)
    batches: list[RunTrialsInput] = Field(default_factory=list)
    prompt_edits: list[Edit] = Field(default_factory=list)
    prompt_rejections: list[str] = Field(default_factory=list)


class SearchObserveInput(BaseModel):
    """Fold one planned search step's trials into the search state (``observe_search_step``)."""

    lineage_id: str
    generation: int
    job_id: str
    plan: SearchPlanResult
    wall_sec: float | None = None
    judge: AuditJudge = Field(default_factory=AuditJudge)


class SearchObserveResult(BaseModel):
    """Whether the search is over after the step (full coverage, budget spent, no candidate left)."""

    done: bool


class SuccessorCheckPlan(BaseModel):
    """The successor race's next selection-split trials (empty = the race is over, or nothing to compare).

    Attributes:
        candidate_hash: the search's leading candidate.
        batches: the round's trials not yet stored, one batch per contract and ``trial_batch_size``.
        round: the race round they belong to.
        candidates: contracts raced.
        note: why nothing runs, when nothing does.
    """

    candidate_hash: str | None = None
    batches: list[RunTrialsInput] = Field(default_factory=list)
    round: int = 0
    candidates: list[str] = Field(default_factory=list)
    note: str = ""
