"""Edits state what they will change (AHE): verdicts from trial records alone, refuted edits never offered again.

Verdicts are read from :class:`~mindforge.trials.record.TrialRecord` values built here
(what the store holds after a search step) and, in the search, from the cells those
records were folded into; outcomes of the search come from the simulated global-fix
world of :mod:`benchmarks.simulate`.
"""

from __future__ import annotations

import pytest

from benchmarks.simulate import WorldOracle, global_world, today_world
from mindforge.search import (
    SearchBudget,
    SearchConfig,
    StepResults,
    init_search,
    make_candidate,
    observe,
    operator_edits,
    plan_step,
)
from mindforge.search.predictions import (
    CLAIMED_RATE,
    judge_records,
    operator_factors,
    predict,
    trials_to_refute,
    verdict_of,
)
from mindforge.search.race_models import Prediction
from mindforge.search.summary import prediction_rows
from mindforge.trials.record import TrialRecord

TASKS = [f"h-{i}" for i in range(4)]


def record(n: int, task: int, reward: float | None, contract: str = "c-edit") -> TrialRecord:
    return TrialRecord(
        trial_id=f"t-{n}", run_id="r", task_id=f"task-{task}", task_hash=TASKS[task], agent="model",
        contract_hash=contract, attempt=n, reward=reward,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("outcomes", "verdict", "trials", "passes"),
    [
        ([(0, 0.0)] * 5, "refuted", 5, 0),  # 0.6 ** 5 = 0.078 <= 0.1: five failures refute a claim of 0.4
        ([(0, 0.0)] * 4, "untested", 4, 0),  # 0.6 ** 4 = 0.13: not yet
        ([(0, 0.0)] * 4 + [(1, 1.0)], "confirmed", 5, 1),  # a named task passed
        ([(0, 0.0)] * 4 + [(2, 1.0)] * 3, "untested", 4, 0),  # passes elsewhere say nothing of the claim
        ([(0, 0.0)] * 4 + [(1, None)] * 3, "untested", 4, 0),  # no real reward: not a trial of the claim
    ],
)
def test_a_prediction_is_scored_from_trial_records_alone(outcomes, verdict, trials, passes) -> None:
    stated = Prediction(scope="targeted", tasks=[0, 1], classes=["model:model.wrong_answer"], level=2, min_rate=0.4)
    records = [record(n, task, reward) for n, (task, reward) in enumerate(outcomes)]
    records += [record(100 + n, 1, 1.0, contract="c-other") for n in range(3)]  # another contract's passes
    judged = judge_records(stated, records, contract_hash="c-edit", task_hashes=TASKS, alpha=0.1)
    assert (judged.verdict, judged.trials, judged.passes) == (verdict, trials, passes)


def test_claims_grow_with_the_audit_level_and_a_general_claim_takes_longest_to_refute() -> None:
    assert [trials_to_refute(CLAIMED_RATE[level], 0.1) for level in (2, 1, 0)] == [5, 11, 22]
    assert verdict_of(21, 0, CLAIMED_RATE[0], 0.1) == "untested"
    assert verdict_of(22, 0, CLAIMED_RATE[0], 0.1) == "refuted"
    with pytest.raises(ValueError):
        verdict_of(3, 4, 0.4, 0.1)
    assert operator_factors([("add_skill", "refuted"), ("add_skill", "refuted"), ("hook_on", "confirmed")]) == {
        "add_skill": 1 / 3,
        "hook_on": 1.0,
    }


def test_an_edit_the_audit_points_at_names_those_tasks_and_one_it_does_not_is_general() -> None:
    world = today_world()
    edits = {e.key: e for e in operator_edits(world.root)}
    read_file = make_candidate(world.root, [edits["add_tool=read_file"]], origin="operator", step=0)
    timeout = make_candidate(world.root, [edits["bash_timeout_sec=120.0"]], origin="operator", step=0)
    targeted, general = predict(read_file, world.failing, world.root), predict(timeout, world.failing, world.root)
    assert targeted.scope == "targeted" and targeted.level == 2 and targeted.min_rate == CLAIMED_RATE[2]
    assert {world.failing[t].task_id.split("-", 2)[2] for t in targeted.tasks} == {"tool-read_file"}
    assert targeted.classes == ["config:config.tool_missing"]
    assert general.scope == "general" and len(general.tasks) == len(world.failing) and general.classes == ["*"]


def test_a_refuted_edit_is_not_offered_again_in_that_search() -> None:
    """In the global-fix world the audit points at decoys: their predictions are refuted and they leave for good."""
    world = global_world(0, 0.3)
    oracle = WorldOracle(world, seed=0)
    config = SearchConfig(seed=0, cells_per_step=8, experience_snapshot=world.snapshot_json)
    state = init_search(
        job_id="refute", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=96), config=config
    )
    refuted: dict[str, str] = {}  # edit key -> its single-edit candidate's contract
    while not state.done:
        plan = plan_step(state)
        # the refuted candidate never runs again, and nothing made afterwards carries its edit
        assert not set(refuted.values()) & {c.contract_hash for c in plan.cells}
        assert not any(refuted.keys() & set(c.edit_keys) for c in plan.new_candidates)
        assert not any(refuted.keys() & set(e.candidate.edit_keys) for e in state.entrants if e.reason == "compose")
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
        for key, prediction in state.predictions.items():
            candidate = state.candidates[int(key)]
            if prediction.verdict == "refuted" and len(candidate.edits) == 1:
                refuted.setdefault(candidate.edits[0].key, candidate.contract_hash)
    assert refuted, "no prediction was refuted: the rule was never put to the test"
    rows = prediction_rows(state)
    assert {r["verdict"] for r in rows} >= {"refuted", "confirmed"}
    assert all(r["trials"] >= trials_to_refute(r["min_rate"], 0.1) for r in rows if r["verdict"] == "refuted")
    assert all(r["passes"] >= 1 for r in rows if r["verdict"] == "confirmed")
