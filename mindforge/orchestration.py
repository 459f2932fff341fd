"""Pure data carried between the CLI, Temporal workflows and activities.

Workflows pass ids and these small records, never transcripts (Temporal caps a payload
at about 2 MB). Everything here is plain pydantic, so workflow code can import it inside
``workflow.unsafe.imports_passed_through()``; it imports neither Temporal nor Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

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
        discovery_count: tasks the pair is asked to propose per generation.
        discovery_attempts: trials of the pair per valid proposal (difficulty estimate).
        heartbeat_timeout_sec: activity heartbeat timeout, seconds (worker-loss detection).
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
    discovery_count: int = Field(default=2, ge=1)
    discovery_attempts: int = Field(default=2, ge=1)
    heartbeat_timeout_sec: float = Field(default=60.0, gt=0)


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
    lineage_id: str
    spec: LineageSpec
    workflow_id: str


class PrepareLineageResult(BaseModel):
    """Pool after preparation: task counts per split and the root contract hash."""

    contract_hash: str
    search_tasks: int
    held_out_tasks: int


class GenerationInput(BaseModel):
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


class ExpansionInput(BaseModel):
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
    """Coverage of the current pair on the search split."""

    trials: int
    passed: int
    solved_tasks: int
    tasks: int


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
