"""Replaying an entry with no model: its commands in a fresh sandbox of its task, then the verifier.

:class:`ReplayAgent` runs the commands one by one in a persistent shell (like the model
agent's, from the task's working directory) and records what each printed; the trial
runner then runs the task's verifier as for any trial. :func:`replay_entry` repeats that
up to ``runs`` times (stopping early once a pass and a fail have both been seen) and
judges the entry (:func:`mindforge.experience.validation.judge_replays`). It runs inside a
Ray task (``workers/ray_trials.py:replay_entry_task``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel

from mindforge.agent.base import Agent, AgentOutcome
from mindforge.agent.shell import PersistentShell
from mindforge.experience.entry import EntryValidation, ExperienceEntry, cut_output
from mindforge.experience.validation import Rejection, judge_replays, reject, replays_settled
from mindforge.hcp.examples import ExampleStep
from mindforge.sandbox.base import Sandbox
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task
from mindforge.trials.record import FailureClass, LimitFired
from mindforge.trials.run import run_trial

#: the most bytes of each output stream a replayed command keeps
REPLAY_OUTPUT_BYTES = 4096


class ReplayAgent(Agent):
    """Runs a fixed list of commands (no model) and records each one's output.

    Args:
        commands: the commands, in order.

    The outputs go to ``replay.json`` in the agent's artifact dir (a list of
    ``{"command", "output", "exit_code"}``) and to :attr:`steps`.
    """

    name = "replay"

    def __init__(self, commands: list[str]) -> None:
        self.commands = list(commands)
        self.steps: list[ExampleStep] = []

    def run(self, task: Task, sandbox: Sandbox, *, timeout_sec: float, artifact_dir: Path) -> AgentOutcome:
        """Run the commands within ``timeout_sec`` seconds in all; see :meth:`Agent.run`."""
        shell = PersistentShell(sandbox, task.config.environment.workdir or "/app", user=task.config.agent.user)
        deadline = time.monotonic() + timeout_sec
        outcome = AgentOutcome()
        self.steps = []
        for command in self.commands:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.failure_class, outcome.limit_fired = FailureClass.AGENT_TIMEOUT, LimitFired.AGENT_TIMEOUT
                outcome.failure_detail = "the replay ran past the task's agent timeout"
                break
            res = shell.run(command, timeout_sec=remaining, max_output_bytes=REPLAY_OUTPUT_BYTES)
            text = res.stdout + ("" if not res.stderr or res.stdout.endswith("\n") or not res.stdout else "\n")
            text += res.stderr
            code = 124 if res.exit_code is None else res.exit_code & 255  # 124: timed out, as timeout(1) says
            self.steps.append(ExampleStep(command=command, output=cut_output(text), exit_code=code))
        log = artifact_dir / "replay.json"
        log.write_text(json.dumps([s.model_dump() for s in self.steps], indent=1), encoding="utf-8")
        outcome.artifacts["replay"] = str(log)
        outcome.num_turns = len(self.steps)
        return outcome


class ReplayVerdict(BaseModel):
    """What the replays of one entry decided.

    Attributes:
        entry: the entry with its validation record and the first replay's outputs
            when kept; the candidate as given otherwise.
        kept: True when every replay passed.
        rejection: why it was not kept (``failed`` or ``flaky``), else None.
    """

    entry: ExperienceEntry
    kept: bool
    rejection: Rejection | None = None


def replay_trial_id(entry: ExperienceEntry, n: int) -> str:
    """The deterministic trial id of replay ``n`` of ``entry``: ``r-<entry id>-<n>``."""
    return f"r-{entry.entry_id}-{n}"


def replay_entry(
    entry: ExperienceEntry,
    task: Task,
    engine: DockerEngine,
    *,
    artifact_root: Path,
    run_id: str,
    runs: int = 2,
    image_map: ImageMap | None = None,
) -> ReplayVerdict:
    """Replay ``entry`` on ``task`` up to ``runs`` times and judge it.

    Args:
        entry: the candidate (mined from ``task``).
        task: the loaded task (same content hash as the entry's).
        engine: the Docker engine.
        artifact_root / run_id: where the replay trials' artifacts go.
        runs: the most replays (at least 2): stops early once a pass and a fail were seen.
        image_map: the public-base rewrite map, or None.

    Returns:
        the verdict.

    Raises:
        ValueError: ``runs`` below 2, or the task is not the one the entry was mined from.
    """
    if runs < 2:
        raise ValueError(f"an entry must pass at least twice to be kept (runs = {runs})")
    if task.content_hash != entry.task_hash:
        raise ValueError(
            f"entry {entry.entry_id} was mined from task hash {entry.task_hash[:12]}, not {task.content_hash[:12]}"
        )
    rewards: list[float | None] = []
    ids: list[str] = []
    first_steps: list[ExampleStep] | None = None
    while not replays_settled(rewards, runs):
        agent = ReplayAgent(entry.commands)
        trial_id = replay_trial_id(entry, len(rewards))
        rec = run_trial(task, agent, engine, run_id=run_id, trial_id=trial_id, artifact_root=artifact_root,
                        attempt=len(rewards), image_map=image_map)
        rewards.append(rec.reward)
        ids.append(trial_id)
        if first_steps is None and rec.passed and len(agent.steps) == len(entry.commands):
            first_steps = agent.steps
    validation = EntryValidation(rewards=rewards, replay_trial_ids=ids)
    reason = judge_replays(rewards)
    if reason is None:
        return ReplayVerdict(entry=entry.with_validation(validation, first_steps), kept=True)
    detail = "replay rewards " + ", ".join("none" if r is None else f"{r:g}" for r in rewards)
    return ReplayVerdict(entry=entry.with_validation(validation), kept=False, rejection=reject(entry, reason, detail))
