"""The race's early stop decides as the full race would: a property test over simulated trial outcomes.

Hypothesis draws a world - selection tasks, one or two candidates, attempts, looks, each
racer's pass rate, a share of trials that end in an infrastructure error (read, never
scored), fractional rewards, and trials an earlier generation already stored - and one
fixed outcome for every trial of the full race. The race is then run twice on those same
outcomes, look by look as the workflow runs it: with the early stop, and without
(``early_stop=False``, every trial of the full race). The decision on the trials the early
stop ran must be the full race's decision, and it must never run a trial twice or one
outside the full race.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindforge.evaluation import PairRef, choose_successor
from mindforge.evaluation.race import RaceConfig, RaceTrial, candidate_attempts, plan_race
from mindforge.trials.record import FailureClass, TrialRecord

P, A, B = "p" * 64, "a" * 64, "b" * 64
PARENT = PairRef(contract_hash=P)
RATES = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])


def outcome_table(world: dict) -> dict[tuple[str, str, int], float | None]:
    """One fixed outcome per (racer, task, attempt): a reward, or None for an infrastructure error."""
    rng = np.random.default_rng(world["seed"])
    out: dict[tuple[str, str, int], float | None] = {}
    for contract, rate in zip((P, A, B), world["rates"], strict=True):
        for t in world["tasks"]:
            for a in range(6):
                u = rng.random(3)
                reward = 1.0 if u[0] < rate else (0.5 if u[2] < world["partial"] else 0.0)
                out[(contract, t, a)] = None if u[1] < world["errors"] else reward
    return out


def record(contract: str, task: str, attempt: int, reward: float | None, prefix: str = "g1") -> TrialRecord:
    return TrialRecord(
        trial_id=f"{prefix}/{contract[:1]}/{task}/{attempt}", run_id="r", task_id=task, task_hash=task, agent="model",
        contract_hash=contract, attempt=attempt, reward=reward,
        failure_class=FailureClass.INFRA_ERROR if reward is None else (None if reward == 1.0 else
                                                                       FailureClass.TASK_FAILED),
    )


def run_race(world: dict, config: RaceConfig) -> tuple[list[TrialRecord], object, int]:
    """Drive the race look by look on the world's outcomes; returns (stored trials, last plan, looks run)."""
    outcomes = outcome_table(world)
    stored = [record(c, t, a, outcomes[(c, t, a)], prefix="g0") for c, t, a in world["earlier"]]
    looks = 0
    for _ in range(100):
        plan = plan_race(stored, PARENT, world["candidates"], set(world["tasks"]), config)
        if plan.done:
            return stored, plan, looks
        have = {(r.contract_hash, r.task_hash, r.attempt) for r in stored}
        assert plan.trials and not {(t.contract_hash, t.task_hash, t.attempt) for t in plan.trials} & have
        stored += [record(t.contract_hash, t.task_hash, t.attempt, outcomes[key(t)]) for t in plan.trials]
        looks += 1
    raise AssertionError("the race did not end")


def key(t: RaceTrial) -> tuple[str, str, int]:
    return (t.contract_hash, t.task_hash, t.attempt)


@st.composite
def worlds(draw) -> dict:
    k = draw(st.integers(min_value=4, max_value=8))
    m = draw(st.integers(min_value=1, max_value=2))
    tasks = [f"t{i}" for i in range(k)]
    candidates = [A, B][:m]
    parent_attempts = draw(st.integers(min_value=1, max_value=3))
    budget = draw(st.integers(min_value=1, max_value=3)) * m
    # trials an earlier generation stored: a share of the parent's and of the first candidate's
    earlier_share = draw(st.sampled_from([0.0, 0.0, 0.5, 1.0]))
    cells = [(P, t, a) for t in tasks for a in range(parent_attempts)]
    cells += [(A, t, a) for t in tasks for a in range(candidate_attempts(m, budget))]
    earlier = [c for i, c in enumerate(cells) if (i * 0.618) % 1.0 < earlier_share]
    return {
        "tasks": tasks, "candidates": candidates, "parent_attempts": parent_attempts, "budget": budget,
        "looks": draw(st.integers(min_value=1, max_value=10)), "min_tasks": draw(st.sampled_from([1, 3, 5])),
        "rates": (draw(RATES), draw(RATES), draw(RATES)), "errors": draw(st.sampled_from([0.0, 0.0, 0.1, 0.3])),
        "partial": draw(st.sampled_from([0.0, 0.0, 0.3])), "earlier": earlier,
        "seed": draw(st.integers(min_value=0, max_value=2**16)),
    }


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds())
def test_a_race_cut_short_decides_as_the_full_race_would(world: dict) -> None:
    config = RaceConfig(
        budget=world["budget"], parent_attempts=world["parent_attempts"], looks=world["looks"],
        min_tasks=world["min_tasks"], resamples=200, seed=3,
    )
    short, plan, short_looks = run_race(world, config)
    full, full_plan, full_looks = run_race(world, config.model_copy(update={"early_stop": False}))
    assert full_plan.run_trials == full_plan.full_trials and not full_plan.stopped_early
    assert plan.run_trials <= plan.full_trials == full_plan.full_trials and short_looks <= full_looks
    assert len(short) == len({(r.contract_hash, r.task_hash, r.attempt) for r in short})  # nothing ran twice

    def decide(records):
        return choose_successor(
            records, PARENT, world["candidates"], set(world["tasks"]), min_tasks=world["min_tasks"], resamples=200,
            seed=3,
        )

    cut, whole = decide(short), decide(full)
    assert (cut.contract_hash, cut.promoted, cut.cannot_compare) == (
        whole.contract_hash, whole.promoted, whole.cannot_compare
    ), (plan.settled, cut.considered, whole.considered)
    # a settled candidate's verdict is the full race's
    for contract, state in plan.settled.items():
        if state in ("passes", "fails"):
            assert whole.considered[contract].get("passed", False) is (state == "passes")
