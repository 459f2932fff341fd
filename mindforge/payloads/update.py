"""Inputs and results of the Update stage: selection, training, validation, registration, hand-off, promotion gate.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from mindforge.evaluation.decisions import PromotionDecision
from mindforge.evaluation.scoring import PairRef
from mindforge.payloads.lineage import RunTrialsInput, StageInput
from mindforge.payloads.spec import EvaluationSpec, RuntimeSpec, UpdateSpec
from mindforge.payloads.training import AdapterReport, SelectedGroup, SelectionReport, TrainerConfig, TrainResult


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
        successor_contract_hash: the contract Expansion's successor check decided on the
            selection split; None = the parent's. Update trains, gates and hands on its
            adapter under this contract only (the *training contract*); the successor
            pair's contract is this one with ``model.adapter`` set to the new revision.
    """

    update: UpdateSpec = Field(default_factory=UpdateSpec)
    successor_contract_hash: str | None = None


class UpdatePlan(BaseModel):
    """What one Update trains under and what it will register (``plan_update``).

    Attributes:
        contract_hash: the training contract (the best contract by search-split evidence);
            "" when it passed nothing, and Update trains nothing.
        note: the reason, in words (recorded under ``update.plan``).
        on_contract_trials / on_contract_passes: the generation's search-split trials
            under the training contract (base evaluation, search) and how many passed.
        adapter_name / revision: the revision the new adapter registers as.
        parent_adapter_path: the parent adapter's directory (training starts from it).
    """

    contract_hash: str = ""
    note: str = ""
    on_contract_trials: int = 0
    on_contract_passes: int = 0
    adapter_name: str
    revision: int
    parent_adapter_path: str | None = None


class RolloutDrawInput(BaseModel):
    """Plan one draw of one iteration (``plan_rollout_trials``).

    Attributes:
        contract_hash: the training contract.
        adapter: the adapter the rollouts are drawn from (the current policy; "" = base).
        iteration / draw: 0-based; both go into the trial ids.
        draws: trial ids of this iteration's earlier draws, one list per draw.
    """

    lineage_id: str
    generation: int
    update: UpdateSpec
    contract_hash: str
    adapter: str = ""
    iteration: int
    draw: int = 0
    draws: list[list[str]] = Field(default_factory=list)


class SelectTrajectoriesInput(BaseModel):
    """Build GRPO groups under the training contract (``select_trajectories``).

    Attributes:
        contract_hash: the training contract; every trial read must have run under it.
        trial_ids: one iteration's rollouts, one list per draw; None = the generation's
            search-split trials under the training contract (``update.iterations`` 0).
    """

    lineage_id: str
    generation: int
    update: UpdateSpec
    contract_hash: str
    trial_ids: list[list[str]] | None = None


class SelectTrajectoriesResult(BaseModel):
    """Selection's report and the statistics of the trials it read.

    Attributes:
        report: the groups kept for training, with a count for every drop.
        rollouts / mean_reward: trials read with a real reward, and their mean reward.
        groups_drawn / flat_groups: (task, draw) groups read, and those whose rewards were
            all equal (dropped by dynamic sampling, unless a guide joined them).
        guided_groups: selected groups a guide joined (off-policy guidance).
        off_contract_trials: the generation's trials under other contracts, not read
            (``trial_ids`` None only).
    """

    report: SelectionReport
    rollouts: int = 0
    mean_reward: float = 0.0
    passed: int = 0
    groups_drawn: int = 0
    flat_groups: int = 0
    guided_groups: int = 0
    off_contract_trials: int = 0


class IterationRecord(BaseModel):
    """One on-policy GRPO iteration, as recorded under ``update.iterations`` and plotted by the report.

    Attributes:
        iteration: 0-based.
        adapter: the adapter its rollouts were drawn from ("" = base weights).
        trained_adapter: the adapter it trained ("" when it trained nothing).
        tasks / draws / groups / flat_groups / flat_fraction: what the draws held
            (``flat_fraction`` = flat groups / groups, 0..1).
        guided_groups: groups trained with a guide (off-policy guidance; their rollouts
            all failed, so they count among ``flat_groups`` too).
        rollouts / passed / mean_reward: rollouts with a real reward, those that passed,
            their mean reward (0..1).
        steps / tokens_trained / loss: the trainer's optimizer steps, model tokens with
            gradient, and mean loss (None when it trained nothing).
        planned_steps: the steps its epochs asked for.
        stop_reason: what ended its training: ``epochs``, ``max_steps`` or ``deadline``
            (the Update's time budget, between optimizer steps); "" when it trained nothing.
        seconds: wall time of the iteration (workflow clock).
        reason: why it trained nothing.
    """

    iteration: int
    adapter: str = ""
    trained_adapter: str = ""
    tasks: int = 0
    draws: int = 0
    groups: int = 0
    flat_groups: int = 0
    flat_fraction: float = 0.0
    guided_groups: int = 0
    rollouts: int = 0
    passed: int = 0
    mean_reward: float = 0.0
    steps: int = 0
    planned_steps: int = 0
    stop_reason: str = ""
    tokens_trained: int = 0
    loss: float | None = None
    seconds: float = 0.0
    reason: str = ""


class RecordIterationInput(BaseModel):
    """Record one iteration (``record_iteration``): insert-or-replace by its index."""

    lineage_id: str
    generation: int
    record: IterationRecord


class TrainAdapterInput(BaseModel):
    """Train one adapter revision on the selected groups (``train_adapter``, a Ray task).

    Attributes:
        deadline_at: the Update's deadline (UTC: the loop's start plus
            ``update.time_budget_sec``); training stops between optimizer steps when the
            next one would end past it (``TrainerConfig.deadline_at``). None: no deadline.
    """

    lineage_id: str
    generation: int
    update: UpdateSpec
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    adapter_name: str
    groups: list[SelectedGroup]
    parent_adapter_path: str | None = None
    deadline_at: datetime | None = None


class TrainAdapterResult(BaseModel):
    """Training outcome: the adapter directory and metrics, or why nothing was trained.

    Attributes:
        trained: False when the built samples had no group with signal.
        adapter_dir: the saved PEFT adapter (``<artifacts>/adapters/<lineage>/<name>``).
        samples_built: training samples built from the selected trajectories (guides included).
        guide_samples: off-policy guide samples among them (:mod:`mindforge.trainer.guidance`).
        samples_dropped: reason -> trajectories that could not become samples.
        train: the trainer's result (None when not trained).
        reason: why nothing was trained.
    """

    trained: bool
    adapter_dir: str = ""
    samples_built: int = 0
    guide_samples: int = 0
    samples_dropped: dict[str, int] = Field(default_factory=dict)
    train: TrainResult | None = None
    reason: str = ""


class ValidateAdapterInput(BaseModel):
    """Validate a trained adapter before registration (``validate_adapter``)."""

    adapter_dir: str
    base_model_path: str
    max_rank: int


class RegisterAdapterInput(BaseModel):
    """Register a validated adapter revision and its successor contract (``register_adapter``).

    Attributes:
        successor_contract_hash: Expansion's successor contract (None = it kept the parent's).
        trained_under: the training contract, which the trained pair's contract derives
            from (naming the new adapter); "" = Expansion's successor, else the parent's.
    """

    lineage_id: str
    generation: int
    adapter_name: str
    revision: int
    parent: PairRef
    successor_contract_hash: str | None = None
    trained_under: str = ""
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
    """The pair gate (``plan_promotion_trials``, ``decide_promotion``): the trained pair vs the kept pair.

    Attributes:
        without: the kept pair, which the next generation gets when the new adapter is not
            promoted: Expansion's successor contract (or the parent's) with the parent's
            adapter. Judged against it, only the adapter's own gain promotes it.
        with_adapter: the trained pair: the training contract naming the new adapter revision.
        trained_under: the training contract; the trained pair must run under its harness
            ("" = not checked).
    """

    lineage_id: str
    generation: int
    runtime: RuntimeSpec
    evaluation: EvaluationSpec
    update: UpdateSpec
    without: PairRef
    with_adapter: PairRef
    trained_under: str = ""


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
        iterations: on-policy iterations run.
        trained_under: the training contract (the best by search-split evidence; "" when
            nothing trained): with the parent's adapter it is the harness-only pair of the
            attribution when the trained pair is handed on.
    """

    outcome: UpdateOutcome
    contract_hash: str
    adapter: str = ""
    trained_under: str = ""
    adapter_revision_id: str | None = None
    selected_groups: int = 0
    selected_trials: int = 0
    promotion: PromotionDecision | None = None
    iterations: int = 0
