"""The coverage ledger: per (task x contract) cell attempts and successes, coverage, intervals, lift.

Two coverages, always side by side (DESIGN.md): *cumulative coverage* - tasks solved by
at least one contract, an upper bound across configurations and not the skill of any one
of them - and *single-contract coverage* - the most tasks any one contract solved. Only
attempts with a real reward count as successes or in rates (``usable``); every attempt
counts as spent.

The Update stage measures a successor against its parent on held-out tasks with
:func:`bootstrap_lift`, and :func:`choose_successor` promotes a contract only on that
evidence.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np
from pydantic import BaseModel, Field

from mindforge.trial import TrialRecord

#: z of a two-sided 95% interval
Z95 = 1.959963984540054


class Interval(BaseModel):
    """A success rate with its Wilson score interval.

    Attributes:
        successes / n: counts (n = attempts with a real reward).
        rate: successes / n (0.0 when n is 0).
        lo / hi: interval bounds in [0, 1] ((0, 1) when n is 0).
    """

    successes: int
    n: int
    rate: float
    lo: float
    hi: float


def wilson_interval(successes: int, n: int, z: float = Z95) -> Interval:
    """Wilson score interval of a binomial rate (Wilson 1927), good at small n and at 0 or n.

    Args:
        successes: successes, 0..n.
        n: trials.
        z: normal quantile (1.96 for 95%).

    Raises:
        ValueError: counts out of range.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(successes=0, n=0, rate=0.0, lo=0.0, hi=1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(successes=successes, n=n, rate=p, lo=max(0.0, centre - half), hi=min(1.0, centre + half))


class CellTally(BaseModel):
    """Attempts of one task under one contract: all, those with a real reward, full rewards."""

    attempts: int = 0
    usable: int = 0
    successes: int = 0


class CoverageSummary(BaseModel):
    """Both coverages over a task set.

    Attributes:
        tasks: size of the task set.
        attempts: attempts spent in all.
        cumulative: tasks solved by at least one contract.
        single_contract: tasks solved by the best single contract.
        best_contract: that contract's hash (None when nothing was solved).
        per_contract: contract hash -> tasks it solved.
    """

    tasks: int
    attempts: int
    cumulative: int
    single_contract: int
    best_contract: str | None = None
    per_contract: dict[str, int] = Field(default_factory=dict)


class Ledger:
    """Per (task x contract) cell counts, in the order attempts were spent.

    Args:
        tasks: the task set coverage is measured over (task hashes); default the tasks
            seen in the attempts.
    """

    def __init__(self, tasks: Iterable[str] | None = None) -> None:
        self._fixed_tasks = list(dict.fromkeys(tasks)) if tasks is not None else None
        self.cells: dict[tuple[str, str], CellTally] = {}
        self._events: list[tuple[str, bool]] = []
        self._order: list[str] = []

    def add(self, task_hash: str, contract_hash: str, reward: float | None, *, usable: bool = True) -> None:
        """Record one attempt (in spending order); a success is a usable reward of 1."""
        tally = self.cells.setdefault((task_hash, contract_hash), CellTally())
        tally.attempts += 1
        success = usable and reward is not None and reward >= 1.0
        if usable and reward is not None:
            tally.usable += 1
            tally.successes += int(success)
        if task_hash not in self._order:
            self._order.append(task_hash)
        self._events.append((task_hash, success))

    @classmethod
    def from_records(
        cls,
        records: Iterable[TrialRecord],
        *,
        tasks: Iterable[str] | None = None,
        usable: Callable[[TrialRecord], bool] | None = None,
    ) -> Ledger:
        """A ledger of trial records, in the given order.

        Args:
            records: model trials (their ``contract_hash`` is the cell's contract).
            tasks: the task set; default the tasks seen.
            usable: decides whether a record's reward counts; default
                :func:`mindforge.audit.usable_for_search`.
        """
        if usable is None:
            from mindforge.audit import usable_for_search as usable
        ledger = cls(tasks)
        for record in records:
            ledger.add(record.task_hash, record.contract_hash or "", record.reward, usable=usable(record))
        return ledger

    @property
    def tasks(self) -> list[str]:
        """The task set (fixed, or as seen)."""
        return self._fixed_tasks if self._fixed_tasks is not None else list(self._order)

    @property
    def contracts(self) -> list[str]:
        """Contracts with attempts, in first-seen order."""
        return list(dict.fromkeys(contract for _task, contract in self.cells))

    def solved_by(self, contract_hash: str) -> set[str]:
        """Tasks of the task set this contract solved at least once."""
        wanted = set(self.tasks)
        return {t for (t, c), tally in self.cells.items() if c == contract_hash and tally.successes and t in wanted}

    def cumulative(self) -> set[str]:
        """Tasks of the task set solved by at least one contract."""
        wanted = set(self.tasks)
        return {t for (t, _c), tally in self.cells.items() if tally.successes and t in wanted}

    def coverage_by_contract(self) -> dict[str, int]:
        """Contract hash -> tasks of the task set it solved."""
        return {c: len(self.solved_by(c)) for c in self.contracts}

    def single_contract(self) -> tuple[str | None, int]:
        """The contract that solved the most tasks (first seen wins ties) and how many."""
        best, count = None, 0
        for contract, solved in self.coverage_by_contract().items():
            if solved > count:
                best, count = contract, solved
        return best, count

    def coverage_curve(self) -> list[tuple[int, int]]:
        """``(attempts spent, tasks covered)`` after every attempt, starting at ``(0, 0)``."""
        wanted, covered, curve = set(self.tasks), set(), [(0, 0)]
        for spent, (task, success) in enumerate(self._events, 1):
            if success and task in wanted:
                covered.add(task)
            curve.append((spent, len(covered)))
        return curve

    def rate(self, contract_hash: str, task_hash: str | None = None) -> Interval:
        """Success rate (Wilson interval) of a contract on one task, or over all its attempts."""
        tallies = [t for (task, c), t in self.cells.items() if c == contract_hash and task_hash in (None, task)]
        return wilson_interval(sum(t.successes for t in tallies), sum(t.usable for t in tallies))

    def summary(self) -> CoverageSummary:
        """Both coverages, attempts and per-contract coverage."""
        best, single = self.single_contract()
        return CoverageSummary(
            tasks=len(self.tasks),
            attempts=len(self._events),
            cumulative=len(self.cumulative()),
            single_contract=single,
            best_contract=best,
            per_contract=self.coverage_by_contract(),
        )


def bootstrap_lift(
    parent: list[float], child: list[float], n: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean paired lift ``child - parent`` with a percentile bootstrap interval (tasks resampled).

    Args:
        parent: per-task scores of the parent (e.g. mean reward on each held-out task).
        child: the child's scores on the same tasks, in the same order.
        n: bootstrap resamples.
        seed: RNG seed (numpy ``default_rng``).
        confidence: interval level.

    Returns:
        ``(mean lift, lower bound, upper bound)``.

    Raises:
        ValueError: empty or unequal-length lists, or n < 1.
    """
    if len(parent) != len(child) or not parent:
        raise ValueError(f"need paired, non-empty scores (got {len(parent)} and {len(child)})")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    diffs = np.asarray(child, dtype=float) - np.asarray(parent, dtype=float)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(n, len(diffs)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(diffs.mean()), float(lo), float(hi)


def heldout_scores(records: Iterable[TrialRecord], held_out: set[str]) -> dict[str, dict[str, float]]:
    """Contract hash -> held-out task hash -> mean reward over its usable attempts."""
    from mindforge.audit import usable_for_search

    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.task_hash in held_out and r.contract_hash and usable_for_search(r):
            sums[r.contract_hash][r.task_hash].append(float(r.reward or 0.0))
    return {c: {t: sum(v) / len(v) for t, v in tasks.items()} for c, tasks in sums.items()}


class SuccessorChoice(BaseModel):
    """The outcome of :func:`choose_successor`.

    Attributes:
        contract_hash: the chosen contract (the parent when nothing is promoted).
        promoted: True when a child replaced the parent.
        reason: why, in words.
        lift: ``(mean, lo, hi)`` of the chosen child's held-out lift, or None.
        n_tasks: held-out tasks the decision used.
        considered: per candidate: ``n_tasks``, ``lift`` or ``skipped`` (why).
    """

    contract_hash: str
    promoted: bool
    reason: str
    lift: tuple[float, float, float] | None = None
    n_tasks: int = 0
    considered: dict[str, dict] = Field(default_factory=dict)


def choose_successor(
    parent_hash: str,
    heldout: Mapping[str, Mapping[str, float]],
    searched_on: Mapping[str, set[str]] | None = None,
    *,
    min_tasks: int = 5,
    n: int = 2000,
    seed: int = 0,
) -> SuccessorChoice:
    """Pick the next generation's contract; promote a child only on held-out evidence.

    Rule: a candidate is compared with the parent on the tasks both were evaluated on,
    leaving out every task the candidate was searched on (its search results are
    selection-biased: it was kept *because* it solved them). It needs at least
    ``min_tasks`` such tasks, and its paired bootstrap lift (:func:`bootstrap_lift`)
    must have a 95% lower bound above 0. Among qualifying candidates the highest lower
    bound wins (then the higher mean, then the smaller hash). Otherwise the parent is
    kept.

    Args:
        parent_hash: the current contract.
        heldout: contract hash -> task hash -> score (mean reward) on held-out tasks;
            must include the parent.
        searched_on: contract hash -> task hashes it was searched on (left out).
        min_tasks: fewest usable held-out tasks for a decision.
        n / seed: bootstrap resamples and seed.

    Returns:
        the choice, with the per-candidate evidence.
    """
    searched_on = searched_on or {}
    base = heldout.get(parent_hash, {})
    considered: dict[str, dict] = {}
    best: tuple[tuple[float, float], str, tuple[float, float, float], int] | None = None
    for contract in sorted(heldout):
        if contract == parent_hash:
            continue
        tasks = sorted(set(base) & set(heldout[contract]) - set(searched_on.get(contract, set())))
        if len(tasks) < min_tasks:
            considered[contract] = {
                "n_tasks": len(tasks),
                "skipped": f"fewer than {min_tasks} unsearched held-out tasks",
            }
            continue
        lift = bootstrap_lift([base[t] for t in tasks], [heldout[contract][t] for t in tasks], n=n, seed=seed)
        considered[contract] = {"n_tasks": len(tasks), "lift": list(lift)}
        key = (lift[1], lift[0])  # ties: the first in sorted order (smaller hash) stays
        if lift[1] > 0 and (best is None or key > best[0]):
            best = (key, contract, lift, len(tasks))
    if best is None:
        return SuccessorChoice(
            contract_hash=parent_hash,
            promoted=False,
            reason="no candidate's held-out lift has a 95% lower bound above 0; the parent is kept",
            considered=considered,
        )
    _key, contract, lift, count = best
    return SuccessorChoice(
        contract_hash=contract,
        promoted=True,
        reason=f"held-out lift {lift[0]:+.3f} (95% CI {lift[1]:+.3f}..{lift[2]:+.3f}) on {count} unsearched tasks",
        lift=lift,
        n_tasks=count,
        considered=considered,
    )
