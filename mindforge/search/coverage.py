"""The coverage ledger of configuration search: per (task x contract) cell attempts and successes.

Two coverages, always side by side (docs/design.md): *cumulative coverage* - tasks solved by
at least one contract, an upper bound across configurations and not the skill of any one
of them - and *single-contract coverage* - the most tasks any one contract solved. Only
attempts with a real reward count as successes or in rates (``usable``); every attempt
counts as spent. Coverage is measured on the search split and is never presented as
skill: decisions and lifts live in :mod:`mindforge.evaluation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field

from mindforge.evaluation.stats import Interval, wilson_interval
from mindforge.trials.record import TrialRecord


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
                :func:`mindforge.audit.usable_for_scoring`.
        """
        if usable is None:
            from mindforge.audit import usable_for_scoring

            usable = usable_for_scoring
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
