"""Inputs and results of the Update stage: selection, training, validation, registration, hand-off, promotion gate.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from mindforge.evaluation.decisions import PromotionDecision
from mindforge.evaluation.scoring import PairRef
from mindforge.payloads.lineage import RunTrialsInput, StageInput
from mindforge.payloads.spec import EvaluationSpec, RuntimeSpec, UpdateSpec
from mindforge.trainer.config import TrainerConfig, TrainResult
from mindforge.trainer.selection import SelectedGroup, SelectionReport
from mindforge.trainer.validate_adapter import AdapterReport


class HandoffRecord(BaseModel):
    """One endpoint's hand-off.

    Attributes:
        base_url: the endpoint (``.../v1``).
        name: the served adapter name.
        path: the adapter directory given to the endpoint.
        load: ``loaded`` (new) or ``already_loaded`` (same name and path were served).
        probe_model: the model name the probe's response reports.
        probe_finish_reason: its finish reason.
        probe_completion_tokens: completion tokens of the probe.
        wall_sec: load + probe wall time, seconds.
    """

    base_url: str
    name: str
    path: str
    load: Literal["loaded", "already_loaded"]
    probe_model: str
    probe_finish_reason: str | None = None
    probe_completion_tokens: int = 0
    wall_sec: float


class UpdateOutcome(StrEnum):
    """How an Update stage ended.

    Every outcome is recorded; only ``promoted`` puts the new adapter in the next pair.
    """

    #: registered, handed off, and the selection-split gate promoted it into the next pair
    PROMOTED = "promoted"
    #: registered and handed off, but the selection-split gate kept the parent adapter
    NOT_PROMOTED = "not_promoted"
    #: selection, or tokenisation of the selected trajectories, left no group with signal
    NO_SIGNAL = "no_signal"
    #: the trained adapter failed validation (empty, zero, no effect, over the rank limit, ...)
    REJECTED = "rejected"


class UpdateInput(StageInput):
    """The Update stage of one generation.

    Attributes:
        contract_hash / adapter: the parent pair (the generation's pair).
        update: the stage's own spec (base model, trainer, serving, promotion gate).
        successor_contract_hash: the contract the Expansion stage's search picked for the
            next generation; None = the parent's. The successor pair's contract is this one
            with ``model.adapter`` set to the new revision's name.
    """

    update: UpdateSpec = Field(default_factory=UpdateSpec)
    successor_contract_hash: str | None = None


class SelectTrajectoriesResult(BaseModel):
    """Selection's report, and the name and revision the new adapter will get."""

    report: SelectionReport
    adapter_name: str
    revision: int
    parent_adapter_path: str | None = None


class TrainAdapterInput(BaseModel):
    """Train one adapter revision on the selected groups (``train_adapter``, a Ray task)."""

    lineage_id: str
    generation: int
    update: UpdateSpec
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    adapter_name: str
    groups: list[SelectedGroup]
    parent_adapter_path: str | None = None


class TrainAdapterResult(BaseModel):
    """Training outcome: the adapter directory and metrics, or why nothing was trained.

    Attributes:
        trained: False when the built samples had no group with signal.
        adapter_dir: the saved PEFT adapter (``<artifacts>/adapters/<lineage>/<name>``).
        samples_built: training samples built from the selected trajectories.
        samples_dropped: reason -> trajectories that could not become samples.
        train: the trainer's result (None when not trained).
        reason: why nothing was trained.
    """

    trained: bool
    adapter_dir: str = ""
    samples_built: int = 0
    samples_dropped: dict[str, int] = Field(default_factory=dict)
    train: TrainResult | None = None
    reason: str = ""


class ValidateAdapterInput(BaseModel):
    """Validate a trained adapter before registration (``validate_adapter``)."""

    adapter_dir: str
    base_model_path: str
    max_rank: int


class RegisterAdapterInput(BaseModel):
    """Register a validated adapter revision and its successor contract (``register_adapter``)."""

    lineage_id: str
    generation: int
    adapter_name: str
    revision: int
    parent: PairRef
    successor_contract_hash: str | None = None
    base_model_path: str
    trainer: TrainerConfig
    report: AdapterReport
    train: TrainResult
    trial_ids: list[str]


class RegisterAdapterResult(BaseModel):
    """The registered revision and the successor contract that names it."""

    adapter_revision_id: str
    adapter_name: str
    sha256: str
    successor_contract_hash: str
    successor_contract_ref: str


class HandOffInput(BaseModel):
    """Load a registered revision into the serving endpoints under its versioned name (``hand_off_adapter``)."""

    lineage_id: str
    generation: int
    runtime: RuntimeSpec
    serving_urls: list[str] = Field(default_factory=list)
    adapter_name: str
    adapter_dir: str


class HandOffResult(BaseModel):
    """What each endpoint answered, in order (the policy endpoint first)."""

    endpoints: list[HandoffRecord]


class PlanPromotionInput(BaseModel):
    """Plan the selection trials of the promotion gate (``plan_promotion_trials``).

    Attributes:
        without: the successor contract with the parent's adapter.
        with_adapter: the successor pair, naming the new adapter revision.
    """

    lineage_id: str
    generation: int
    runtime: RuntimeSpec
    evaluation: EvaluationSpec
    update: UpdateSpec
    without: PairRef
    with_adapter: PairRef


class PromotionPlan(BaseModel):
    """Selection trials of both pairs (same tasks, same attempts) with deterministic ids."""

    batches: list[RunTrialsInput] = Field(default_factory=list)
    tasks: int = 0


class ValidationFailure(BaseModel):
    """Why adapter validation rejected a revision: the error's type and message."""

    error: str
    message: str


class RecordUpdateInput(BaseModel):
    """The Update's outcome and the next generation's pair, for the generation record.

    Attributes:
        reason: why nothing was trained (``no_signal`` outcomes).
        validation: why validation rejected the revision (``rejected`` outcomes).
    """

    lineage_id: str
    generation: int
    outcome: UpdateOutcome
    next_pair: PairRef
    reason: str = ""
    validation: ValidationFailure | None = None


class UpdateResult(BaseModel):
    """What the Update stage hands to the next generation.

    Attributes:
        outcome: see :class:`UpdateOutcome`.
        contract_hash / adapter: the next generation's pair: the successor pair when
            ``promoted``, else Expansion's successor contract (or the parent's) with the
            parent's adapter.
        adapter_revision_id: the registered revision, if any.
        selected_groups / selected_trials: what selection kept.
        promotion: the selection-split gate's decision (registered revisions only).
    """

    outcome: UpdateOutcome
    contract_hash: str
    adapter: str = ""
    adapter_revision_id: str | None = None
    selected_groups: int = 0
    selected_trials: int = 0
    promotion: PromotionDecision | None = None
