"""The agent interface: whatever acts in the sandbox between start-up and verification.

The oracle and nop agents (task validation) and the model-driven HCP agent all
implement :class:`Agent`; the trial runner knows nothing else about them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from pydantic import BaseModel, Field

from mindforge.sandbox.base import Sandbox
from mindforge.tasks.model import Task
from mindforge.trials.record import FailureClass, LimitFired


class AgentOutcome(BaseModel):
    """What an agent phase produced (the verifier decides the reward afterwards).

    Attributes:
        failure_class: set when the agent phase itself failed (timeout, endpoint
            error, parse error, ...); None when the agent finished normally.
        failure_detail: short evidence for the failure class.
        limit_fired: the harness limit that ended the phase, if any.
        prompt_tokens / completion_tokens: totals over all model calls.
        num_turns: model calls made.
        artifacts: name -> path of files the agent wrote under its artifact dir.
        experience_entries: ids of the experience entries shown as worked examples,
            best first (``mindforge.experience``); [] when none were shown.
    """

    failure_class: FailureClass | None = None
    failure_detail: str = ""
    limit_fired: LimitFired | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_turns: int = 0
    artifacts: dict[str, str] = Field(default_factory=dict)
    experience_entries: list[str] = Field(default_factory=list)


class Agent(ABC):
    """One agent. ``name`` goes into the trial record (``oracle``, ``nop``, ``model``)."""

    name: str = "agent"

    #: content hash of the HCP contract driving this agent, if any
    contract_hash: str | None = None

    #: adapter name served by the endpoint ("" = base weights), if any
    adapter: str = ""

    @abstractmethod
    def run(self, task: Task, sandbox: Sandbox, *, timeout_sec: float, artifact_dir: Path) -> AgentOutcome:
        """Act in ``sandbox`` on ``task`` until done or ``timeout_sec`` (seconds) has passed.

        The agent never sees ``task.tests_dir`` or ``task.solution_dir`` (except the
        oracle, whose job is to run the reference solution).

        Args:
            task: the loaded task (instruction, limits).
            sandbox: the started sandbox.
            timeout_sec: the task's agent time limit, in seconds.
            artifact_dir: an existing directory for this agent's files (logs,
                transcript).

        Returns:
            the outcome; exceptions escaping ``run`` are recorded as ``agent_error``.
        """
