"""The ``audit_trials`` activity on a real SQLite store: rules see each trial's contract,
and with ``LineageSpec.audit_judge`` on, only what the rules cannot decide goes to the judge.

Test double: the SCRIPTED POLICY behind the real OpenAI-compatible HTTP API plays the
judge (it answers in a known way); the activity, the store and the audit rules are real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.hcp import load_contract
from mindforge.payloads import (
    AuditJudge,
    AuditTrialsInput,
    ExpansionSpec,
    LineageSpec,
    RuntimeSpec,
    TrialStage,
)
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import (
    LineageCreate,
    init_db,
    lineages,
    registry,
    session_scope,
    trials,
)
from mindforge.trials.record import FailureClass, TrialRecord
from tests.conftest import REPO
from workers.search_activities import SearchActivities

BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
JUDGE_SCRIPT = {
    "rules": [
        {
            "match": {"system_contains": "You audit failed attempts"},
            "reply": {"content": '{"owner": "task", "reason": "the Makefile the task needs is missing"}'},
        }
    ]
}


def _transcript(path: Path, events: list[dict]) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return str(path)


def _bash(turn: int, command: str, observation: str) -> list[dict]:
    return [
        {"event": "reply", "turn": turn, "finish_reason": "stop"},
        {"event": "action", "turn": turn, "tool": "bash", "arguments": {"command": command}},
        {"event": "observation", "turn": turn, "content": f"{observation}\n[turn {turn}/30; 50 s left]"},
    ]


FINISH = [
    {"event": "reply", "turn": 9, "finish_reason": "stop"},
    {"event": "action", "turn": 9, "tool": "finish", "arguments": {}},
]


@pytest.fixture
def stored(tmp_path):
    """A generation with two failed trials: one ending on failing commands (rules unsure),
    one whose output the observation cap cut (rules sure)."""
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    on_errors = (
        _bash(1, "make", "exit code 2\nstderr:\nNo rule to make target") + _bash(2, "make test", "exit code 2") + FINISH
    )
    cut = _bash(1, "./build.sh", "exit code 0\nstdout:\nhead\n[... 81234 bytes omitted ...]\ntail") + FINISH
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="audited", spec={}))
        registry.register_hcp_contract(session=s, contract=BASELINE)
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=BASELINE.content_hash)
        for trial_id, events in (("on-errors", on_errors), ("cut", cut)):
            rec = TrialRecord(
                trial_id=trial_id, run_id="r", task_id=f"task-{trial_id}", task_hash="h" * 64, agent="model",
                contract_hash=BASELINE.content_hash, reward=0.0, failure_class=FailureClass.TASK_FAILED,
                artifacts={"transcript": _transcript(tmp_path / f"{trial_id}.jsonl", events)},
            )
            trials.insert_trial(session=s, record=rec, lineage_id=lineage.id, generation_index=0, stage="expansion")
        lineage_id = lineage.id
    yield engine, lineage_id
    engine.dispose()


def _audits(engine, lineage_id: str) -> dict[str, tuple[str, str, dict]]:
    with session_scope(engine) as s:
        rows = trials.list_audits(session=s, lineage_id=lineage_id, generation_index=0, stage="expansion")
        return {a.trial_id: (str(a.owner), a.judged_by, dict(a.evidence)) for a in rows}


def test_rules_only_by_default_and_they_see_the_contracts_cap(stored) -> None:
    engine, lineage_id = stored
    counts = SearchActivities(engine)._audit_stage(
        AuditTrialsInput(lineage_id=lineage_id, generation=0, stage=TrialStage.EXPANSION)
    )
    audits = _audits(engine, lineage_id)
    assert counts.by_owner == {"model": 1, "config": 1}
    assert {judged for _, judged, _ in audits.values()} == {"rules"}
    cut = audits["cut"][2]
    assert cut["rule"] == "config.output_cut"
    # the trial's contract, looked up by hash
    assert cut["max_observation_bytes"] == BASELINE.tools.max_observation_bytes


def test_the_judge_decides_only_what_rules_flag_and_is_recorded(stored) -> None:
    engine, lineage_id = stored
    with start_scripted_policy({**JUDGE_SCRIPT, "base_models": [BASELINE.model.id]}) as judge:
        spec = LineageSpec(
            name="audited", tasks=[], contract_path="x", runtime=RuntimeSpec(policy_url=judge.base_url),
            expansion=ExpansionSpec(audit_judge=True),
        )
        inp = AuditTrialsInput(
            lineage_id=lineage_id,
            generation=0,
            stage=TrialStage.EXPANSION,
            judge=AuditJudge.of(spec.expansion, spec.runtime),
        )
        counts = SearchActivities(engine)._audit_stage(inp)
        again = SearchActivities(engine)._audit_stage(inp)  # a retried activity asks nobody twice
        asked = judge.app.state.policy.requests
    audits = _audits(engine, lineage_id)
    assert counts.by_owner == again.by_owner == {"task": 1, "config": 1}
    owner, judged_by, evidence = audits["on-errors"]
    assert (owner, judged_by) == ("task", f"judge:{BASELINE.model.id}")
    assert evidence["rules_rule"] == "model.finished_on_errors" and "Makefile" in evidence["judge_reason"]
    assert audits["cut"][1] == "rules"
    assert len(asked) == 1 and asked[0]["model"] == BASELINE.model.id
