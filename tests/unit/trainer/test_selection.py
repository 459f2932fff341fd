"""Trajectory selection: groups with signal only, every drop counted, selection and sealed tasks never trained on."""

from __future__ import annotations

import pytest

from mindforge.trainer.selection import group_id_for, select_groups
from mindforge.trials.record import FailureClass, TrialRecord

C1, C2, C3 = "c1" * 32, "c2" * 32, "c3" * 32


def trial(task: str, attempt: int, reward: float | None, *, contract: str = C1, failure: FailureClass | None = None,
          turns: int = 2, agent: str = "model", adapter: str = "") -> TrialRecord:
    if failure is None and reward is not None and reward < 1.0:
        failure = FailureClass.TASK_FAILED
    return TrialRecord(
        trial_id=f"{task}/{contract[:2]}/{adapter}/{attempt}",
        run_id="r",
        task_id=task,
        task_hash=f"h-{task}",
        agent=agent,
        contract_hash=contract,
        adapter=adapter,
        attempt=attempt,
        reward=reward,
        failure_class=failure,
        num_turns=turns,
    )


def test_keeps_groups_with_signal_and_counts_every_drop():
    records = [
        # task a: 1, 0, 1 plus an infra error and a verifier error (no reward): kept with 3 trials
        trial("a", 0, 1.0),
        trial("a", 1, 0.0),
        trial("a", 2, 1.0),
        trial("a", 3, None, failure=FailureClass.INFRA_ERROR),
        trial("a", 4, None, failure=FailureClass.VERIFIER_ERROR),
        # task b: all failed -> no signal
        trial("b", 0, 0.0),
        trial("b", 1, 0.0),
        # task c: a selection/sealed task -> set aside even though it has signal
        trial("c", 0, 1.0),
        trial("c", 1, 0.0),
        # task d: one usable attempt (the agent code crashed in the other) -> singleton
        trial("d", 0, 1.0),
        trial("d", 1, 0.0, failure=FailureClass.AGENT_ERROR),
        # task e: the model never acted, and a nop trial -> both dropped
        trial("e", 0, 0.0, turns=0),
        trial("e", 1, 1.0, agent="nop", contract=C2),
    ]
    report = select_groups(records, {"h-c"})
    assert report.trials_seen == len(records)
    assert report.non_search_trials == 2 and report.non_search_tasks == 1
    assert report.dropped_by_reason == {"infra_failure": 1, "no_model_turns": 1, "no_reward": 2, "not_model": 1}
    assert report.dropped_no_reward == 5
    assert report.dropped_no_signal == 1
    assert report.dropped_singleton == 1
    assert report.kept_groups == 1 and report.kept_trials == 3 and report.kept_tasks == 1
    (group,) = report.groups
    assert group.group_id == group_id_for("h-a", C1, "")
    assert group.trial_ids == ["a/c1//0", "a/c1//1", "a/c1//2"]
    assert group.rewards == [1.0, 0.0, 1.0]
    assert "h-c" not in {g.task_hash for g in report.groups}
    # a missing reward is never read as 0: the errored attempts are nowhere in the kept group
    assert all(t not in report.trial_ids for t in ("a/c1//3", "a/c1//4"))
    assert "groups" not in report.counts()


def test_groups_are_per_pair_and_capped_per_task():
    records = []
    # task a under three contracts; C3 has the strongest contrast (0.5 std), C1 the weakest
    for i, r in enumerate([1.0, 0.0, 0.0, 0.0]):
        records.append(trial("a", i, r, contract=C1))
    for i, r in enumerate([1.0, 1.0, 0.0, 0.0]):
        records.append(trial("a", i, r, contract=C3))
    for i, r in enumerate([1.0, 0.0, 1.0]):
        records.append(trial("a", i, r, contract=C2))
    # task b: one group of 6 attempts, capped to 4 keeping both rewards
    for i, r in enumerate([1.0, 1.0, 1.0, 1.0, 0.0, 0.0]):
        records.append(trial("b", i, r))
    report = select_groups(records, set(), max_groups_per_task=2, max_trials_per_group=4)
    assert report.candidate_groups == 4
    assert report.capped_groups == 1
    kept_a = {g.contract_hash for g in report.groups if g.task_hash == "h-a"}
    assert kept_a == {C3, C2}  # the two most contrasted groups of task a
    (b,) = [g for g in report.groups if g.task_hash == "h-b"]
    assert len(b.trial_ids) == 4 and set(b.rewards) == {0.0, 1.0}
    assert report.capped_trials == 2
    assert report.kept_trials == sum(len(g.trial_ids) for g in report.groups)


def test_adapter_is_part_of_the_group():
    records = [trial("a", 0, 1.0), trial("a", 1, 0.0), trial("a", 0, 1.0, adapter="x"), trial("a", 1, 1.0, adapter="x")]
    report = select_groups(records, set())
    assert [g.adapter for g in report.groups] == [""]
    assert report.dropped_no_signal == 1


def test_audit_owned_by_task_is_excluded():
    class Audit:  # the store's Audit row and AuditResult both carry ``owner``
        owner = "task"

    records = [trial("a", 0, 1.0), trial("a", 1, 0.0), trial("a", 2, 0.0)]
    report = select_groups(records, set(), audits={"a/c1//2": Audit()})
    assert report.dropped_by_reason == {"audit_excluded": 1}
    assert report.groups[0].trial_ids == ["a/c1//0", "a/c1//1"]


def test_bad_caps_raise():
    with pytest.raises(ValueError, match="max_trials_per_group"):
        select_groups([], set(), max_trials_per_group=1)
