"""Inputs and results of the lineage, generation, expansion (trial batches) and Discovery workflows and their activities.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mindforge.evaluation.lift import LiftReport
from mindforge.evaluation.scoring import PairRef
from mindforge.payloads.spec import LineageSpec, TrialStage


class LineageInput(BaseModel):
    """State of a :class:`LineageWorkflow` run, carried through continue-as-new.

    Attributes:
        contract_hash / adapter: the pair the next generation starts from.
        root_contract_hash / root_adapter: generation 0's pair (the sealed lift of
            every generation is also measured against it).
    """

    lineage_id: str
    spec: LineageSpec
    next_generation: int = 0
    contract_hash: str = ""
    adapter: str = ""
    root_contract_hash: str = ""
    root_adapter: str = ""
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
    """Pool after preparation: task counts per split, the root contract hash, split warnings.

    Attributes:
        warnings: splits below the minimum that ``allow_small_splits`` let through.
    """

    contract_hash: str
    search_tasks: int
    selection_tasks: int
    sealed_tasks: int
    warnings: list[str] = Field(default_factory=list)


class GenerationInput(BaseModel):
    """One generation of a lineage: its index, the pair it starts from, and generation 0's pair."""

    lineage_id: str
    index: int
    spec: LineageSpec
    contract_hash: str
    adapter: str = ""
    root: PairRef | None = None


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
    sealed_lift: dict | None = None


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
    stage: TrialStage
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


class SealedEvaluationInput(BaseModel):
    """Measure a generation's successor pair on the sealed split (``plan_sealed_trials``, ``measure_sealed_lift``).

    Attributes:
        parent: the generation's pair.
        successor: the pair the next generation starts from.
        root: generation 0's pair (None in generation 0, where it is the parent).
    """

    lineage_id: str
    generation: int
    spec: LineageSpec
    parent: PairRef
    successor: PairRef
    root: PairRef | None = None


class SealedPlan(BaseModel):
    """Sealed trials per pair (same tasks, same attempts, deterministic ids), or why there are none.

    Attributes:
        batches: one trial list per pair to run (pairs listed once).
        tasks: sealed tasks.
        note: why nothing runs (no sealed tasks, or nothing changed).
    """

    batches: list[RunTrialsInput] = Field(default_factory=list)
    tasks: int = 0
    note: str = ""


class SealedLiftResult(BaseModel):
    """The sealed lifts of one generation: over its parent, and over generation 0.

    Attributes:
        parent: the successor over the parent (None with ``reason`` when not measured).
        root: generation k's successor over generation 0's pair (None in generation 0
            or when not measured).
        reason: why ``parent`` is None.
    """

    parent: LiftReport | None = None
    root: LiftReport | None = None
    reason: str = ""
