"""The on-policy loop's pure choices: the curriculum (0 < pass rate < 1, unseen tasks eligible)
and dynamic sampling (flat groups dropped, redraws from tasks that showed variance)."""

from __future__ import annotations

from mindforge.trainer import curriculum
from mindforge.trials.record import FailureClass, TrialRecord


def _trial(task: str, reward: float | None, i: int) -> TrialRecord:
    failure = FailureClass.TASK_FAILED if reward is not None and reward < 1.0 else None
    return TrialRecord(
        trial_id=f"t-{task}-{i}", run_id="r", task_id=task, task_hash=task, reward=reward, agent="model",
        attempt=i, failure_class=failure, num_turns=2,
    )


def test_the_curriculum_keeps_tasks_strictly_between_0_and_1_then_unseen_ones():
    records = [_trial("half", r, i) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])]
    records += [_trial("rare", r, i) for i, r in enumerate([1.0, 0.0, 0.0, 0.0])]
    records += [_trial("never", 0.0, i) for i in range(3)] + [_trial("always", 1.0, i) for i in range(3)]
    records += [_trial("broken", None, 0)]  # no real reward: not evidence of anything
    rates = curriculum.pass_rates(records, ["half", "rare", "never", "always", "broken", "new"])
    assert rates["half"].rate == 0.5 and rates["rare"].rate == 0.25 and rates["broken"].rate is None
    pick = curriculum.pick_tasks(rates, 3, salt="0")
    # most uncertain first, then the tasks not seen yet; rate 0 and rate 1 set aside
    assert pick.tasks[:2] == ["half", "rare"] and set(pick.tasks[2:]) <= {"broken", "new"} and len(pick.tasks) == 3
    assert (pick.eligible_seen, pick.unseen, pick.never_passed, pick.always_passed) == (2, 2, 1, 1)
    assert curriculum.pick_tasks(rates, 10).tasks[2:] != [] and "never" not in curriculum.pick_tasks(rates, 10).tasks


def test_dynamic_sampling_drops_flat_groups_and_draws_again_from_tasks_with_variance():
    draw = [_trial("a", r, i) for i, r in enumerate([1.0, 0.0, 0.0, 1.0])]  # variance
    draw += [_trial("b", 0.0, i) for i in range(4)] + [_trial("c", 1.0, i) for i in range(4)]  # flat both ways
    draw += [_trial("d", r, i) for i, r in enumerate([1.0, 0.0, 0.0, 0.0])]  # less variance
    groups = curriculum.group_rewards(draw)
    assert curriculum.flat_groups(groups, ["a", "b", "c", "d", "e"]) == ["b", "c", "e"]  # e: nothing usable
    # three flat groups to replace: from the varied tasks, most varied first, cycled
    assert curriculum.redraw_tasks(groups, 3) == ["a", "d", "a"]
    assert curriculum.redraw_tasks({"b": [0.0, 0.0]}, 2) == []  # nothing varied: no redraw
