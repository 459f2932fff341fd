"""What one growth round mines and replays: pending oracle tasks, the per-task cap, the record entry."""

from __future__ import annotations

import pytest

from mindforge.experience import Provenance, plan_replays
from mindforge.experience.rounds import MODEL_STAGES, cap_per_task, oracle_pending, record_round
from tests.unit.experience.helpers import LIBRARY, entry


def test_oracle_round_takes_the_search_tasks_not_judged_yet() -> None:
    assert oracle_pending(["h-b", "h-a", "h-c", "h-a"], judged={"h-c"}) == ["h-a", "h-b"]
    assert oracle_pending(["h-a"], judged=["h-a"]) == []
    assert oracle_pending([], judged=[]) == []


def test_the_model_round_mines_base_evaluation_and_search_trials_only() -> None:
    assert MODEL_STAGES == ("expansion", "search")  # never selection, sealed or rollout


def _model(task: str, trial: str, command: str):
    return entry(task, f"Chore {task}.", [command], provenance=Provenance.MODEL, trial=trial, validated=False)


def test_cap_keeps_the_first_model_candidates_per_task_and_every_oracle_one() -> None:
    candidates = [
        entry("a", "Chore a.", ["echo oracle-a"], validated=False),
        _model("a", "t-1", "echo a1"),
        _model("a", "t-2", "echo a2"),
        _model("a", "t-3", "echo a3"),
        _model("b", "t-4", "echo b1"),
    ]
    plan = plan_replays(candidates, [])
    capped, left_out = cap_per_task(plan, 2)
    assert left_out == 1
    assert [(e.task_id, e.trial_id) for e in capped.to_replay] == [
        ("a", "oracle"), ("a", "t-1"), ("a", "t-2"), ("b", "t-4"),
    ]
    assert cap_per_task(plan, 3) == (plan, 0)


def test_cap_keeps_the_plans_rejections_and_drops_duplicates_before_counting() -> None:
    kept = LIBRARY[0]
    candidates = [_model("a", "t-1", kept.commands[0]), _model("a", "t-2", "echo a2"), _model("a", "t-3", "echo a3")]
    plan = plan_replays(candidates, [kept])
    capped, left_out = cap_per_task(plan, 1)
    assert [e.trial_id for e in capped.to_replay] == ["t-2"] and left_out == 1
    assert [r.trial_id for r in capped.rejected] == ["t-1"]  # the duplicate of a library entry stays rejected
    with pytest.raises(ValueError, match="at least 1"):
        cap_per_task(plan, 0)


def test_a_round_report_is_kept_beside_the_other_rounds() -> None:
    first = record_round(None, "oracle", {"added": {"oracle": 2}})
    both = record_round(first, "model", {"added": {"model": 1}})
    assert both == {"oracle": {"added": {"oracle": 2}}, "model": {"added": {"model": 1}}}
    assert first == {"oracle": {"added": {"oracle": 2}}}  # not changed in place
    assert record_round(both, "model", {"added": {"model": 3}})["model"] == {"added": {"model": 3}}
    assert record_round("junk", "oracle", {}) == {"oracle": {}}
