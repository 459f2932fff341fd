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
from collections.abc import Collection, Iterable, Mapping, Sequence

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
        unseen: tasks with too few trials to tell (none, or fewer than :data:`MIN_EVIDENCE`;
            eligible).
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


#: trials a task needs, all failed or all passed, before the curriculum sets it aside as never / always passed
MIN_EVIDENCE = 2


def pick_tasks(
    rates: dict[str, TaskRate],
    batch: int,
    *,
    salt: str = "",
    guided: Collection[str] = (),
    prior: Mapping[str, float] | None = None,
) -> CurriculumPick:
    """The curriculum: up to ``batch`` tasks whose pass rate under the training contract may lie between 0 and 1.

    A task is set aside only on evidence: at least :data:`MIN_EVIDENCE` trials, all failed
    (``never_passed``; unless it has a guide, ``guided``) or all passed (``always_passed``):
    every group of theirs would likely be flat. Every other task is eligible. Tasks seen to
    both pass and fail come first, most uncertain first (largest ``p (1 - p)``); then tasks
    seen once (one trial says little about a rate) or not at all, ranked by how uncertain
    their outcome is: the largest ``q (1 - q)`` first, where ``q = (passes + 2 p0) / (trials + 2)``
    shrinks the observed rate towards a prior ``p0`` (the task's ``prior``: a family
    instance's family's pooled rate, :func:`family_prior`; else 0.5) with the weight of two
    trials; ties in an order fixed by ``salt`` (the iteration), so successive iterations
    explore different tasks. Tasks at rate 0 that have a guide come last, in the same
    salted order.

    Args:
        rates: from :func:`pass_rates`.
        batch: most tasks to pick (B, >= 1).
        salt: varies the order among tasks of equal rank.
        guided: task hashes that have a guide (off-policy guidance; empty without it).
        prior: task hash -> a prior pass rate (none: 0.5 for every task).
    Returns:
        the pick with the count each rule set aside.

    Raises:
        ValueError: ``batch`` below 1.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    prior = prior or {}
    pick = CurriculumPick()
    eligible, zero_guided = [], []
    for h, r in rates.items():
        p = r.rate
        if p is not None and r.trials >= MIN_EVIDENCE and p <= 0.0:
            if h in guided:
                zero_guided.append(h)
            else:
                pick.never_passed += 1
        elif p is not None and r.trials >= MIN_EVIDENCE and p >= 1.0:
            pick.always_passed += 1
        elif p is not None and 0.0 < p < 1.0:
            pick.eligible_seen += 1
            eligible.append((0, -(p * (1.0 - p)), _tiebreak(h, salt), h))
        else:
            q = (r.passes + 2 * prior.get(h, 0.5)) / (r.trials + 2)
            eligible.append((1, -(q * (1.0 - q)), _tiebreak(h, salt), h))
            pick.unseen += 1
    pick.guided = len(zero_guided)
    ordered = [h for *_k, h in sorted(eligible)] + sorted(zero_guided, key=lambda h: _tiebreak(h, salt))
    pick.tasks = ordered[:batch]
    return pick


def family_prior(rates: Mapping[str, TaskRate], family_of: Mapping[str, str]) -> dict[str, float]:
    """Task hash -> its family's pass rate pooled over the family's rated instances (family instances only).

    Args:
        rates: from :func:`pass_rates`.
        family_of: task hash -> family name.

    Returns:
        a rate for every instance in ``rates`` whose family has at least one rated trial.
    """
    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for h, r in rates.items():
        if h in family_of:
            pooled[family_of[h]][0] += r.passes
            pooled[family_of[h]][1] += r.trials
    return {
        h: pooled[family_of[h]][0] / pooled[family_of[h]][1]
        for h in rates if h in family_of and pooled[family_of[h]][1]
    }


class ContractEvidence(BaseModel):
    """One contract's search-split evidence in a generation (:func:`best_search_contract`).

    Attributes:
        contract_hash: the contract.
        tasks_passed: search tasks it passed at least once, counting the parent's result on
            the tasks it did not run (``inherited_tasks`` of them).
        inherited_tasks: tasks passed by the parent that this contract did not run.
        passes / trials: its own passed trials and trials with a real reward.
    """

    contract_hash: str
    tasks_passed: int = 0
    inherited_tasks: int = 0
    passes: int = 0
    trials: int = 0


def best_search_contract(
    records: Iterable[TrialRecord], preferred: Sequence[str] = (), *, parent: str = ""
) -> tuple[str | None, list[ContractEvidence]]:
    """The contract with the best search-split evidence: the one an Update trains under.

    The parent contract ran every search task (the base evaluation); a search candidate ran
    only some of the tasks the parent failed. So a candidate is credited, on each task it did
    not run, with the parent's result there (a candidate is the parent plus an edit): its
    ``tasks_passed`` estimates how many search tasks it would pass. Contracts are ranked by
    that, then by their own passed trials, then by their own pass rate; ties go to the first
    of ``preferred`` (Expansion's successor, then the parent), then the smaller hash. Only a
    contract that passed at least one trial of its own qualifies: with none, nothing has the
    contrast GRPO needs.

    Args:
        records: the generation's search-split trials (base evaluation, configuration
            search) under every contract.
        preferred: contract hashes in tie-break order.
        parent: the parent's contract hash ("" credits nothing).

    Returns:
        ``(best contract or None, every contract's evidence, best first)``.
    """
    by: dict[str, ContractEvidence] = {}
    solved: dict[str, set[str]] = defaultdict(set)
    ran: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if not r.has_real_reward or not r.contract_hash:
            continue
        ev = by.setdefault(r.contract_hash, ContractEvidence(contract_hash=r.contract_hash))
        ev.trials += 1
        ran[r.contract_hash].add(r.task_hash)
        if r.passed:
            ev.passes += 1
            solved[r.contract_hash].add(r.task_hash)
    for h, ev in by.items():
        inherited = solved[parent] - ran[h] if parent and h != parent else set()
        ev.inherited_tasks = len(inherited)
        ev.tasks_passed = len(solved[h] | inherited)
    order = {h: i for i, h in enumerate(preferred)}

    def key(ev: ContractEvidence) -> tuple[int, int, float, int, str]:
        rate = ev.passes / ev.trials if ev.trials else 0.0
        return (-ev.tasks_passed, -ev.passes, -rate, order.get(ev.contract_hash, len(order)), ev.contract_hash)

    ranked = sorted(by.values(), key=key)
    best = next((ev.contract_hash for ev in ranked if ev.passes), None)
    return best, ranked


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
