"""What a lineage runs (its spec and stages), the task queues and search attributes, and trial ids.

Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.evaluation.splits import SplitConfig
from mindforge.trainer.config import TrainerConfig

#: task queue for workflow tasks and store-only activities
ORCHESTRATION_QUEUE = "mindforge-orchestration"
#: task queue for activities that run sandboxes (fan out to Ray)
SANDBOX_QUEUE = "mindforge-sandbox"

#: custom search attributes (registered on the dev server by ``mindforge dev up``)
SA_LINEAGE = "MindForgeLineage"
SA_GENERATION = "MindForgeGeneration"
SA_STAGE = "MindForgeStage"


class Stage(StrEnum):
    """The three stages of a generation (what ``LineageSpec.stages`` lists)."""

    DISCOVERY = "discovery"
    EXPANSION = "expansion"
    UPDATE = "update"


class TrialStage(StrEnum):
    """Where a stored trial ran (its ``stage``); the split of its task follows from it.

    ``expansion`` and ``search`` trials run on search tasks; ``selection`` trials run on
    selection tasks and feed decisions only (successor contract, adapter promotion);
    ``sealed`` trials run on sealed tasks and feed the reported lift only.
    """

    EXPANSION = "expansion"
    SEARCH = "search"
    SELECTION = "selection"
    SEALED = "sealed"


class LineageSpec(BaseModel):
    """What a lineage runs; fixed at ``lineage start``.

    Attributes:
        name: unique lineage name (also its id).
        tasks: task directories / folders of them (absolute paths).
        contract_path: the root HCP contract file (absolute path).
        generations: number of generations to run (>= 1).
        attempts: trials per task per generation (the GRPO group size).
        splits: how the pool is split into search / selection / sealed
            (:class:`mindforge.evaluation.splits.SplitConfig`; assigned once, by a hash
            of the lineage name and each task's content hash, stratified by category).
        seed: seed of bootstrap intervals and of sampling where the policy honours it.
        policy_url: OpenAI-compatible endpoint; None = settings / the contract's env var.
        stages: generation stages enabled, in order.
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
        eval_attempts: attempts per selection or sealed task per pair (decisions and the
            sealed lift).
        promotion_min_lift: the least selection lift (reward units) that promotes a new
            adapter revision into the next generation's pair.
        max_groups_per_task / max_trials_per_group: selection caps per task and group.
        serving_urls: endpoints each new adapter revision is handed off to besides the
            policy endpoint (``policy_url`` or settings), which always gets it.
        lift_resamples: bootstrap resamples of every lift interval.
        audit_judge: ask the policy endpoint to decide the failures the audit rules flag
            ``needs_judge`` (:func:`mindforge.audit_judge.judge_audit`); the verdict is stored
            as ``judge:<model>``, and an unusable reply keeps the rules' verdict.
    """

    name: str
    tasks: list[str]
    contract_path: str
    generations: int = Field(default=1, ge=1)
    attempts: int = Field(default=2, ge=1)
    splits: SplitConfig = Field(default_factory=SplitConfig)
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
    eval_attempts: int = Field(default=2, ge=1)
    promotion_min_lift: float = 0.0
    max_groups_per_task: int = Field(default=2, ge=1)
    max_trials_per_group: int = Field(default=16, ge=2)
    serving_urls: list[str] = Field(default_factory=list)
    lift_resamples: int = Field(default=2000, ge=1)
    audit_judge: bool = False


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


def trial_id_for(lineage_id: str, generation: int, stage: str, task_id: str, contract_hash: str, attempt: int) -> str:
    """Deterministic trial id: ``<lineage>/g<gen>/<stage>/<task>/<contract[:12]>/<attempt>``."""
    return f"{lineage_id}/g{generation}/{stage}/{task_id}/{contract_hash[:12]}/{attempt}"


# LineageSpec names SearchBudgetSpec, defined below it
LineageSpec.model_rebuild()
