"""A generation as steps behind barriers, and the cluster it runs on.

The workflows run a generation as a chain of barriers: each ``asyncio.gather`` of
``run_trials`` batches (Expansion's base trials, one search step, one successor-race round,
one Update iteration's rollouts, the promotion and sealed trials) ends before the next
store activity plans the following one; training holds the Update between its rollouts
and the promotion gate. A :class:`GenerationPlan` is that chain: trial waves, sandbox-only
waves (experience replays), training, and serial orchestration (store activities,
Discovery's proposals, audits), in order.

:func:`plan_from_timeline` reads the chain off a measured generation: a wave is a maximal
stretch in which some trial is running, a gap between waves is serial time.
:class:`NightlySpec` and :func:`nightly_plan` scale the same chain to a target size.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class TrialWave(BaseModel):
    """Trials submitted together, ending in a barrier.

    Attributes:
        label: what the wave is (``expansion``, ``search step 3``, ...).
        counts: stage -> trials; each trial's cost is drawn from that stage's measured pool.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["trials"] = "trials"
    label: str
    counts: dict[str, int]

    @property
    def n_trials(self) -> int:
        """Trials in the wave."""
        return sum(self.counts.values())


class SandboxWave(BaseModel):
    """Sandbox-only jobs (no model call: experience replays), ending in a barrier.

    Attributes:
        label: what the wave is.
        n_jobs: jobs, each holding one sandbox slot for ``job_sec``.
        job_sec: seconds per job.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["sandbox"] = "sandbox"
    label: str
    n_jobs: int = Field(ge=0)
    job_sec: float = Field(ge=0)


class Training(BaseModel):
    """One training run on the training node (the Update waits for it).

    Attributes:
        label: what is trained.
        seconds: wall seconds of the run on the training node.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["training"] = "training"
    label: str
    seconds: float = Field(ge=0)


class Serial(BaseModel):
    """Orchestration nothing else overlaps (store activities, planning, Discovery's proposals).

    Attributes:
        label: what it is.
        seconds: wall seconds.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["serial"] = "serial"
    label: str
    seconds: float = Field(ge=0)


def group_of(label: str) -> str:
    """The stage a step's label names: the label up to its first colon (``search: step 3`` -> ``search``)."""
    return label.split(":", 1)[0]


Step = Annotated[TrialWave | SandboxWave | Training | Serial, Field(discriminator="kind")]


class GenerationPlan(BaseModel):
    """One generation: its steps in order, each behind the barrier of the one before."""

    steps: list[Step]

    @property
    def n_trials(self) -> int:
        """Model trials over all waves."""
        return sum(s.n_trials for s in self.steps if isinstance(s, TrialWave))


class Cluster(BaseModel):
    """Where a generation runs.

    Attributes:
        nodes: sandbox nodes.
        slots_per_node: concurrent sandboxes (Ray trial tasks) per node.
        training_nodes: nodes that train (one run at a time each).
    """

    nodes: int = Field(ge=1)
    slots_per_node: int = Field(ge=1)
    training_nodes: int = Field(default=1, ge=1)

    @property
    def slots(self) -> int:
        """Sandbox slots over the cluster."""
        return self.nodes * self.slots_per_node


class PolicyServer(BaseModel):
    """The policy server, as the simulation sees it.

    Attributes:
        lanes: requests served at once at full per-request speed (llama.cpp's parallel
            slots, vLLM's batch); more wait.
        model_speedup: per-request speed relative to the server the trials were measured
            on (model seconds are divided by it).
    """

    lanes: int = Field(ge=1)
    model_speedup: float = Field(default=1.0, gt=0)


class TimedTrial(BaseModel):
    """A measured trial's stage and interval (UTC)."""

    stage: str
    started_at: datetime
    finished_at: datetime


def _waves(trials: list[TimedTrial]) -> list[tuple[datetime, datetime, dict[str, int]]]:
    """Maximal stretches of time with some trial running: (start, end, stage counts)."""
    waves: list[tuple[datetime, datetime, dict[str, int]]] = []
    for t in sorted(trials, key=lambda t: t.started_at):
        if waves and t.started_at <= waves[-1][1]:
            start, end, counts = waves[-1]
            counts[t.stage] = counts.get(t.stage, 0) + 1
            waves[-1] = (start, max(end, t.finished_at), counts)
        else:
            waves.append((t.started_at, t.finished_at, {t.stage: 1}))
    return waves


def plan_from_timeline(
    trials: list[TimedTrial], started_at: datetime, finished_at: datetime, *, training_sec: float = 0.0
) -> GenerationPlan:
    """The plan a measured generation ran: its trial waves and the serial gaps between them.

    Args:
        trials: the generation's trials with their measured intervals.
        started_at: the generation's start (UTC).
        finished_at: the generation's end (UTC).
        training_sec: measured training seconds; booked as a :class:`Training` step inside
            the longest gap after a rollout wave (the rest of that gap stays serial).

    Returns:
        the plan: serial gap, wave, serial gap, ..., wave, serial tail.

    Raises:
        ValueError: no trials, a trial outside the generation, or training longer than its gap.
    """
    if not trials:
        raise ValueError("plan_from_timeline: no trials")
    waves = _waves(trials)
    if waves[0][0] < started_at or max(w[1] for w in waves) > finished_at:
        raise ValueError("plan_from_timeline: a trial runs outside the generation's interval")
    steps: list[Step] = []
    prev = started_at
    for i, (start, end, counts) in enumerate(waves):
        steps.append(Serial(label=f"orchestration: gap before wave {i}", seconds=(start - prev).total_seconds()))
        steps.append(TrialWave(label=f"{'+'.join(sorted(counts))}: wave {i}", counts=counts))
        prev = end
    steps.append(Serial(label="orchestration: tail", seconds=(finished_at - prev).total_seconds()))
    if training_sec > 0:
        _book_training(steps, training_sec)
    return GenerationPlan(steps=steps)


def _book_training(steps: list[Step], training_sec: float) -> None:
    """Replace the longest serial gap after a rollout wave by training plus the gap's rest."""
    gaps: list[tuple[int, Serial]] = []
    for i in range(1, len(steps)):
        before, gap = steps[i - 1], steps[i]
        if isinstance(gap, Serial) and isinstance(before, TrialWave) and "rollout" in before.counts:
            gaps.append((i, gap))
    if not gaps:
        raise ValueError("plan_from_timeline: training given but no gap follows a rollout wave")
    i, gap = max(gaps, key=lambda pair: pair[1].seconds)
    if training_sec > gap.seconds:
        raise ValueError(f"plan_from_timeline: training {training_sec:.1f} s exceeds its gap {gap.seconds:.1f} s")
    steps[i : i + 1] = [
        Training(label="training: measured run", seconds=training_sec),
        Serial(label=f"{gap.label} (less training)", seconds=gap.seconds - training_sec),
    ]
