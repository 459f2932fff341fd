"""Inputs and results of the Ray tasks the sandbox-queue activities submit.

Ray tasks take and return these pydantic models (pickled by Ray), never ``dict``
payloads. Pure pydantic records (see :mod:`mindforge.payloads`); no Temporal, no Ray.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from mindforge.payloads.training import AdapterReport, TrainerConfig
from mindforge.settings import Settings
from mindforge.trials.record import TrialRecord


class SandboxSettings(BaseModel):
    """The worker's settings a Ray task needs to run a trial: where its files go, the Docker engine, the image map.

    The settings given to ``run_worker`` reach the Ray worker processes through this
    record (a field of each trial task's input), not through the Ray process's own
    environment, which may say otherwise.

    Attributes:
        data_dir: the worker's data dir (the user's image map lives there).
        artifact_root: where trial directories go (``runs/<run_id>/<trial_id>/``).
        image_map_file / image_map_enabled: the repo's image map and whether it is on.
        docker_pids_limit: the sandbox's process limit.
        policy_api_key: the policy endpoint's API key, sent by the trial's model calls; it
            travels here (pickled by Ray, masked in any dump) rather than in the Ray job's
            environment, whose variables Ray writes to its logs.
    """

    model_config = ConfigDict(frozen=True)

    data_dir: str
    artifact_root: str
    image_map_file: str
    image_map_enabled: bool = True
    docker_pids_limit: int = 512
    policy_api_key: SecretStr | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxSettings:
        """The part of ``settings`` a trial's Ray task needs."""
        return cls(
            data_dir=str(settings.data_dir),
            artifact_root=str(settings.artifacts),
            image_map_file=str(settings.image_map_file),
            image_map_enabled=settings.image_map_enabled,
            docker_pids_limit=settings.docker_pids_limit,
            policy_api_key=settings.policy_api_key,
        )

    def to_settings(self) -> Settings:
        """Settings carrying these values (the others from the Ray process, unused by a trial)."""
        return Settings(
            data_dir=self.data_dir,
            artifact_root=self.artifact_root,
            image_map_file=self.image_map_file,
            image_map_enabled=self.image_map_enabled,
            docker_pids_limit=self.docker_pids_limit,
            policy_api_key=self.policy_api_key,
        )


class RunTrialTaskInput(BaseModel):
    """One trial for a Ray worker (``run_trial_task``).

    Attributes:
        task_path: the task directory.
        trial_id / run_id / attempt: the trial's identity.
        agent: ``model`` (the contract's harness on the policy), ``oracle`` or ``nop``.
        contract_toml / contract_hash: the HCP contract (``model`` trials).
        policy_url: the policy endpoint; None = the contract's env var / settings.
        sandbox: the worker's settings for the trial (artifact root, Docker engine).
        seed: the sampling seed of its model calls (:func:`mindforge.trials.seeds.paired_seed`);
            None sends none.
    """

    task_path: str
    trial_id: str
    run_id: str
    attempt: int = 0
    agent: Literal["model", "oracle", "nop"] = "model"
    contract_toml: str = ""
    contract_hash: str = ""
    policy_url: str | None = None
    sandbox: SandboxSettings
    seed: int | None = None


class RunTrialTaskResult(BaseModel):
    """The trial's record (``worker`` names the host, Ray node and process that ran it)."""

    record: TrialRecord


class CheckProposalTaskInput(BaseModel):
    """One staged Discovery proposal to check on a Ray node (``check_proposal_task``).

    Attributes:
        task_dir: the staged task directory.
        pool_paths: the lineage's pool task directories (duplicate checks).
        held_out_ids: ids of those on the selection or sealed split (a rejection does
            not name them).
        contract_toml: the proposing pair's contract (difficulty trials).
        policy_url: the policy endpoint.
        attempts: difficulty trials of the pair.
        run_id: the run id of the validation and difficulty trials.
        sandbox: the worker's settings for the checks (artifact root, Docker engine).
    """

    task_dir: str
    pool_paths: list[str] = Field(default_factory=list)
    held_out_ids: list[str] = Field(default_factory=list)
    contract_toml: str
    policy_url: str | None = None
    attempts: int = 2
    run_id: str
    sandbox: SandboxSettings


class TrainingItem(BaseModel):
    """One selected trajectory: its trial, ATIF file, reward (0..1) and GRPO group.

    A guide (``trial_id`` ``guide:<entry id>``) is a validated experience entry rendered
    under the training contract; its file says so (``agent.name`` ``mindforge-guide``:
    :mod:`mindforge.trainer.guidance`), and the trainer gives it the off-policy loss.
    """

    trial_id: str
    trajectory: str
    reward: float
    group_id: str


class TrainTaskInput(BaseModel):
    """Train one adapter revision with GRPO on a Ray node (``train_adapter_task``).

    Attributes:
        base_model_path: the base model directory the trainer loads.
        items: the selected trajectories, shape (n,).
        config: GRPO/LoRA hyper-parameters.
        out_dir: where the finished adapter goes (``<artifacts>/adapters/<lineage>/<name>``).
        parent_adapter: the parent revision's directory to continue from, or None.
    """

    base_model_path: str
    items: list[TrainingItem]
    config: TrainerConfig
    out_dir: str
    parent_adapter: str | None = None


class ValidateTaskResult(BaseModel):
    """The validation report, or the validation error's class name and message."""

    report: AdapterReport | None = None
    error: str = ""
    message: str = ""


class ReplayEntryTaskInput(BaseModel):
    """One candidate experience entry to validate by replay (``replay_entry_task``).

    Attributes:
        entry: the candidate (``mindforge.experience.entry.ExperienceEntry`` as JSON data).
        task_path: the task it was mined from (its content hash must match the entry's).
        run_id: the run the replay trials belong to.
        runs: the most replays (at least 2; every one must pass).
        sandbox: the worker's sandbox settings.
    """

    entry: dict[str, Any]
    task_path: str
    run_id: str
    runs: int = Field(default=2, ge=2)
    sandbox: SandboxSettings


class ValidateInstanceTaskInput(BaseModel):
    """One family instance to validate on a Ray node (``validate_instance_task``): build, oracle twice, nop.

    Attributes:
        task_path: the instance's task directory.
        run_id: the run id of its validation trials.
        oracle_runs: reference-solution runs (at least 2: the verdict must be stable).
        sandbox: the worker's sandbox settings.
        families_dir: the folder of the instance's family; a failed verdict's first reason
            then names the family file at fault (:func:`mindforge.discovery.family_pool.family_reason`).
    """

    task_path: str
    run_id: str
    oracle_runs: int = Field(default=2, ge=2)
    sandbox: SandboxSettings
    families_dir: str = ""


class InstanceVerdict(BaseModel):
    """An instance's validation, small enough to cache and to carry back (no trial records).

    Attributes:
        task_hash: the instance's content hash.
        verdict: :class:`mindforge.trials.validate.Verdict` as text (``valid``, ``broken``, ...).
        reasons: the evidence, one item per finding.
        seconds: wall time of the validation.
    """

    task_hash: str
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the instance is valid."""
        return self.verdict == "valid"
