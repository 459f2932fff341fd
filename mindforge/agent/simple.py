"""The two agents used to validate tasks: ``oracle`` (runs the reference solution) and ``nop``."""

from __future__ import annotations

from pathlib import Path

from mindforge.agent.base import Agent, AgentOutcome
from mindforge.domain import FailureClass, LimitFired
from mindforge.errors import InputError
from mindforge.sandbox.base import Sandbox
from mindforge.tasks.model import Task

SOLUTION_DIR = "/solution"


class OracleAgent(Agent):
    """Copies ``solution/`` to ``/solution``, runs ``bash /solution/solve.sh`` and removes it again.

    The solution runs in the image's working directory with ``[solution].env``; its
    output goes to ``oracle.txt`` in the agent's artifact dir. A non-zero exit of
    ``solve.sh`` is recorded but is not itself a failure: the verifier decides.
    """

    name = "oracle"

    def run(self, task: Task, sandbox: Sandbox, *, timeout_sec: float, artifact_dir: Path) -> AgentOutcome:
        """Run the reference solution; see :meth:`Agent.run`.

        Raises:
            InputError: the task has no ``solution/solve.sh``.
        """
        if not task.has_solution:
            raise InputError(task.solution_dir / "solve.sh", "", "missing: the oracle needs a reference solution")
        sandbox.put_dir(task.solution_dir, SOLUTION_DIR)
        res = sandbox.exec(
            f"bash {SOLUTION_DIR}/solve.sh; rc=$?; rm -rf {SOLUTION_DIR}; exit $rc",
            timeout_sec=timeout_sec,
            workdir=task.config.environment.workdir,
            env=dict(task.config.solution.env) or None,
            user=task.config.agent.user,
        )
        log = artifact_dir / "oracle.txt"
        log.write_text(
            f"$ bash /solution/solve.sh  (exit {res.exit_code}, {res.duration_sec:.2f} s)\n"
            f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}\n",
            encoding="utf-8",
        )
        outcome = AgentOutcome(artifacts={"agent_log": str(log)})
        if res.timed_out:
            outcome.failure_class = FailureClass.AGENT_TIMEOUT
            outcome.limit_fired = LimitFired.AGENT_TIMEOUT
            outcome.failure_detail = f"solve.sh ran past the agent timeout of {timeout_sec:g} s"
        elif res.exit_code != 0:
            outcome.failure_detail = f"solve.sh exited {res.exit_code}"
        return outcome


class NopAgent(Agent):
    """Does nothing: a task that passes under it tests nothing the agent must do."""

    name = "nop"

    def run(self, task: Task, sandbox: Sandbox, *, timeout_sec: float, artifact_dir: Path) -> AgentOutcome:
        """Return at once; see :meth:`Agent.run`."""
        return AgentOutcome()
