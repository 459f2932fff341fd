"""The sealed reading's power: monotone in attempts and lift, near the interval's error at no lift, sized to 80%."""

from __future__ import annotations

import pytest

from mindforge.evaluation.reading_power import reading_power, sealed_attempts_for_power


def test_power_grows_with_attempts_and_with_the_lift() -> None:
    by_attempts = [reading_power(12, 1, a, 0.25, draws=800) for a in (1, 2, 3, 4)]
    assert by_attempts == sorted(by_attempts) and by_attempts[0] < 0.3 < 0.7 < by_attempts[2]
    by_lift = [reading_power(12, 1, 2, lift, draws=800) for lift in (0.10, 0.17, 0.25, 0.33)]
    assert by_lift == sorted(by_lift)


def test_with_no_lift_the_lower_bound_rarely_clears_zero() -> None:
    # the child is the parent: a lower bound above 0 is the interval's one-sided error (at most 2.5%)
    assert reading_power(12, 1, 3, 0.0, base=0.25, draws=1000) <= 0.04
    assert reading_power(12, 1, 3, 0.0, draws=200) == 0.0  # nothing passes on either side


def test_the_main_job_size_needs_three_attempts_for_a_lift_of_a_quarter() -> None:
    got = sealed_attempts_for_power(12, 1, lift=0.25)
    assert (got.attempts, got.reached) == (3, True) and got.power >= 0.8
    capped = sealed_attempts_for_power(12, 1, lift=0.10, max_attempts=3)
    assert (capped.attempts, capped.reached) == (3, False) and capped.power < 0.8
    assert sealed_attempts_for_power(12, 1, lift=0.45).attempts == 2  # a larger lift needs fewer


def test_bad_sizes_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        reading_power(12, 1, 0, 0.25)
    with pytest.raises(ValueError, match="lift in"):
        reading_power(12, 1, 1, 0.7)
    with pytest.raises(ValueError, match="power in"):
        sealed_attempts_for_power(12, lift=0.25, power=1.0)
