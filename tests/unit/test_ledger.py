"""The coverage ledger on hand-computed examples."""

from __future__ import annotations

from mindforge.search.coverage import Ledger


def _ledger() -> Ledger:
    # tasks A, B, C; contracts X (the base) and Y; attempts in spending order
    ledger = Ledger(tasks=["A", "B", "C"])
    ledger.add("A", "X", 0.0)
    ledger.add("B", "X", 0.0)
    ledger.add("A", "Y", 1.0)  # A covered after 3 attempts
    ledger.add("C", "X", None, usable=False)  # an infra error: spent, not usable
    ledger.add("B", "Y", 1.0)  # B covered after 5
    ledger.add("A", "X", 1.0)  # X solves A too, coverage unchanged
    ledger.add("D", "Y", 1.0)  # D is not in the task set
    return ledger


def test_cells_coverages_and_curve_by_hand() -> None:
    ledger = _ledger()
    assert ledger.cells[("A", "X")].model_dump() == {"attempts": 2, "usable": 2, "successes": 1}
    assert ledger.cells[("C", "X")].model_dump() == {"attempts": 1, "usable": 0, "successes": 0}
    assert ledger.cumulative() == {"A", "B"}
    assert ledger.coverage_by_contract() == {"X": 1, "Y": 2}
    assert ledger.single_contract() == ("Y", 2)
    assert ledger.coverage_curve() == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (6, 2), (7, 2)]
    summary = ledger.summary()
    assert (summary.tasks, summary.attempts, summary.cumulative, summary.single_contract) == (3, 7, 2, 2)
    rate = ledger.rate("X")
    assert (rate.successes, rate.n) == (1, 3)  # the infra error is not in the rate
    assert ledger.rate("Y", "A").rate == 1.0


def test_cumulative_is_an_upper_bound_of_single_contract_coverage() -> None:
    ledger = Ledger()
    for task, contract in [("a", "X"), ("b", "Y"), ("c", "Z"), ("d", "Z")]:
        ledger.add(task, contract, 1.0)
    summary = ledger.summary()
    assert summary.cumulative == 4 and summary.single_contract == 2 and summary.best_contract == "Z"
