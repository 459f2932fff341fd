"""The successor race: looks over a fixed-size race, stopped once settled, driven to the end on hand-made trials."""

from __future__ import annotations

import pytest

from mindforge.evaluation import PairRef, choose_successor
from mindforge.evaluation.race import RaceConfig, candidate_attempts, plan_race, race_looks
from mindforge.trials.record import FailureClass, TrialRecord

P = "p" * 64
STRONG, MID, WEAK, NONE = "s" * 64, "m" * 64, "w" * 64, "n" * 64
TASKS = {f"h-t{i}" for i in range(6)}
SEALED = {f"h-sealed{i}" for i in range(5)}


def rate(contract: str, task: str, attempt: int) -> float:
    """Deterministic rewards: STRONG passes all, MID 4 tasks of 6, WEAK 1, NONE and the parent nothing."""
    i = int(task.removeprefix("h-t").removeprefix("h-sealed"))
    return {STRONG: 1.0, MID: float(i < 4), WEAK: float(i == 0)}.get(contract, 0.0)


def run(trial, adapter: str = "", failure=None) -> TrialRecord:
    reward = None if failure == FailureClass.INFRA_ERROR else rate(trial.contract_hash, trial.task_hash, trial.attempt)
    return TrialRecord(
        trial_id=f"{trial.contract_hash[:2]}/{trial.task_hash}/{trial.attempt}", run_id="r", task_id=trial.task_hash,
        task_hash=trial.task_hash, agent="model", contract_hash=trial.contract_hash, adapter=adapter,
        attempt=trial.attempt, reward=reward,
        failure_class=failure or (None if reward == 1.0 else FailureClass.TASK_FAILED),
    )


def sealed_records() -> list[TrialRecord]:
    """Sealed-split trials under which WEAK would look best: a decision that read them would change."""
    out = []
    for t in sorted(SEALED):
        for c, reward in ((WEAK, 1.0), (STRONG, 0.0), (P, 0.0)):
            out.append(TrialRecord(
                trial_id=f"sealed/{c[:2]}/{t}", run_id="r", task_id=t, task_hash=t, agent="model", contract_hash=c,
                adapter="", attempt=0, reward=reward, failure_class=None if reward else FailureClass.TASK_FAILED,
            ))
    return out


def race_to_the_end(candidates: list[str], config: RaceConfig, stored=None) -> tuple[list[TrialRecord], list, object]:
    parent = PairRef(contract_hash=P)
    stored = sealed_records() if stored is None else stored
    looks = []
    for _ in range(40):
        plan = plan_race(stored, parent, candidates, TASKS, config)
        assert plan.trial_ids == sorted(
            r.trial_id for r in stored if r.task_hash in TASKS and r.contract_hash in {P, *candidates}
        )
        if plan.done:
            return stored, looks, plan
        looks.append(plan.trials)
        assert not {t.task_hash for t in plan.trials} & SEALED
        stored += [run(t) for t in plan.trials]
    raise AssertionError("the race did not end")


def test_the_full_race_is_cut_into_attempt_major_looks():
    assert candidate_attempts(1, 2) == 2 and candidate_attempts(2, 4) == 2 and candidate_attempts(2, 2) == 1
    assert candidate_attempts(3, 2) == 1
    with pytest.raises(ValueError):
        candidate_attempts(0, 2)
    looks = race_looks(["b", "a", "c"], 2, 4)
    assert [cell for look in looks for cell in look] == [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (1, "b"), (1, "c")]
    assert [len(look) for look in looks] == [1, 2, 1, 2]  # near-equal, every task's first attempt first
    assert len(race_looks(["a"], 1, 8)) == 1  # never more looks than cells


def test_a_clear_winner_settles_early_and_reads_no_sealed_trial():
    config = RaceConfig(budget=4, parent_attempts=2, looks=6, min_tasks=5, resamples=500)
    stored, looks, plan = race_to_the_end([STRONG, NONE], config)
    # STRONG passes every trial, the parent none: settled before the full race (2 attempts x 6 tasks x 3 racers)
    assert plan.done and plan.settled == {STRONG: "passes", NONE: "fails"} and plan.stopped_early
    assert plan.full_trials == 36 and plan.run_trials < 36 and plan.confidence == pytest.approx(0.975)
    assert plan.look == len(looks) - 1 < plan.looks - 1  # the last look run, before the last of the full race
    # the first look gives every racer the first attempt of the first tasks
    assert {t.contract_hash for t in looks[0]} == {P, STRONG, NONE} and {t.attempt for t in looks[0]} == {0}
    choice = choose_successor(stored, PairRef(contract_hash=P), [STRONG, NONE], TASKS, min_tasks=5, resamples=500)
    assert choice.promoted and choice.contract_hash == STRONG and choice.trial_ids == plan.trial_ids
    assert choice.candidates == 2 and choice.confidence == pytest.approx(0.975)
    assert "97.5% interval (Bonferroni over the 2 candidates raced)" in choice.rule and "at most 2.5%" in choice.rule
    # planning again changes nothing: a resumed check re-plans no finished trial
    again = plan_race(stored, PairRef(contract_hash=P), [STRONG, NONE], TASKS, config)
    assert again.model_dump() == plan.model_dump()


def test_without_the_early_stop_the_full_race_runs_and_decides_the_same():
    config = RaceConfig(budget=2, parent_attempts=2, looks=4, resamples=500, early_stop=False)
    stored, looks, plan = race_to_the_end([MID], config)
    assert plan.run_trials == plan.full_trials == 24 and not plan.stopped_early and len(looks) == 4
    choice = choose_successor(stored, PairRef(contract_hash=P), [MID], TASKS, resamples=500)
    # MID passes 4 of 6 tasks every time, the parent none: 0.667 with a 95% lower bound above 0
    assert choice.promoted and choice.lift is not None and choice.lift[0] == pytest.approx(4 / 6)
    assert "its 95% interval" in choice.rule and "Bonferroni" not in choice.rule


def test_of_two_that_pass_the_higher_lower_bound_is_promoted():
    config = RaceConfig(budget=4, parent_attempts=1, looks=6, min_tasks=5, resamples=500)
    stored, _looks, plan = race_to_the_end([MID, STRONG], config)
    assert plan.settled[STRONG] == "passes" and plan.settled[MID] in ("passes", "loses")
    choice = choose_successor(stored, PairRef(contract_hash=P), [MID, STRONG], TASKS, min_tasks=5, resamples=500)
    assert choice.contract_hash == STRONG and choice.considered[MID]["passed"] is True
    assert choice.considered[STRONG]["lift"][1] > choice.considered[MID]["lift"][1]


def test_trials_stored_before_are_read_not_run_and_errors_are_read_not_scored():
    parent = PairRef(contract_hash=P)
    config = RaceConfig(budget=1, parent_attempts=2, looks=1, resamples=500)
    # the parent's trials from an earlier generation: only the candidate runs
    earlier = [run(t) for t in plan_race([], parent, [MID], TASKS, config).trials if t.contract_hash == P]
    plan = plan_race(earlier, parent, [MID], TASKS, config)
    assert {t.contract_hash for t in plan.trials} == {MID} and plan.run_trials == 12
    # an infrastructure error is read (its id recorded) but never scored as a 0, and not run again
    error = run(plan.trials[0], failure=FailureClass.INFRA_ERROR)
    with_error = plan_race([*earlier, error], parent, [MID], TASKS, config)
    assert error.trial_id in with_error.trial_ids
    assert (error.contract_hash, error.task_hash, error.attempt) not in {
        (t.contract_hash, t.task_hash, t.attempt) for t in with_error.trials
    }
    # another adapter's trials of the same contracts are not this race's
    other = [run(t, adapter="other-g0-r0") for t in plan.trials]
    assert plan_race([*earlier, *other], parent, [MID], TASKS, config).trial_ids == plan.trial_ids


def test_no_candidate_or_no_task_is_done_at_once():
    parent = PairRef(contract_hash=P)
    assert plan_race([], parent, [P], TASKS, RaceConfig()).done  # the parent is never its own candidate
    assert plan_race([], parent, [MID], set(), RaceConfig()).done
