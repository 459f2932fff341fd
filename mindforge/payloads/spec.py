"""What a lineage runs: its spec, split by concern into the sub-specs each stage gets, and the stages.

A :class:`LineageSpec` is fixed at ``lineage start``. Each stage is handed only its own
slice (a function gets the sub-config it needs, not the root): Discovery gets
:class:`DiscoverySpec`, Expansion :class:`ExpansionSpec`, Update :class:`UpdateSpec`; all
get the :class:`RuntimeSpec` (where the policy is, how trials are batched) and the
:class:`EvaluationSpec` (the splits and how selection and sealed trials run).

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.domain import TrialStage as TrialStage  # re-exported: the stage enum lives with the shared enums
from mindforge.evaluation.splits import SplitConfig
from mindforge.hcp.examples import WorkedExample
from mindforge.payloads.training import TrainerConfig


class Stage(StrEnum):
    """The three stages of a generation (what ``LineageSpec.stages`` lists)."""

    DISCOVERY = "discovery"
    EXPANSION = "expansion"
    UPDATE = "update"


class RuntimeSpec(BaseModel):
    """Where the policy is and how trials are fanned out (every stage reads it).

    Attributes:
        policy_url: OpenAI-compatible endpoint; None = settings / the contract's env var.
        trial_batch_size: trials per ``run_trials`` activity.
        heartbeat_timeout_sec: activity heartbeat timeout, seconds (worker-loss detection).
    """

    policy_url: str | None = None
    trial_batch_size: int = Field(default=16, ge=1)
    heartbeat_timeout_sec: float = Field(default=60.0, gt=0)


class DiscoverySpec(BaseModel):
    """The Discovery stage: how many tasks the pair proposes and how each is tried.

    Attributes:
        count: tasks the pair is asked to propose per generation.
        attempts: trials of the pair per valid proposal (difficulty estimate).
    """

    count: int = Field(default=2, ge=1)
    attempts: int = Field(default=2, ge=1)


class SearchBudgetSpec(BaseModel):
    """Configuration-search budget of one generation (any of the three; None = no limit).

    Attributes:
        enabled: False skips configuration search (the stage records that it was off).
        max_attempts: trials the search may run.
        max_tokens: prompt + completion tokens the search may spend.
        max_wall_sec: wall-clock seconds the search may take.
        cells_per_step: (task, contract) cells planned per step; a step's trials run at
            once and the next step waits for the slowest, so the default is the trials a
            2-CPU node runs at once (12, settings' ``trial_cpus``).
        seed: the allocator's seed.
        examples: the user's worked examples (``--examples DIR``) the search may add
            to a contract, one ``add_example`` edit each; none by default. Examples
            written from the evaluated tasks void the sealed figure.
    """

    enabled: bool = True
    max_attempts: int | None = Field(default=64, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_wall_sec: float | None = Field(default=None, gt=0)
    cells_per_step: int = Field(default=12, ge=1)
    seed: int = 0
    examples: list[WorkedExample] = Field(default_factory=list)


class ExperienceSpec(BaseModel):
    """Growing the lineage's experience library (``grow_experience``, two rounds per Expansion).

    Attributes:
        enabled: False skips both rounds (the search then has no snapshot to move to).
        replays: replays per candidate entry (no model, fresh sandbox, the task's verifier);
            every one must pass for the entry to be kept (at least 2).
        max_model_per_task: model candidates per task replayed in one round (after
            duplicates are dropped), first in plan order; the rest are not replayed
            (the round's record counts them as ``capped``), which bounds the sandbox time
            a generation with many passes spends on replays.
    """

    enabled: bool = True
    replays: int = Field(default=2, ge=2)
    max_model_per_task: int = Field(default=2, ge=1)


class ExpansionSpec(BaseModel):
    """The Expansion stage: the base evaluation, the audit and configuration search.

    Attributes:
        attempts: trials per search task in the base evaluation. Not the GRPO group size:
            training groups each task's search-split trials per pair
            (:mod:`mindforge.trainer.selection`), so base-evaluation, search and rollout
            trials of one pair share a group, capped at ``max_trials_per_group``.
        audit_judge: ask the policy endpoint to decide the failures the audit rules flag
            ``needs_judge`` (:func:`mindforge.audit_judge.judge_audit`); the verdict is stored
            as ``judge:<model>``, and an unusable reply keeps the rules' verdict.
        search: configuration-search budget per generation.
        experience: the experience library's two rounds: the ``oracle`` round (reference
            solutions of search-split tasks not yet in the library) before the search, so
            its ``experience_snapshot`` edit can move the contract to the grown library,
            and the ``model`` round (this generation's passed search-split trials) after it.
    """

    attempts: int = Field(default=2, ge=1)
    audit_judge: bool = False
    search: SearchBudgetSpec = Field(default_factory=SearchBudgetSpec)
    experience: ExperienceSpec = Field(default_factory=ExperienceSpec)


class UpdateSpec(BaseModel):
    """The Update stage: what is trained on, how, and where the new revision is served.

    Attributes:
        base_model_path: local directory of the base model (weights + tokenizer) the
            trainer trains on; distinct from the served model id (``model.id``).
            Required when the Update stage runs; the tiny model's directory in CI.
        trainer: GRPO/LoRA hyper-parameters.
        max_rank: largest LoRA rank the serving endpoint accepts (vLLM ``--max-lora-rank``).
        max_groups_per_task / max_trials_per_group: selection caps per task and group.
        serving_urls: endpoints each new adapter revision is handed off to besides the
            policy endpoint, which always gets it.
        promotion_margin: the promotion gate's declared non-inferiority margin (reward
            units): a new adapter revision is promoted when its paired selection lift's
            95% lower bound is above ``-promotion_margin``; 0 (the default) asks for a
            lower bound above 0. Never on a comparison where both pairs score 0 on every
            selection task (:func:`mindforge.evaluation.decide_promotion`).
        iterations: on-policy GRPO iterations; each draws ``group_size`` rollouts of up to
            ``tasks_per_iteration`` search tasks from the current adapter under the training
            contract, drops flat groups and draws again (``max_draws``), then takes the
            trainer's steps (GRPO samples a group per prompt from the policy being trained:
            DeepSeekMath, Shao et al. 2024). 0 = one offline update on the generation's
            search-split trials under the training contract (no rollouts).
        group_size: rollouts per task per draw (G). TRL's ``GRPOConfig.num_generations``
            defaults to 8.
        tasks_per_iteration: tasks per iteration (B), chosen by the curriculum
            (:func:`mindforge.trainer.curriculum.pick_tasks`).
        max_draws: draws per iteration: the first, then redraws that replace flat groups
            with groups of tasks that showed variance (DAPO's dynamic sampling).
        time_budget_sec: the loop's deadline in seconds from its start: no draw starts that
            is expected to end past it, and training stops between optimizer steps before it
            (None = only ``iterations`` bounds it).
        guidance: off-policy guidance (as LUFFY's mixed-policy GRPO, Yan et al. 2025,
            arXiv:2504.14945): a group
            of a search task whose rollouts all scored below 1 is joined by a *guide*, the
            task's own validated entry in the training contract's experience snapshot
            rendered as the replies of a trial under that contract (reward 1.0, its
            replays' verdict), and the curriculum also draws never-passed tasks that have
            one (:mod:`mindforge.trainer.guidance`). A contract without an experience
            snapshot has no guides, and an Update whose training contract passed nothing
            still trains nothing.
    """

    base_model_path: str | None = None
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    max_rank: int = Field(default=64, ge=1)
    max_groups_per_task: int = Field(default=2, ge=1)
    max_trials_per_group: int = Field(default=16, ge=2)
    serving_urls: list[str] = Field(default_factory=list)
    promotion_margin: float = Field(default=0.0, ge=0.0, lt=1.0)
    iterations: int = Field(default=4, ge=0)
    group_size: int = Field(default=8, ge=2)
    tasks_per_iteration: int = Field(default=8, ge=1)
    max_draws: int = Field(default=2, ge=1)
    time_budget_sec: float | None = Field(default=None, gt=0)
    guidance: bool = False


class EvaluationSpec(BaseModel):
    """The splits and how pairs are evaluated on the selection and sealed splits.

    Attributes:
        splits: how the pool is split into search / selection / sealed
            (:class:`mindforge.evaluation.splits.SplitConfig`; assigned once, by a hash
            of the lineage name and each task's content hash, stratified by category).
        attempts: attempts per selection task per pair (the parent's, in the successor
            check, and both pairs' in the pair gate).
        sealed_attempts: attempts per sealed task per pair (None: ``attempts``).
        sealed_instance_attempts: attempts per task and pair of the sealed-instances reading
            (unseen instances of the training families), in place of ``sealed_attempts``
            (None: the same). The main job sizes it by the reading's power
            (:func:`mindforge.evaluation.reading_power.sealed_attempts_for_power`).
        successor_candidates: search contracts raced against the parent on the selection
            split for the successor (the search's best by pass rate first; one or two: each
            is judged at the Bonferroni level over how many race).
        race_budget: attempts per selection task shared among those candidates (each runs
            ``race_budget // successor_candidates``, at least 1); the race stops early once
            its outcome is settled (:mod:`mindforge.evaluation.race`).
        lift_resamples: bootstrap resamples of every lift interval.
        seed: seed of the bootstrap intervals.
    """

    splits: SplitConfig = Field(default_factory=SplitConfig)
    attempts: int = Field(default=2, ge=1)
    sealed_attempts: int | None = Field(default=None, ge=1)
    sealed_instance_attempts: int | None = Field(default=None, ge=1)
    successor_candidates: int = Field(default=2, ge=1)
    race_budget: int = Field(default=4, ge=1)
    lift_resamples: int = Field(default=2000, ge=1)
    seed: int = 0


class CurriculumSpec(BaseModel):
    """A pool drawn from task families (``--families DIR --instances N``): what is drawn, and what is held out.

    Instances are sampled from each family's parameter schema (seeded, unique by canonical
    parameters, spread over its difficulty levels), written as task folders under the
    artifact root, and each validated as Discovery validates a task (builds, the reference
    solution passes twice, doing nothing fails) before it joins the pool
    (``prepare_curriculum``). Where they go: :mod:`mindforge.evaluation.curriculum`.

    Attributes:
        families_dir: the folder of families (absolute path).
        families: the families drawn from (names in that folder), sorted.
        instances: instances per family for search and the sealed-instances reading (a
            training family) or for the sealed-families reading (a held-out family).
        selection_instances: further instances per training family, all on the selection
            split, sized at lineage start by the gates' power calculation.
        sealed_fraction: share of a training family's ``instances`` placed on the sealed
            split (the rest is searched and trained on).
        sealed_families: held-out families (every instance sealed; no stage ever sees
            them), chosen by the seeded rule at lineage start and recorded here.
        seed: the sampling seed.
    """

    families_dir: str
    families: list[str] = Field(default_factory=list)
    instances: int = Field(default=5, ge=1)
    selection_instances: int = Field(default=2, ge=0)
    sealed_fraction: float = Field(default=0.25, ge=0.0, lt=1.0)
    sealed_families: list[str] = Field(default_factory=list)
    seed: int = 0

    @property
    def training_families(self) -> list[str]:
        """The families searched and trained on (all but the held-out ones), sorted."""
        return sorted(set(self.families) - set(self.sealed_families))


class LineageSpec(BaseModel):
    """What a lineage runs; fixed at ``lineage start``.

    Attributes:
        name: unique lineage name (also its id).
        tasks: task directories / folders of them (absolute paths), split by the
            fractions of ``evaluation.splits``.
        contract_path: the root HCP contract file (absolute path).
        curriculum: task families the pool draws instances from (None: tasks only).
        sealed_tasks: hand-written task directories / folders pinned to the sealed split
            (the *sealed tasks* reading), absolute paths.
        generations: number of generations to run (>= 1).
        stages: generation stages enabled, in order.
        runtime / discovery / expansion / update / evaluation: the sub-specs, each
            handed only to the stages that read it.
    """

    name: str
    tasks: list[str]
    contract_path: str
    curriculum: CurriculumSpec | None = None
    sealed_tasks: list[str] = Field(default_factory=list)
    generations: int = Field(default=1, ge=1)
    stages: list[Stage] = Field(default_factory=lambda: [Stage.DISCOVERY, Stage.EXPANSION, Stage.UPDATE])
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    discovery: DiscoverySpec = Field(default_factory=DiscoverySpec)
    expansion: ExpansionSpec = Field(default_factory=ExpansionSpec)
    update: UpdateSpec = Field(default_factory=UpdateSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)


class AuditJudge(BaseModel):
    """Where the audit's optional judge call goes (``ExpansionSpec.audit_judge``).

    Attributes:
        enabled: False = rules only.
        policy_url: the endpoint (``.../v1``); None = the contract's env var / settings.
    """

    enabled: bool = False
    policy_url: str | None = None

    @classmethod
    def of(cls, expansion: ExpansionSpec, runtime: RuntimeSpec) -> AuditJudge:
        """The judge an Expansion spec asks for, on the runtime's endpoint."""
        return cls(enabled=expansion.audit_judge, policy_url=runtime.policy_url)
