"""The on-policy GRPO loop's choices: which search tasks an iteration draws, and which groups it keeps.

Each Update iteration draws ``G`` rollouts (a *group*) of each of ``B`` search tasks from
the current adapter, drops the groups whose rewards are all equal and draws again from
the tasks that showed variance, then trains on what is left. The pieces here are pure
functions of trial records, so the Temporal activities and the benchmarks make the same
choices:

- :func:`pass_rates` - each task's current pass rate, pooled over the Update's earlier
  rollouts and the generation's base-evaluation and search trials under the training
  contract;
- :func:`pick_tasks` - the **curriculum**: tasks whose rate lies strictly between 0 and 1
  (RAGEN's filter keeps the prompts whose rewards vary most, Wang et al. 2025,
  "RAGEN: Understanding Self-Evolution in LLM Agents via Multi-Turn RL"), most uncertain
  first; a task with no trial yet under the contract is eligible (its rate is unknown, not
  0 or 1) and fills the places the seen tasks leave; with off-policy guidance, a task
  never passed that has a guide (:mod:`mindforge.trainer.guidance`) comes last: its group
  has contrast while the policy fails it, because the guide joins it;
- :func:`flat_groups` / :func:`redraw_tasks` - **dynamic sampling** (DAPO, Yu et al. 2025,
  "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", section 3.2): a group
  whose rewards are all equal has zero advantage everywhere and gives no gradient, so it
  is dropped and the batch is refilled with new groups of tasks that showed variance.

Pure: pydantic and the trial record only.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence

from pydantic import BaseModel, Field

from mindforge.trials.record import TrialRecord


class TaskRate(BaseModel):
    """A task's pooled pass count under one contract.

    Attributes:
        task_hash: the task's content hash.
        passes / trials: passed trials and trials with a real reward.
    """

    task_hash: str
    passes: int = 0
    trials: int = 0

    @property
    def rate(self) -> float | None:
        """passes / trials, or None when the task has no trial yet."""
        return self.passes / self.trials if self.trials else None


class CurriculumPick(BaseModel):
    """The tasks one draw uses, and how many tasks each rule set aside.

    Attributes:
        tasks: chosen task hashes, in draw order, at most the batch size.
        eligible_seen: tasks with a rate strictly between 0 and 1.
        unseen: tasks with no trial yet under the contract (eligible).
        guided: tasks at rate 0 that have a guide (eligible, after the others).
        never_passed / always_passed: tasks set aside at rate 0 (without a guide) / rate 1.
    """

    tasks: list[str] = Field(default_factory=list)
    eligible_seen: int = 0
    unseen: int = 0
    guided: int = 0
    never_passed: int = 0
    always_passed: int = 0


def pass_rates(records: Iterable[TrialRecord], task_hashes: Iterable[str]) -> dict[str, TaskRate]:
    """Each task's pooled pass count over ``records`` (trials without a real reward do not count).

    Args:
        records: trials of one contract on search-split tasks (any adapter of this Update).
        task_hashes: the tasks to rate (every search task; those without trials get 0 of 0).

    Returns:
        task hash -> :class:`TaskRate`.
    """
    rates = {h: TaskRate(task_hash=h) for h in task_hashes}
    for r in records:
        if r.task_hash not in rates or not r.has_real_reward:
            continue
        rate = rates[r.task_hash]
        rate.trials += 1
        rate.passes += int(r.passed)
    return rates


def _tiebreak(task_hash: str, salt: str) -> str:
    """A deterministic per-draw order among equals (rotates which unseen tasks come first)."""
    return hashlib.sha256(f"{salt}:{task_hash}".encode()).hexdigest()


def pick_tasks(
    rates: dict[str, TaskRate], batch: int, *, salt: str = "", guided: Collection[str] = ()
) -> CurriculumPick:
    """The curriculum: up to ``batch`` tasks whose current pass rate lies strictly between 0 and 1.

    Seen tasks come first, most uncertain first (largest ``p (1 - p)``); unseen tasks fill
    the remaining places in an order fixed by ``salt`` (the iteration), so successive
    iterations explore different ones; then tasks at rate 0 that have a guide (``guided``),
    in the same salted order. Other tasks at rate 0, and tasks at rate 1, are set aside:
    every group of theirs would likely be flat.

    Args:
        rates: from :func:`pass_rates`.
        batch: most tasks to pick (B, >= 1).
        salt: varies the order among tasks of equal rank.
        guided: task hashes that have a guide (off-policy guidance; empty without it).

    Returns:
        the pick with the count each rule set aside.

    Raises:
        ValueError: ``batch`` below 1.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    pick = CurriculumPick()
    seen, unseen, zero_guided = [], [], []
    for h, r in rates.items():
        p = r.rate
        if p is None:
            unseen.append(h)
        elif p <= 0.0 and h in guided:
            zero_guided.append(h)
        elif p <= 0.0:
            pick.never_passed += 1
        elif p >= 1.0:
            pick.always_passed += 1
        else:
            seen.append((-(p * (1.0 - p)), _tiebreak(h, salt), h))
    pick.eligible_seen, pick.unseen, pick.guided = len(seen), len(unseen), len(zero_guided)
    ordered = [h for *_k, h in sorted(seen)] + sorted(unseen, key=lambda h: _tiebreak(h, salt))
    ordered += sorted(zero_guided, key=lambda h: _tiebreak(h, salt))
    pick.tasks = ordered[:batch]
    return pick


def group_rewards(records: Iterable[TrialRecord]) -> dict[str, list[float]]:
    """Task hash -> the real rewards of its trials (one draw's group per task)."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.has_real_reward and r.reward is not None:
            out[r.task_hash].append(float(r.reward))
    return dict(out)


def is_flat(rewards: Sequence[float]) -> bool:
    """True when a group has no advantage signal: fewer than two real rewards, or all equal."""
    return len(rewards) < 2 or len(set(rewards)) == 1


def has_signal(rewards: Sequence[float], guide_reward: float | None = None) -> bool:
    """True when a group gives a gradient: its rewards vary, or a guide joins it.

    Args:
        rewards: the group's real rewards.
        guide_reward: the reward of the task's guide (off-policy guidance), None without one;
            a guide joins a group of at least two attempts that all scored below it.
    """
    if not is_flat(rewards):
        return True
    return guide_reward is not None and len(rewards) >= 2 and max(rewards) < guide_reward


def flat_groups(groups: dict[str, list[float]], drawn: Iterable[str]) -> list[str]:
    """The drawn tasks whose group is flat (a task with no usable trial counts as flat)."""
    return [h for h in drawn if is_flat(groups.get(h, []))]


def redraw_tasks(groups: dict[str, list[float]], wanted: int) -> list[str]:
    """``wanted`` tasks to draw again: those whose groups showed variance, most varied first, cycled.

    Args:
        groups: task hash -> rewards so far in this iteration (all draws pooled).
        wanted: new groups to draw (the flat groups dropped).

    Returns:
        task hashes (a task may repeat when fewer tasks varied than ``wanted``);
        empty when no group varied or ``wanted`` is 0.
    """
    varied = sorted((h for h, v in groups.items() if not is_flat(v)), key=lambda h: (-_spread(groups[h]), h))
    if not varied or wanted <= 0:
        return []
    return [varied[i % len(varied)] for i in range(wanted)]


def _spread(rewards: Sequence[float]) -> float:
    mean = sum(rewards) / len(rewards)
    return sum((x - mean) ** 2 for x in rewards) / len(rewards)
