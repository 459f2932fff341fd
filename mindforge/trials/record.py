"""The trial record: one attempt of one task under one agent (and, later, one pair).

A trial record is a small pydantic object that workflows and the store pass around;
logs, transcripts and verifier output stay files under the artifact root and the record
holds their paths.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

# the agent reports these too, so they live below both layers, with the shared enums
from mindforge.domain import FailureClass, LimitFired

#: classes whose trial has no real reward (reward is None)
NO_REWARD_CLASSES = frozenset(
    {
        FailureClass.ENV_BUILD_FAILED,
        FailureClass.ENV_START_FAILED,
        FailureClass.VERIFIER_TIMEOUT,
        FailureClass.VERIFIER_ERROR,
        FailureClass.INFRA_ERROR,
        FailureClass.ENDPOINT_ERROR,
    }
)

#: no-reward classes that a fault outside the task and the pair causes (the sandbox engine,
#: the policy endpoint, a lost worker): a trial that ends in one is run again
#: (:func:`is_retryable_infra`), never scored
RETRYABLE_INFRA_CLASSES = frozenset(
    {
        FailureClass.ENV_START_FAILED,
        FailureClass.INFRA_ERROR,
        FailureClass.ENDPOINT_ERROR,
    }
)


def is_retryable_infra(record: TrialRecord) -> bool:
    """True when the trial ended in an infrastructure fault and should run again (reward None)."""
    return record.reward is None and record.failure_class in RETRYABLE_INFRA_CLASSES


class PhaseTimings(BaseModel):
    """Wall time of each trial phase, in seconds (0.0 when the phase did not run).

    ``instance_steps_sec`` is the part of ``start_sec`` a family instance's steps took
    (:mod:`mindforge.sandbox.instance`); it is not a phase of its own (``total_sec`` leaves
    it out) and the store keeps no column for it (``record.json`` has it).
    """

    build_sec: float = 0.0
    start_sec: float = 0.0
    agent_sec: float = 0.0
    verify_sec: float = 0.0
    teardown_sec: float = 0.0
    instance_steps_sec: float = 0.0

    @property
    def total_sec(self) -> float:
        """Sum of all phases, in seconds."""
        return self.build_sec + self.start_sec + self.agent_sec + self.verify_sec + self.teardown_sec


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class TrialRecord(BaseModel):
    """One attempt of one task.

    Attributes:
        trial_id: unique, deterministic where the caller derives it (for idempotent
            retries: lineage / generation / task / contract / attempt).
        run_id: the run (validation, eval, lineage stage) the trial belongs to.
        task_id: the task's id (its directory name by default).
        task_hash: sha256 over all of the task's files.
        agent: ``oracle``, ``nop`` or ``model``.
        contract_hash: the HCP contract's content hash for model trials, else None.
        adapter: the adapter name served by the endpoint ("" = base weights).
        attempt: 0-based attempt index within its group.
        reward: verifier reward in [0, 1], or None when no real reward exists.
        reward_details: named sub-scores from ``reward.json``.
        failure_class: why the trial did not pass, or None when reward == 1.
        failure_detail: one or two lines of evidence for the failure class.
        limit_fired: the limit that ended a phase early, if any.
        timings: per-phase wall time in seconds.
        prompt_tokens / completion_tokens: totals over all model calls (0 for
            oracle and nop).
        num_turns: model calls made.
        worker: where the trial ran (``host/ray-node-id/pid``; "" when in-process).
        artifacts: name -> path of files under the artifact root (agent log,
            verifier stdout, transcript, ...).
        experience_entries: ids of the experience entries the agent was shown as worked
            examples, best first (retrieved from the contract's snapshot); [] when none.
    """

    trial_id: str
    run_id: str
    task_id: str
    task_hash: str
    agent: str
    contract_hash: str | None = None
    adapter: str = ""
    attempt: int = 0
    reward: float | None = None
    reward_details: dict[str, float] = Field(default_factory=dict)
    failure_class: FailureClass | None = None
    failure_detail: str = ""
    limit_fired: LimitFired | None = None
    timings: PhaseTimings = Field(default_factory=PhaseTimings)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_turns: int = 0
    worker: str = ""
    artifacts: dict[str, str] = Field(default_factory=dict)
    experience_entries: list[str] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None

    @property
    def passed(self) -> bool:
        """True when the verifier gave the full reward (1.0)."""
        return self.reward is not None and self.reward >= 1.0

    @property
    def has_real_reward(self) -> bool:
        """True when the reward came from a clean verifier run (usable for search/training)."""
        return self.reward is not None
