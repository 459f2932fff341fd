"""The generation plan of a nightly run at a target size, stage by stage.

Every count here is an assumption, stated by a field of :class:`NightlySpec` with the
main job's value it scales from; ``benchmarks/bench_scale.py`` prints them all.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from mindforge.scale.plan import GenerationPlan, SandboxWave, Serial, Step, Training, TrialWave


class NightlySpec(BaseModel):
    """A nightly generation's size.

    Attributes:
        tasks: tasks in the pool (split into search / selection / sealed).
        attempts: attempts per task in Expansion's base trials, the successor check,
            the promotion gate and the sealed lift (the main job uses 1 / 2 / 2 / 1).
        selection_fraction: the pool's share in the selection split (main job 0.25).
        sealed_fraction: the pool's share in the sealed split (main job 0.25).
        replays_per_task: experience-library replays per search task (main job 2).
        search_trials_per_task: the harness search's budget per search task (main job 48
            trials over 25 search tasks, about 2).
        search_step_trials: trials per search step (main job 8 = cells per step; at scale
            one per sandbox slot).
        race_pairs: pairs the successor check runs on selection (parent and finalist: 2).
        iterations: on-policy GRPO iterations (main job 2).
        tasks_per_iteration: tasks drawn per iteration (main job 4).
        group_size: rollouts per task per iteration (main job 4).
        promotion_pairs: pairs the promotion gate runs on selection (parent and trained: 2).
        sealed_pairs: pairs the sealed lift runs (parent, successor, harness-only: 3).
    """

    tasks: int = Field(ge=1)
    attempts: int = Field(ge=1)
    selection_fraction: float = Field(default=0.25, ge=0, lt=1)
    sealed_fraction: float = Field(default=0.25, ge=0, lt=1)
    replays_per_task: int = Field(default=2, ge=0)
    search_trials_per_task: float = Field(default=2.0, ge=0)
    search_step_trials: int = Field(default=128, ge=1)
    race_pairs: int = Field(default=2, ge=1)
    iterations: int = Field(default=4, ge=0)
    tasks_per_iteration: int = Field(default=64, ge=1)
    group_size: int = Field(default=8, ge=1)
    promotion_pairs: int = Field(default=2, ge=1)
    sealed_pairs: int = Field(default=3, ge=1)

    def split_sizes(self) -> tuple[int, int, int]:
        """(search, selection, sealed) task counts."""
        selection = round(self.tasks * self.selection_fraction)
        sealed = round(self.tasks * self.sealed_fraction)
        return self.tasks - selection - sealed, selection, sealed

    @property
    def rollouts_per_iteration(self) -> int:
        """Rollout trials per GRPO iteration."""
        return self.tasks_per_iteration * self.group_size


class Overheads(BaseModel):
    """Serial and sandbox-only costs the nightly plan carries over from a measured generation.

    Attributes:
        discovery_sec: from the generation's start to its first trial (Discovery, planning).
        replay_job_sec: slot-seconds of one experience replay (the measured gap after the
            base trials, audit included, times the slots, over the replays it ran).
        search_finish_sec: the serial gap around the search's end (the library's model
            round, the search's finish, the race's planning).
        barrier_sec: the serial gap at any other barrier (store activities between waves).
        gate_sec: serial seconds of the promotion gate's and the sealed lift's bookkeeping.
    """

    discovery_sec: float = Field(ge=0)
    replay_job_sec: float = Field(ge=0)
    search_finish_sec: float = Field(ge=0)
    barrier_sec: float = Field(ge=0)
    gate_sec: float = Field(default=0.0, ge=0)


def nightly_plan(spec: NightlySpec, over: Overheads, *, training_sec: float) -> GenerationPlan:
    """The chain of barriers of one nightly generation.

    Args:
        spec: the generation's size.
        over: serial and replay costs carried over from a measured generation.
        training_sec: wall seconds of one iteration's training run on the training node.

    Returns:
        Discovery, Expansion's base trials, the experience replays, the search steps, the
        successor check, each GRPO iteration's rollouts and training, the promotion gate and
        the sealed lift, with a serial barrier between waves.
    """
    search, selection, sealed = spec.split_sizes()
    steps: list[Step] = [Serial(label="discovery: proposals and checks", seconds=over.discovery_sec)]

    def wave(label: str, stage: str, n: int) -> None:
        steps.append(TrialWave(label=label, counts={stage: n}))
        steps.append(Serial(label=f"orchestration: after {label}", seconds=over.barrier_sec))

    wave("expansion: base trials", "expansion", search * spec.attempts)
    steps.append(
        SandboxWave(
            label="expansion: experience replays", n_jobs=search * spec.replays_per_task, job_sec=over.replay_job_sec
        )
    )
    budget = math.ceil(search * spec.search_trials_per_task)
    for k in range(math.ceil(budget / spec.search_step_trials)):
        wave(f"search: step {k}", "search", min(spec.search_step_trials, budget - k * spec.search_step_trials))
    steps.append(Serial(label="search: finish and library round", seconds=over.search_finish_sec))
    wave("successor check: race", "selection", selection * spec.attempts * spec.race_pairs)
    for k in range(spec.iterations):
        wave(f"update: rollouts {k}", "rollout", spec.rollouts_per_iteration)
        steps.append(Training(label=f"training: iteration {k}", seconds=training_sec))
    wave("promotion: gate", "selection", selection * spec.attempts * spec.promotion_pairs)
    steps.append(Serial(label="promotion: bookkeeping", seconds=over.gate_sec))
    wave("sealed: lift", "sealed", sealed * spec.attempts * spec.sealed_pairs)
    return GenerationPlan(steps=steps)
