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


def _on(contract: str, task: str, reward: float, i: int) -> TrialRecord:
    rec = _trial(task, reward, i)
    return rec.model_copy(update={"contract_hash": contract, "trial_id": f"{contract}-{task}-{i}"})


def test_the_training_contract_is_the_best_by_search_evidence_and_none_passes_nothing():
    records = [_on("parent", t, 0.0, i) for t in ("a", "b", "c") for i in range(2)]
    records += [_on("cand1", "a", 1.0, 0), _on("cand1", "a", 0.0, 1)]
    records += [_on("cand2", "a", 1.0, 0), _on("cand2", "b", 1.0, 0), _on("cand2", "c", 0.0, 0)]
    best, ranked = curriculum.best_search_contract(records, preferred=["succ", "parent"])
    assert best == "cand2" and [e.contract_hash for e in ranked][:2] == ["cand2", "cand1"]
    assert (ranked[0].tasks_passed, ranked[0].passes, ranked[0].trials) == (2, 2, 3)
    # a tie goes to the preferred contract (Expansion's successor first)
    tie = [_on("other", "a", 1.0, 0), _on("succ", "a", 1.0, 0)]
    assert curriculum.best_search_contract(tie, preferred=["succ", "parent"])[0] == "succ"
    # nothing passed: nothing to train under
    assert curriculum.best_search_contract([_on("parent", "a", 0.0, 0)], preferred=["parent"])[0] is None


def test_a_search_candidate_is_credited_with_the_parent_s_passes_where_it_did_not_run():
    # the parent passes "easy" and fails "hard"; the candidate ran only "hard" (a failed task) and passed it
    records = [_on("parent", "easy", 1.0, 0), _on("parent", "easy", 1.0, 1), _on("parent", "hard", 0.0, 0)]
    records += [_on("cand", "hard", 1.0, 0), _on("cand", "hard", 0.0, 1)]
    best, ranked = curriculum.best_search_contract(records, preferred=["parent"], parent="parent")
    assert best == "cand" and (ranked[0].tasks_passed, ranked[0].inherited_tasks) == (2, 1)
    # without the credit the parent (more passes on as many tasks) would win
    assert curriculum.best_search_contract(records, preferred=["parent"])[0] == "parent"


def test_unseen_instances_of_a_family_the_contract_sometimes_passes_come_first():
    records = [_trial("f1-seen", r, i) for i, r in enumerate([1.0, 0.0, 0.0, 0.0])]
    records += [_trial("g1-seen", 0.0, i) for i in range(4)]
    tasks = ["f1-seen", "g1-seen", "f2-new", "g2-new", "h-new"]
    rates = curriculum.pass_rates(records, tasks)
    family_of = {"f1-seen": "f", "f2-new": "f", "g1-seen": "g", "g2-new": "g"}
    prior = curriculum.family_prior(rates, family_of)
    assert prior == {"f1-seen": 0.25, "f2-new": 0.25, "g1-seen": 0.0, "g2-new": 0.0}
    for salt in ("0", "1", "2"):
        pick = curriculum.pick_tasks(rates, 4, salt=salt, prior=prior)
        # the seen one with both outcomes first; an unseen sibling of a family that sometimes passes before
        # one of a family that never did (g1-seen, 0 of 4, is set aside)
        assert pick.tasks[0] == "f1-seen" and pick.tasks[-1] == "g2-new" and "g1-seen" not in pick.tasks
        assert pick.tasks.index("f2-new") < pick.tasks.index("g2-new")


def test_one_trial_is_not_evidence_that_a_task_always_or_never_passes():
    rates = curriculum.pass_rates([_trial("once-won", 1.0, 0), _trial("once-lost", 0.0, 0)], ["once-won", "once-lost"])
    pick = curriculum.pick_tasks(rates, 4)
    assert set(pick.tasks) == {"once-won", "once-lost"} and (pick.never_passed, pick.always_passed) == (0, 0)
