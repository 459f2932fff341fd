"""The gates' power: exact binomial against a hand-computed case, the reduction to "m of k tasks"
checked against the real bootstrap rule, the simulation against the exact figure, and refusals."""

from __future__ import annotations

import pytest

from mindforge.evaluation.power import (
    GateCannotPassError,
    GateRule,
    check_gate,
    exact_power,
    gate_power,
    min_detectable_lift,
    min_positive_tasks,
    simulated_power,
)
from mindforge.evaluation.stats import bootstrap_lift


def rule(tasks: int = 5, attempts: int = 2, min_tasks: int = 5, margin: float = 0.0) -> GateRule:
    return GateRule(
        gate="successor", tasks=tasks, attempts=attempts, baseline_attempts=2, min_tasks=min_tasks, margin=margin
    )


def test_power_matches_a_hand_computed_exact_binomial():
    # 5 tasks, 2 attempts, a pair passing 10% of trials over a parent passing nothing:
    # a task shows a pass with q = 1 - 0.9**2 = 0.19; the 95% lower bound is above 0
    # from 3 tasks with a pass on ((5-3)/5)**5 = 0.01 < 0.025 (2 tasks: 0.078 > 0.025)
    q = 0.19
    by_hand = 10 * q**3 * (1 - q) ** 2 + 5 * q**4 * (1 - q) + q**5  # = 0.050527...
    assert min_positive_tasks(5) == 3
    assert exact_power(rule(), 0.1) == pytest.approx(by_hand, abs=1e-12)
    assert by_hand == pytest.approx(0.0505, abs=1e-4)
    q = 1 - 0.75**2  # 25% of trials: power about 0.38
    assert exact_power(rule(), 0.25) == pytest.approx(10 * q**3 * (1 - q) ** 2 + 5 * q**4 * (1 - q) + q**5)
    mdl = min_detectable_lift(rule())
    assert exact_power(rule(), mdl) == pytest.approx(0.8, abs=1e-9)
    assert exact_power(rule(), mdl - 0.01) < 0.8
    assert min_detectable_lift(rule(attempts=3)) < mdl  # more attempts detect smaller lifts


def test_m_of_k_reduction_agrees_with_the_bootstrap_rule_the_gates_apply():
    for k in range(1, 16):
        m = min_positive_tasks(k)
        boundary = [((k - j) / k) ** k for j in (m - 1, m)]
        if any(abs(b - 0.025) < 0.005 for b in boundary):
            continue  # within Monte Carlo error of 2000 resamples: either way (documented)
        for positives in range(k + 1):
            lo = bootstrap_lift([0.0] * k, [0.5] * positives + [0.0] * (k - positives))[1]
            assert (lo > 0) == (positives >= m), (k, positives)


def test_simulation_agrees_with_the_exact_case_and_is_deterministic():
    exact = exact_power(rule(), 0.25)
    simulated = simulated_power(rule(), 0.0, 0.25, draws=4000, seed=1)
    assert simulated == pytest.approx(exact, abs=0.03)
    assert simulated == simulated_power(rule(), 0.0, 0.25, draws=4000, seed=1)
    # a non-inferiority margin passes on any task with a pass, but never on all zeros
    assert simulated_power(rule(margin=0.1), 0.0, 0.0, draws=500) == 0.0
    assert exact_power(rule(margin=0.1), 0.1) == pytest.approx(1 - (0.9**2) ** 5)


def test_a_gate_that_cannot_pass_is_refused_with_the_numbers():
    with pytest.raises(
        GateCannotPassError, match="needs at least 5 paired selection tasks but the selection split holds 3"
    ):
        check_gate(rule(tasks=3, min_tasks=5))
    with pytest.raises(GateCannotPassError, match="holds 0 tasks"):
        gate_power(rule(tasks=0, min_tasks=0))
    assert exact_power(rule(tasks=3, min_tasks=5), 1.0) == 0.0
    power = gate_power(rule(), baseline_rate=0.25, draws=300)
    assert power.min_positive_tasks == 3 and 0.4 < power.min_detectable_lift < 0.45
    assert (
        power.simulated_min_detectable_lift is not None
        and power.simulated_min_detectable_lift > power.min_detectable_lift
    )
    assert "3 of 5 tasks" in power.describe() and "80% power" in power.describe()
    # the baseline's attempts are named as such, not a bare "(baseline 2)"
    assert "(the pair it is compared with: 2 attempt(s) each)" in power.describe()


def test_a_gate_below_five_paired_tasks_is_refused_naming_the_option_and_the_minimum():
    for min_tasks in (1, 4):
        with pytest.raises(GateCannotPassError, match=r"as few as \d paired selection task\(s\); a gate needs at "
                                                      r"least 5 .*set --min-split-tasks to 5 or more") as err:
            check_gate(rule(tasks=12, min_tasks=min_tasks))
        assert err.value.field == "--min-split-tasks"
    check_gate(rule(tasks=12, min_tasks=5))  # the minimum itself is allowed


def test_the_simulated_gate_applies_the_gates_own_rule_ties_and_bonferroni_included():
    import numpy as np

    from mindforge.evaluation.gate import judge_lift
    from mindforge.evaluation.power import gate_passes

    rng = np.random.default_rng(5)
    parent = rng.integers(0, 3, size=(60, 6)) / 2  # per-task scores of 2 attempts: 0, 0.5, 1
    child = rng.integers(0, 3, size=(60, 6)) / 2
    child[:10] = parent[:10]  # ties
    child[10:15] = np.maximum(parent[10:15], child[10:15])
    for margin, candidates in ((0.0, 1), (0.1, 1), (0.0, 2)):
        r = GateRule(gate="g", tasks=6, attempts=2, baseline_attempts=2, min_tasks=5, margin=margin,
                     candidates=candidates)
        simulated = gate_passes(parent, child, r, resamples=300, gate_seed=4)
        real = [
            judge_lift(list(p), list(c), min_tasks=5, margin=margin, confidence=r.level, resamples=300, seed=4).passed
            for p, c in zip(parent, child, strict=True)
        ]
        assert simulated.tolist() == real
        assert not simulated[:10].any()  # a tie never passes, margin or not
    two = GateRule(gate="successor", tasks=12, attempts=1, baseline_attempts=2, min_tasks=5, candidates=2)
    assert two.level == pytest.approx(0.975) and "97.5% (Bonferroni over 2 candidates)" in gate_power(
        two, baseline_rate=None
    ).describe()
    # a tie at a positive margin: the simulated gate with no lift at a parent passing nothing never passes
    assert simulated_power(rule(margin=0.1), 0.0, 0.0, draws=300) == 0.0
