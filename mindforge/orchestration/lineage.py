"""Inputs and results of the lineage, generation, expansion (trial batches) and Discovery workflows and their activities.

Pure pydantic records (see :mod:`mindforge.orchestration`); no Temporal, no Ray.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mindforge.orchestration.spec import LineageSpec, Stage


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
