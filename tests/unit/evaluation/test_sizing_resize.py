"""The gates re-sized at a parent's measured rate, including a gate a lineage started below the minimum."""

from __future__ import annotations

from mindforge.evaluation.gate import MIN_GATE_TASKS
from mindforge.evaluation.power import GateRule
from mindforge.evaluation.sizing import resize_gates


def _rule(min_tasks: int) -> GateRule:
    return GateRule(gate="promotion", tasks=12, attempts=2, baseline_attempts=2, min_tasks=min_tasks)


def test_a_gate_below_the_minimum_is_recorded_with_its_reason_not_raised() -> None:
    # a lineage started through the API with a 2-task minimum (the CLI refuses it): the generation's
    # record says why no detectable lift is given instead of failing the generation
    out = resize_gates([_rule(2)], 0.25, generation=1, parent_trials=24, draws=200)
    (row,) = out.gates
    assert row.min_detectable_lift is None and f"at least {MIN_GATE_TASKS}" in row.why
    assert row.power_at  # the power at each lift is still given
    assert any("nothing (" in line for line in out.lines())


def test_a_gate_at_the_minimum_gets_its_detectable_lift_at_rate_0_and_above() -> None:
    for rate in (0.0, 0.25):
        (row,) = resize_gates([_rule(MIN_GATE_TASKS)], rate, generation=1, parent_trials=24, draws=200).gates
        assert row.why == "" and row.min_detectable_lift is not None and 0.0 < row.min_detectable_lift <= 1.0
