"""The successor race: successive halving with Hoeffding stops, driven to the end on hand-made trials."""

from __future__ import annotations

import pytest

from mindforge.evaluation import PairRef, choose_successor
from mindforge.evaluation.race import RaceConfig, finalist_attempts, plan_race, race_schedule
from mindforge.trials.record import FailureClass, TrialRecord

P = "p" * 64
STRONG, MID, WEAK, NONE = "s" * 64, "m" * 64, "w" * 64, "n" * 64
TASKS = {f"h-t{i}" for i in range(5)}
SEALED = {f"h-sealed{i}" for i in range(5)}


def rate(contract: str, task: str, attempt: int) -> float:
    """Deterministic rewards: STRONG passes all, MID 3 tasks of 5, WEAK 1, NONE and the parent nothing."""
    i = int(task.removeprefix("h-t").removeprefix("h-sealed"))
    return {STRONG: 1.0, MID: float(i < 3), WEAK: float(i == 0)}.get(contract, 0.0)


def run(trial, adapter: str = "", failure=None) -> TrialRecord:
    reward = rate(trial.contract_hash, trial.task_hash, trial.attempt)
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


def race_to_the_end(candidates: list[str], config: RaceConfig) -> tuple[list[TrialRecord], list[list], object]:
    parent = PairRef(contract_hash=P)
    stored = sealed_records()
    rounds = []
    for _ in range(10):
        plan = plan_race(stored, parent, candidates, TASKS, config)
        assert plan.trial_ids == sorted(r.trial_id for r in stored if r.task_hash in TASKS)
        if plan.done:
            return stored, rounds, plan
        rounds.append(plan.trials)
        assert not {t.task_hash for t in plan.trials} & SEALED
        stored += [run(t) for t in plan.trials]
    raise AssertionError("the race did not end")


def test_schedule_gives_the_leaders_more_trials_within_the_budget():
    assert race_schedule(4, 8) == [(4, 1), (2, 2)] and finalist_attempts(4, 8) == 3
    assert race_schedule(1, 8) == [(1, 8)] and race_schedule(2, 8) == [(2, 4)]
    assert race_schedule(3, 8) == [(3, 1), (2, 2)]
    assert sum(n * a for n, a in race_schedule(4, 8)) <= 8  # attempts per task, all candidates together
    with pytest.raises(ValueError):
        race_schedule(0, 8)


def test_race_keeps_every_trial_id_and_never_reads_a_sealed_trial():
    candidates = [WEAK, MID, NONE, STRONG]  # the search's order puts the weak one first
    stored, rounds, plan = race_to_the_end(candidates, RaceConfig(budget=8, parent_attempts=2))
    selection = [r for r in stored if r.task_hash in TASKS]
    assert plan.finalist == STRONG and len(plan.rounds) == 2
    # round 0: the parent's 2 attempts and 1 attempt of every candidate on every task; round 1: the two leaders
    assert len(rounds[0]) == 5 * 2 + 4 * 5 and {t.contract_hash for t in rounds[1]} == {STRONG, MID}
    assert {t.attempt for t in rounds[1]} == {1, 2}
    first = plan.rounds[0]
    assert first.alive == [STRONG, MID, WEAK, NONE] and set(first.eliminated) == {WEAK, NONE}
    assert "successive halving" in first.eliminated[WEAK]
    assert "ranked 2 of 2" in plan.rounds[1].eliminated[MID]
    # every selection trial run is read (and no id twice); none of the sealed ones
    assert plan.trial_ids == sorted(r.trial_id for r in selection) and len(set(plan.trial_ids)) == len(selection) == 50
    # planning again changes nothing: a resumed check re-plans no finished trial
    again = plan_race(stored, PairRef(contract_hash=P), candidates, TASKS, RaceConfig(budget=8, parent_attempts=2))
    assert again.model_dump() == plan.model_dump()
    # the decision reads the same trials, promotes only the finalist, and ignores the sealed split
    choice = choose_successor(
        stored, PairRef(contract_hash=P), candidates, TASKS, min_tasks=5, finalists=[plan.finalist]
    )
    assert choice.promoted and choice.contract_hash == STRONG and choice.trial_ids == plan.trial_ids
    assert "race" in choice.considered[MID]["skipped"] and choice.decided_on == "selection"
    assert "lower bound above 0 on at least 5" in choice.rule


def test_hoeffding_race_stops_clear_losers_early_and_errors_are_read_not_scored():
    parent = PairRef(contract_hash=P)
    config = RaceConfig(budget=32, parent_attempts=1, delta=0.05)
    stored, _rounds, plan = race_to_the_end([STRONG, NONE], config)  # one round of 16 attempts each
    assert plan.finalist == STRONG and "Hoeffding" in plan.rounds[0].eliminated[NONE]  # 0 of 80 against 80 of 80
    stored, _rounds, plan = race_to_the_end([STRONG, NONE, WEAK, MID], RaceConfig(budget=64, parent_attempts=1))
    # 8 attempts a task in round 0: NONE (0 of 40) and WEAK (8 of 40) are out by their bounds; MID (24 of 40) is not
    first = plan.rounds[0]
    assert (
        "Hoeffding" in first.eliminated[NONE] and "Hoeffding" in first.eliminated[WEAK] and MID not in first.eliminated
    )
    assert plan.finalist == STRONG
    # an infrastructure error is read (its id recorded) but never scored as a 0
    error = run(plan_race([], parent, [STRONG], TASKS, config).trials[-1], failure=FailureClass.INFRA_ERROR)
    with_error = plan_race([error], parent, [STRONG], TASKS, config)
    assert error.trial_id in with_error.trial_ids and all(
        t.attempt != error.attempt or t.task_hash != error.task_hash or t.contract_hash != error.contract_hash
        for t in with_error.trials
    )
