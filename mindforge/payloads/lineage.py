"""Inputs and results of the lineage, generation, expansion, Discovery and sealed-evaluation workflows and activities.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.discovery.records import ProposalBatch, ProposalVerdict
from mindforge.domain import RunStatus
from mindforge.evaluation.scoring import PairRef
from mindforge.evaluation.splits import PoolSplit
from mindforge.payloads.spec import (
    CurriculumSpec,
    DiscoverySpec,
    EvaluationSpec,
    ExpansionSpec,
    LineageSpec,
    RuntimeSpec,
    TrialStage,
)


class LineageState(StrEnum):
    """What a running :class:`LineageWorkflow` is doing (its ``status`` query)."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class LineageInput(BaseModel):
    """State of a :class:`LineageWorkflow` run, carried through continue-as-new.

    Attributes:
        contract_hash / adapter: the pair the next generation starts from.
        root_contract_hash / root_adapter: generation 0's pair (the sealed lift of
            every generation is also measured against it).
        extend: continue the lineage already in the store by this many generations
            (``mindforge lineage extend``, a nightly ``mindforge schedule extend``): the
            run reads the lineage's stored spec, its last completed generation's
            successor pair and its root pair (``continue_lineage``) instead of preparing
            a new pool, so the splits and the sealed tasks stay the same. 0: a new lineage.
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
    extend: int = Field(default=0, ge=0)


class ContinueLineageInput(BaseModel):
    """Continue a stored lineage by ``generations`` more (``continue_lineage``); the result is a ``LineageInput``."""

    lineage_id: str
    generations: int = Field(default=1, ge=1)
    workflow_id: str = ""
    #: the run asking: ``lineage extend`` and the main job reuse one workflow id for every
    #: extension, so the run id tells a retried activity of this run from a later extension
    run_id: str = ""


class LineageStatus(BaseModel):
    """What ``lineage status`` shows (workflow query result)."""

    lineage_id: str
    state: LineageState
    generation: int
    generations: int
    paused: bool
    stages_run: dict[int, list[str]] = Field(default_factory=dict)


class PrepareCurriculumInput(BaseModel):
    """Draw, write and validate a lineage's family instances (``prepare_curriculum``, sandbox queue).

    Attributes:
        lineage_id: the lineage (its name keys the held-out choice and the dealing).
        curriculum: what to draw.
    """

    lineage_id: str
    curriculum: CurriculumSpec


class CurriculumInstance(BaseModel):
    """One validated family instance and the split it goes on.

    Attributes:
        path: the instance's task directory.
        task_hash: its content hash.
        instance_id: ``<family>-<8 hex>``.
        family / level: its family and difficulty level.
        split: the split it is dealt to (:func:`mindforge.evaluation.curriculum.deal_instances`).
    """

    path: str
    task_hash: str
    instance_id: str
    family: str
    level: str
    split: PoolSplit


class PrepareCurriculumResult(BaseModel):
    """The validated instances of a curriculum, and what was set aside.

    Attributes:
        instances: every validated instance, with its split.
        rejected: ``"<instance>: <verdict>: <reason>"`` per instance that failed validation.
        warnings: families that admit fewer instances than asked, and the like.
        validated / cached: instances validated now / whose verdict was read from the cache.
        images: the family images the instances start from.
        seconds: wall time of the activity.
    """

    instances: list[CurriculumInstance] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    validated: int = 0
    cached: int = 0
    images: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class PrepareLineageInput(BaseModel):
    """Register a lineage, its root contract and its task pool (``prepare_lineage``).

    Attributes:
        curriculum: the validated family instances (``prepare_curriculum``), when the spec
            draws from families.
    """

    lineage_id: str
    spec: LineageSpec
    workflow_id: str
    curriculum: PrepareCurriculumResult | None = None


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
    """Outcome of one generation: the pair the next one starts from, and what ran.

    Attributes:
        sealed_lifts: sealed reading -> the figure (``LiftReport.summary()``) of the pair
            handed on over the parent on that reading, or None when it was not measured
            (:class:`SealedLiftResult`); never one reading under a general name.
        stage_sec: wall seconds of each part of the generation, in the order they ran
            (``discovery``, ``expansion.base``, ``expansion.search``, ``expansion.race``,
            ``update``, ``sealed``), read from the workflows' clocks.
    """

    index: int
    stages_run: list[str]
    contract_hash: str
    adapter: str = ""
    trials: int = 0
    passed: int = 0
    solved_tasks: int = 0
    admitted_tasks: int = 0
    successor_contract_hash: str | None = None
    update_outcome: str = ""
    sealed_lifts: dict[str, dict[str, float | int | str | None] | None] = Field(default_factory=dict)
    stage_sec: dict[str, float] = Field(default_factory=dict)


class StageInput(BaseModel):
    """What every stage of a generation gets: where it runs, on which pair, and how pairs are evaluated.

    Attributes:
        lineage_id / generation: where the stage runs.
        contract_hash / adapter: the generation's pair.
        runtime: the policy endpoint and trial batching.
        evaluation: the splits and the selection/sealed evaluation settings.
    """

    lineage_id: str
    generation: int
    contract_hash: str
    adapter: str = ""
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)

    @property
    def pair(self) -> PairRef:
        """The generation's pair."""
        return PairRef(contract_hash=self.contract_hash, adapter=self.adapter)


class ExpansionInput(StageInput):
    """The Expansion stage of one generation, for the current pair."""

    expansion: ExpansionSpec = Field(default_factory=ExpansionSpec)


class DiscoveryInput(StageInput):
    """The Discovery stage of one generation, for the current pair."""

    discovery: DiscoverySpec = Field(default_factory=DiscoverySpec)


class TrialSpec(BaseModel):
    """One trial to run: deterministic id, so a retried activity never runs it twice."""

    trial_id: str
    task_path: str
    task_hash: str
    attempt: int


class PlanTrialsResult(BaseModel):
    """The base evaluation's trials (``plan_expansion_trials``)."""

    trials: list[TrialSpec] = Field(default_factory=list)


class RolloutPlan(BaseModel):
    """One draw of one Update iteration (``plan_rollout_trials``): its tasks and trials.

    Attributes:
        contract_hash: the training contract the rollouts run under.
        tasks: the task hashes drawn (a task repeats when drawn twice in one redraw).
        trials: ``group_size`` trials per drawn task (deterministic ids that name the
            iteration and the draw).
        note: why the draw is empty, or which rule chose its tasks.
    """

    contract_hash: str = ""
    tasks: list[str] = Field(default_factory=list)
    trials: list[TrialSpec] = Field(default_factory=list)
    note: str = ""


class RunTrialsInput(BaseModel):
    """One batch of trials (``run_trials``): the pair, the stage and the trial specs.

    Attributes:
        paired_seeds: give each trial's model calls its common random seed
            (:func:`mindforge.trials.seeds.paired_seed`: the same for every pair on one task
            attempt), so paired comparisons vary less.
    """

    lineage_id: str
    generation: int
    stage: TrialStage
    contract_hash: str
    adapter: str = ""
    policy_url: str | None = None
    trials: list[TrialSpec]
    paired_seeds: bool = True


class RunTrialsResult(BaseModel):
    """Counts only; the records are in the store."""

    ran: int
    skipped_existing: int
    passed: int
    errors: int


class ExpansionResult(BaseModel):
    """Coverage of the current pair on the search split, and the contract chosen to succeed it.

    Attributes:
        stage_sec: wall seconds of the base evaluation (with its audit), the search (with
            the experience rounds) and the successor race, keys ``base``, ``search``, ``race``.
    """

    trials: int
    passed: int
    solved_tasks: int
    tasks: int
    successor_contract_hash: str | None = None
    stage_sec: dict[str, float] = Field(default_factory=dict)


class GenerationEvent(BaseModel):
    """A generation's status change, written to the store by an activity.

    Attributes:
        result: the generation's outcome once it has one (merged into its record).
    """

    lineage_id: str
    index: int
    status: RunStatus
    contract_hash: str = ""
    adapter: str = ""
    stages_run: list[str] = Field(default_factory=list)
    result: GenerationResult | None = None


class LineageEvent(BaseModel):
    """A lineage's status change, written to the store by an activity."""

    lineage_id: str
    status: RunStatus
    current_generation: int = 0


class CheckProposalInput(BaseModel):
    """One staged proposal to check (on Ray) against the lineage's pool (``check_proposal``)."""

    lineage_id: str
    generation: int
    task_dir: str
    contract_hash: str
    policy_url: str | None = None
    attempts: int = 2


class AdmitInput(BaseModel):
    """The staged batch and one verdict per staged proposal (``admit_tasks``)."""

    lineage_id: str
    generation: int
    evaluation: EvaluationSpec
    batch: ProposalBatch
    verdicts: list[ProposalVerdict]


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
        harness: the harness-only pair - the contract the configuration search chose,
            with the parent's adapter - for the attribution of the lift into a harness
            and a weights part (None: the contract did not change). Run only when it
            differs from both the parent and the successor.
    """

    lineage_id: str
    generation: int
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    parent: PairRef
    successor: PairRef
    root: PairRef | None = None
    harness: PairRef | None = None


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
    """The sealed lifts of one generation, one per sealed reading (never one figure under a general name).

    Attributes:
        lifts: reading (``instances``, ``families``, ``tasks``, ``restated``, ``dealt``) ->
            the successor's lift over the parent on it (``LiftReport.summary()``), or None;
            the three headline readings are always present.
        reasons: reading -> why its lift is None.
    """

    lifts: dict[str, dict[str, float | int | str | None] | None] = Field(default_factory=dict)
    reasons: dict[str, str] = Field(default_factory=dict)
