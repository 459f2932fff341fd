"""Pure data carried between the CLI, Temporal workflows and activities.

Workflows pass ids and these small records, never transcripts (Temporal caps a payload
at about 2 MB). Everything here is plain pydantic, so workflow code can import it inside
``workflow.unsafe.imports_passed_through()``; it imports neither Temporal nor Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.trainer.config import TrainerConfig, TrainResult
from mindforge.trainer.lift import LiftReport, PairRef
from mindforge.trainer.selection import SelectedGroup, SelectionReport
from mindforge.trainer.validate_adapter import AdapterReport

#: task queue for workflow tasks and store-only activities
ORCHESTRATION_QUEUE = "mindforge-orchestration"
#: task queue for activities that run sandboxes (fan out to Ray)
SANDBOX_QUEUE = "mindforge-sandbox"

#: custom search attributes (registered on the dev server by ``mindforge dev up``)
SA_LINEAGE = "MindForgeLineage"
SA_GENERATION = "MindForgeGeneration"
SA_STAGE = "MindForgeStage"


class Stage(StrEnum):
    """The three stages of a generation."""

    DISCOVERY = "discovery"
    EXPANSION = "expansion"
    UPDATE = "update"
    #: trial stage of the Update's held-out evaluation (parent and successor pairs); not a
    #: generation stage: never list it in ``LineageSpec.stages``
    HELDOUT = "heldout"
    #: trial stages inside Expansion: configuration-search cells, and the held-out check of
    #: the best search candidate against the parent (not generation stages either)
    SEARCH = "search"
    SUCCESSOR = "successor"


class LineageSpec(BaseModel):
    """What a lineage runs; fixed at ``lineage start``.

    Attributes:
        name: unique lineage name (also its id).
        tasks: task directories / folders of them (absolute paths).
        contract_path: the root HCP contract file (absolute path).
        generations: number of generations to run (>= 1).
        attempts: trials per task per generation (the GRPO group size).
        held_out_fraction: share of the pool kept out of search and training, in [0, 1).
        seed: seed of the held-out split and of sampling where the policy honours it.
        policy_url: OpenAI-compatible endpoint; None = settings / the contract's env var.
        stages: stages enabled, in order; a stage not built yet is skipped and reported.
        trial_batch_size: trials per ``run_trials`` activity.
        search: configuration-search budget per generation (None = the defaults of
            :class:`SearchBudgetSpec`).
        discovery_count: tasks the pair is asked to propose per generation.
        discovery_attempts: trials of the pair per valid proposal (difficulty estimate).
        heartbeat_timeout_sec: activity heartbeat timeout, seconds (worker-loss detection).
        base_model_path: local directory of the base model (weights + tokenizer) the
            Update stage trains on; distinct from the served model id (``model.id``).
            Required when the Update stage runs; the tiny model's directory in CI.
        trainer: GRPO/LoRA hyper-parameters of the Update stage.
        max_rank: largest LoRA rank the serving endpoint accepts (vLLM ``--max-lora-rank``).
        heldout_attempts: attempts per held-out task per pair in the lift evaluation.
        max_groups_per_task / max_trials_per_group: selection caps per task and group.
        serving_urls: endpoints each new adapter revision is handed off to besides the
            policy endpoint (``policy_url`` or settings), which always gets it.
        lift_resamples: bootstrap resamples of the held-out lift interval.
        audit_judge: ask the policy endpoint to decide the failures the audit rules flag
            ``needs_judge`` (:func:`mindforge.audit_judge.judge_audit`); the verdict is stored
            as ``judge:<model>``, and an unusable reply keeps the rules' verdict.
    """

    name: str
    tasks: list[str]
    contract_path: str
    generations: int = Field(default=1, ge=1)
    attempts: int = Field(default=2, ge=1)
    held_out_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    seed: int = 0
    policy_url: str | None = None
    stages: list[Stage] = Field(default_factory=lambda: [Stage.DISCOVERY, Stage.EXPANSION, Stage.UPDATE])
    trial_batch_size: int = Field(default=16, ge=1)
    search: "SearchBudgetSpec | None" = None
    discovery_count: int = Field(default=2, ge=1)
    discovery_attempts: int = Field(default=2, ge=1)
    heartbeat_timeout_sec: float = Field(default=60.0, gt=0)
    base_model_path: str | None = None
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    max_rank: int = Field(default=64, ge=1)
    heldout_attempts: int = Field(default=2, ge=1)
    max_groups_per_task: int = Field(default=2, ge=1)
    max_trials_per_group: int = Field(default=16, ge=2)
    serving_urls: list[str] = Field(default_factory=list)
    lift_resamples: int = Field(default=2000, ge=1)
    audit_judge: bool = False


class LineageInput(BaseModel):
    """State of a :class:`LineageWorkflow` run, carried through continue-as-new."""

    lineage_id: str
    spec: LineageSpec
    next_generation: int = 0
    contract_hash: str = ""
    adapter: str = ""
    paused: bool = False
    prepared: bool = False


class LineageStatus(BaseModel):
    """What ``lineage status`` shows (workflow query result)."""

    lineage_id: str
    state: str
    generation: int
    generations: int
    paused: bool
    stages_run: dict[int, list[str]] = Field(default_factory=dict)


class PrepareLineageInput(BaseModel):
    """Register a lineage, its root contract and its task pool (``prepare_lineage``)."""

    lineage_id: str
    spec: LineageSpec
    workflow_id: str


class PrepareLineageResult(BaseModel):
    """Pool after preparation: task counts per split and the root contract hash."""

    contract_hash: str
    search_tasks: int
    held_out_tasks: int


class GenerationInput(BaseModel):
    """One generation of a lineage: its index and the pair it starts from."""

    lineage_id: str
    index: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""


class GenerationResult(BaseModel):
    """Outcome of one generation: the pair the next one starts from, and what ran."""

    index: int
    stages_run: list[str]
    stages_skipped: list[str]
    contract_hash: str
    adapter: str = ""
    trials: int = 0
    passed: int = 0
    solved_tasks: int = 0
    admitted_tasks: int = 0
    successor_contract_hash: str | None = None
    update_outcome: str = ""


class ExpansionInput(BaseModel):
    """The Expansion stage of one generation, for the current pair."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""


class TrialSpec(BaseModel):
    """One trial to run: deterministic id, so a retried activity never runs it twice."""

    trial_id: str
    task_path: str
    task_hash: str
    attempt: int


class RunTrialsInput(BaseModel):
    """One batch of trials (``run_trials``): the pair, the stage and the trial specs."""

    lineage_id: str
    generation: int
    stage: Stage
    contract_hash: str
    adapter: str = ""
    policy_url: str | None = None
    trials: list[TrialSpec]


class RunTrialsResult(BaseModel):
    """Counts only; the records are in the store."""

    ran: int
    skipped_existing: int
    passed: int
    errors: int


class ExpansionResult(BaseModel):
    """Coverage of the current pair on the search split, and the contract chosen to succeed it."""

    trials: int
    passed: int
    solved_tasks: int
    tasks: int
    successor_contract_hash: str | None = None


class GenerationEvent(BaseModel):
    """A generation's status change, written to the store by an activity."""

    lineage_id: str
    index: int
    status: str
    contract_hash: str = ""
    adapter: str = ""
    stages_run: list[str] = Field(default_factory=list)
    stages_skipped: list[str] = Field(default_factory=list)
    record: dict = Field(default_factory=dict)


class LineageEvent(BaseModel):
    """A lineage's status change, written to the store by an activity."""

    lineage_id: str
    status: str
    current_generation: int = 0


def trial_id_for(lineage_id: str, generation: int, stage: str, task_id: str, contract_hash: str, attempt: int) -> str:
    """Deterministic trial id: ``<lineage>/g<gen>/<stage>/<task>/<contract[:12]>/<attempt>``."""
    return f"{lineage_id}/g{generation}/{stage}/{task_id}/{contract_hash[:12]}/{attempt}"


class DiscoveryInput(BaseModel):
    """The Discovery stage of one generation, for the current pair."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""


class CheckProposalInput(BaseModel):
    """One staged proposal to check (on Ray) against the lineage's pool."""

    lineage_id: str
    generation: int
    task_dir: str
    contract_hash: str
    policy_url: str | None = None
    attempts: int = 2


class AdmitInput(BaseModel):
    """The staged batch (``ProposalBatch`` as JSON) and one verdict per staged proposal (JSON)."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    batch: dict
    verdicts: list[dict]


class DiscoveryResult(BaseModel):
    """Counts of one Discovery run (the full record is in the generation's record)."""

    requested: int
    proposed: int
    admitted: int
    rejected: int


# ------------------------------------------------------------------------------ Update


class UpdateOutcome(StrEnum):
    """How an Update stage ended (every outcome is recorded; only ``registered`` makes a new pair)."""

    REGISTERED = "registered"
    #: selection, or tokenisation of the selected trajectories, left no group with signal
    NO_SIGNAL = "no_signal"
    #: the trained adapter failed validation (empty, zero, no effect, over the rank limit, ...)
    REJECTED = "rejected"


class UpdateInput(BaseModel):
    """The Update stage of one generation.

    Attributes:
        contract_hash / adapter: the parent pair (the generation's pair).
        successor_contract_hash: the contract the Expansion stage's search picked for the
            next generation; None = the parent's. The successor pair's contract is this one
            with ``model.adapter`` set to the new revision's name.
    """

    lineage_id: str
    generation: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""
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
    spec: LineageSpec
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
    spec: LineageSpec
    adapter_name: str
    adapter_dir: str


class HandOffResult(BaseModel):
    """One ``mindforge.serving.HandoffRecord`` (as JSON) per endpoint."""

    endpoints: list[dict]


class PlanHeldoutInput(BaseModel):
    """Plan the held-out trials of the parent and successor pairs (``plan_heldout_trials``)."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    parent: PairRef
    successor: PairRef


class HeldoutPlan(BaseModel):
    """Held-out trials of both pairs (same tasks, same attempts) with deterministic ids."""

    parent: list[TrialSpec]
    successor: list[TrialSpec]
    tasks: int


class MeasureLiftInput(BaseModel):
    """Measure the held-out lift of the successor over the parent (``measure_lift``)."""

    lineage_id: str
    generation: int
    spec: LineageSpec
    parent: PairRef
    successor: PairRef


class RecordUpdateInput(BaseModel):
    """The Update's outcome and the next generation's pair, for the generation record."""

    lineage_id: str
    generation: int
    outcome: UpdateOutcome
    next_pair: PairRef
    detail: dict = Field(default_factory=dict)


class UpdateResult(BaseModel):
    """What the Update stage hands to the next generation.

    Attributes:
        outcome: see :class:`UpdateOutcome`.
        contract_hash / adapter: the next generation's pair (the parent pair unless
            ``outcome`` is ``registered``).
        adapter_revision_id: the registered revision, if any.
        selected_groups / selected_trials: what selection kept.
        lift: the held-out lift (registered outcome only).
    """

    outcome: UpdateOutcome
    contract_hash: str
    adapter: str = ""
    adapter_revision_id: str | None = None
    selected_groups: int = 0
    selected_trials: int = 0
    lift: LiftReport | None = None


class SearchBudgetSpec(BaseModel):
    """Configuration-search budget of one generation (any of the three; None = no limit).

    Attributes:
        max_attempts: trials the search may run.
        max_tokens: prompt + completion tokens the search may spend.
        max_wall_sec: wall-clock seconds the search may take.
        cells_per_step: (task, contract) cells planned per step.
        seed: the allocator's seed.
        enabled: False skips configuration search (the stage records that it was off).
    """

    enabled: bool = True
    max_attempts: int | None = Field(default=64, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_wall_sec: float | None = Field(default=None, gt=0)
    cells_per_step: int = Field(default=8, ge=1)
    seed: int = 0


class AuditJudge(BaseModel):
    """Where the audit's optional judge call goes (``LineageSpec.audit_judge``).

    Attributes:
        enabled: False = rules only.
        policy_url: the endpoint (``.../v1``); None = the contract's env var / settings.
    """

    enabled: bool = False
    policy_url: str | None = None

    @classmethod
    def of(cls, spec: LineageSpec) -> AuditJudge:
        """The judge a lineage spec asks for."""
        return cls(enabled=spec.audit_judge, policy_url=spec.policy_url)


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


# LineageSpec names SearchBudgetSpec, defined below it: resolve, then rebuild the models that embed it
LineageSpec.model_rebuild()
for _model in [v for v in list(globals().values()) if isinstance(v, type) and issubclass(v, BaseModel) and v is not BaseModel]:
    _model.model_rebuild()
