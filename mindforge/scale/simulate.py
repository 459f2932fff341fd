"""A seeded discrete-event simulation of one generation on one cluster (SimPy).

Resources: the cluster's sandbox slots (one per concurrent trial), the policy server's
lanes (requests served at full speed at once), the dispatcher (the Ray head, which hands
out one task at a time for ``dispatch_sec``) and the training nodes. A trial takes a slot,
is dispatched, sets up its sandbox, runs its turns - each a model call on a lane, at the
server's speed-up, then tool time in the sandbox - and finishes (verifier, teardown). A
wave's trials are all submitted at once and the next step starts when the last ends; a
:class:`~mindforge.scale.plan.Serial` step holds everything.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import simpy
from pydantic import BaseModel, Field

from mindforge.scale.costs import TrialWork
from mindforge.scale.plan import (
    Cluster,
    GenerationPlan,
    PolicyServer,
    SandboxWave,
    Serial,
    Training,
    TrialWave,
    group_of,
)


class StepTiming(BaseModel):
    """One simulated step: its label, kind, start and end (seconds from the generation's start)."""

    label: str
    kind: str
    start_sec: float
    end_sec: float

    @property
    def wall_sec(self) -> float:
        """The step's wall seconds."""
        return self.end_sec - self.start_sec


class SimResult(BaseModel):
    """A simulated generation.

    Attributes:
        makespan_sec: the generation's wall seconds.
        steps: each step's timing, in plan order.
        slot_busy_sec: slot-seconds held by trials and sandbox jobs.
        lane_busy_sec: lane-seconds held by model calls.
        lane_wait_sec: seconds trials waited for a free lane (summed over trials).
        dispatch_busy_sec: seconds the dispatcher was busy.
        training_sec: seconds the training nodes were busy.
        trials: model trials run.
    """

    makespan_sec: float
    steps: list[StepTiming]
    slot_busy_sec: float = Field(ge=0)
    lane_busy_sec: float = Field(ge=0)
    lane_wait_sec: float = Field(ge=0)
    dispatch_busy_sec: float = Field(ge=0)
    training_sec: float = Field(ge=0)
    trials: int = Field(ge=0)

    def by_group(self) -> dict[str, float]:
        """Wall seconds per stage group (the label up to its colon), in first-seen order."""
        out: dict[str, float] = {}
        for s in self.steps:
            out[group_of(s.label)] = out.get(group_of(s.label), 0.0) + s.wall_sec
        return out


class _Sim:
    """The SimPy environment, its resources and the busy counters of one run."""

    def __init__(self, cluster: Cluster, server: PolicyServer, dispatch_sec: float) -> None:
        self.env = simpy.Environment()
        self.slots = simpy.Resource(self.env, capacity=cluster.slots)
        self.lanes = simpy.Resource(self.env, capacity=server.lanes)
        self.head = simpy.Resource(self.env, capacity=1)
        self.trainer = simpy.Resource(self.env, capacity=cluster.training_nodes)
        self.speedup = server.model_speedup
        self.dispatch_sec = dispatch_sec
        self.busy = {"slot": 0.0, "lane": 0.0, "lane_wait": 0.0, "dispatch": 0.0, "training": 0.0}

    def trial(self, work: TrialWork) -> Generator[Any, Any, None]:
        """One trial: slot, dispatch, set-up, turns of (model call on a lane, tool time), finish."""
        with self.slots.request() as slot:
            yield slot
            held = self.env.now
            yield from self._dispatch()
            yield self.env.timeout(work.setup_sec)
            model, tool = work.model_sec / self.speedup / work.turns, work.tool_sec / work.turns
            for _ in range(work.turns):
                asked = self.env.now
                with self.lanes.request() as lane:
                    yield lane
                    self.busy["lane_wait"] += self.env.now - asked
                    yield self.env.timeout(model)
                    self.busy["lane"] += model
                yield self.env.timeout(tool)
            yield self.env.timeout(work.finish_sec)
            self.busy["slot"] += self.env.now - held

    def sandbox_job(self, seconds: float) -> Generator[Any, Any, None]:
        """One sandbox-only job: slot, dispatch, ``seconds`` in the sandbox."""
        with self.slots.request() as slot:
            yield slot
            held = self.env.now
            yield from self._dispatch()
            yield self.env.timeout(seconds)
            self.busy["slot"] += self.env.now - held

    def training(self, seconds: float) -> Generator[Any, Any, None]:
        """One training run on a training node."""
        with self.trainer.request() as node:
            yield node
            yield self.env.timeout(seconds)
            self.busy["training"] += seconds

    def _dispatch(self) -> Generator[Any, Any, None]:
        if self.dispatch_sec > 0:
            with self.head.request() as head:
                yield head
                yield self.env.timeout(self.dispatch_sec)
                self.busy["dispatch"] += self.dispatch_sec


def simulate(
    plan: GenerationPlan,
    pools: Mapping[str, Sequence[TrialWork]],
    cluster: Cluster,
    server: PolicyServer,
    *,
    dispatch_sec: float = 0.0,
    seed: int = 0,
) -> SimResult:
    """Simulate ``plan`` on ``cluster``, drawing each trial's work from its stage's pool.

    Each wave draws its trials' works (with replacement, from ``random.Random(seed)``) before
    any runs, so the same seed gives the same trials whatever the cluster.

    Args:
        plan: the generation's steps.
        pools: stage -> measured trial works (the empirical distribution resampled).
        cluster: sandbox slots and training nodes.
        server: policy-server lanes and per-request speed-up.
        dispatch_sec: seconds the dispatcher spends per task, one task at a time.
        seed: the resampling seed.

    Returns:
        the :class:`SimResult`.

    Raises:
        KeyError: a wave names a stage with no (or an empty) pool; the message names it.
    """
    rng = random.Random(seed)
    sim = _Sim(cluster, server, dispatch_sec)
    timings: list[StepTiming] = []
    trials = 0

    def run() -> Generator[Any, Any, None]:
        nonlocal trials
        for step in plan.steps:
            start = sim.env.now
            if isinstance(step, TrialWave):
                works = [rng.choice(_pool(pools, stage)) for stage, n in step.counts.items() for _ in range(n)]
                trials += len(works)
                yield sim.env.all_of([sim.env.process(sim.trial(w)) for w in works])
            elif isinstance(step, SandboxWave):
                yield sim.env.all_of([sim.env.process(sim.sandbox_job(step.job_sec)) for _ in range(step.n_jobs)])
            elif isinstance(step, Training):
                yield sim.env.process(sim.training(step.seconds))
            elif isinstance(step, Serial):
                yield sim.env.timeout(step.seconds)
            timings.append(StepTiming(label=step.label, kind=step.kind, start_sec=start, end_sec=sim.env.now))

    sim.env.process(run())
    sim.env.run()
    return SimResult(
        makespan_sec=sim.env.now,
        steps=timings,
        slot_busy_sec=sim.busy["slot"],
        lane_busy_sec=sim.busy["lane"],
        lane_wait_sec=sim.busy["lane_wait"],
        dispatch_busy_sec=sim.busy["dispatch"],
        training_sec=sim.busy["training"],
        trials=trials,
    )


def _pool(pools: Mapping[str, Sequence[TrialWork]], stage: str) -> Sequence[TrialWork]:
    pool = pools.get(stage)
    if not pool:
        raise KeyError(f"simulate: no measured trials for stage {stage!r} (pools: {sorted(pools)})")
    return pool
