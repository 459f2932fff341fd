"""Discovery end to end on the real Docker engine, with fixed proposals.

Test double: the policy is the scripted policy server (``mindforge.policy.doubles.scripted``)
behind the real OpenAI-compatible HTTP API - the only double allowed (docs/design.md). Its
script answers the Discovery prompt with fixed proposals, and answers the agent with
``finish`` at once, except on the task carrying ``TOO_EASY_MARKER``, which it solves.
Everything else is real: proposals are parsed, written as task directories, built and
validated in Docker, the difficulty is estimated by running the ModelAgent over HTTP,
and admission writes to a real SQLite store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from mindforge.discovery import (
    DiscoveryConfig,
    PoolIndex,
    RejectReason,
    run_discovery,
    summarise_pool,
)
from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import (
    LineageCreate,
    PoolMembership,
    PoolSplit,
    StoredTask,
    TaskSource,
    init_db,
    session_scope,
)
from mindforge.store.discovered import admit_to_store
from mindforge.store.lineages import create_lineage
from mindforge.tasks.loader import load_task, load_tasks
from tests.conftest import BUNDLED_TASKS, REPO
from tests.unit.discovery.sample_proposals import (
    BROKEN,
    MALFORMED,
    READS_SOLUTION,
    TOO_EASY,
    TOO_EASY_MARKER,
    TRIVIAL,
    VALID,
    near_duplicate,
    reply,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # each proposal is built, validated and tried

CONTRACT = REPO / "hcp_contracts" / "baseline.toml"
FINISH = json.dumps({"tool": "finish", "arguments": {}})
SOLVE_TOO_EASY = json.dumps({"tool": "bash", "arguments": {"command": "touch /app/ready.flag"}})


def _script(contract, proposals_text: str) -> dict:
    return {
        "base_models": [contract.model.id],
        "rules": [
            {"match": {"system_contains": "You design new terminal tasks"}, "reply": {"content": proposals_text}},
            {"match": {"last_message_contains": TOO_EASY_MARKER, "turn": 0}, "reply": {"content": SOLVE_TOO_EASY}},
        ],
        "default": {"content": FINISH},
    }


def test_proposals_are_admitted_or_rejected_with_the_right_reason(docker_engine, image_map, settings, tmp_path):
    contract = load_contract(CONTRACT)
    items = [VALID, BROKEN, TRIVIAL, near_duplicate(), READS_SOLUTION, MALFORMED, TOO_EASY]
    pool_tasks = load_tasks([BUNDLED_TASKS])
    summary = summarise_pool(
        pool_tasks, solved=[pool_tasks[0].id], failed=[pool_tasks[1].id], failure_classes={"task_failed": 2}
    )
    index = PoolIndex.from_tasks(pool_tasks)
    with start_scripted_policy(_script(contract, reply(*items))) as server:
        record = run_discovery(
            contract,
            summary,
            index,
            engine=docker_engine,
            image_map=image_map,
            artifact_root=settings.artifacts,
            staging_dir=tmp_path / "staging",
            config=DiscoveryConfig(count=len(items), generation=1, attempts=2),
            client=server.base_url,
        )
        requests = server.app.state.policy.requests

    reasons = {r.task_id: r.reason for r in record.rejected}
    assert reasons == {
        "reverse-poem-lines": RejectReason.BROKEN,
        "archive-old-logs": RejectReason.TRIVIALLY_PASSING,
        "jsonl-records-to-csv": RejectReason.DUPLICATE_INSTRUCTION,
        "uppercase-names": RejectReason.TESTS_READ_SOLUTION,
        "escape-context": RejectReason.MALFORMED,
        "touch-ready-flag": RejectReason.TOO_EASY,
    }, record.rejected
    assert (record.requested, record.proposed) == (7, 7)
    details = {r.task_id: r.detail for r in record.rejected}
    assert "escapes the workspace" in details["escape-context"]
    assert "solved it on all 2 attempts" in details["touch-ready-flag"]

    [admitted] = record.admitted
    assert (admitted.task_id, admitted.proposed_id, admitted.split) == (
        "g1-region-totals",
        "region-totals",
        PoolSplit.SEARCH,
    )
    diff = admitted.difficulty
    assert (diff.attempts, diff.scored, diff.successes, diff.success_rate) == (2, 2, 0, 0.0)
    prov = admitted.provenance
    assert prov["proposed_by"]["contract_hash"] == contract.content_hash
    assert prov["proposed_by"]["contract_ref"] == "baseline@1.0.0" and prov["generation"] == 1
    assert prov["validation"] == {"verdict": "valid", "oracle_rewards": [1.0, 1.0], "nop_reward": 0.0}
    assert load_task(Path(admitted.path)).content_hash == admitted.content_hash == prov["content_hash"]
    assert "g1-region-totals" in index.ids()  # a later proposal in the run could not duplicate it

    # the proposal request carried the contract's prompt and the pool summary
    first = requests[0]["messages"]
    assert first[0]["content"] == contract.prompts.discovery
    assert f"Tasks the agent solves (1):\n- {pool_tasks[0].id}" in first[1]["content"]
    assert "Propose exactly 7 new tasks" in first[1]["content"]

    engine = init_db(f"sqlite:///{tmp_path / 'db' / 'mindforge.db'}")
    with session_scope(engine) as session:
        lineage_id = create_lineage(session=session, lineage_in=LineageCreate(name="discovery-it")).id
    with session_scope(engine) as session:
        [moved] = admit_to_store(session, lineage_id, 1, record.admitted, artifact_root=settings.artifacts)
    assert Path(moved.path) == settings.artifacts / "discovered" / lineage_id / "g1-region-totals"
    with session_scope(engine) as session:
        [stored] = session.exec(select(StoredTask)).all()
        [member] = session.exec(select(PoolMembership)).all()
        assert (stored.id, stored.source, stored.path) == (admitted.content_hash, TaskSource.DISCOVERED, moved.path)
        assert stored.provenance["lineage_id"] == lineage_id
        assert stored.provenance["difficulty"]["success_rate"] == 0.0
        assert (member.split, member.added_generation) == (PoolSplit.SEARCH, 1)
    engine.dispose()


def test_discover_command_writes_admitted_tasks_and_a_record(docker_engine, settings, tmp_path):
    """The CLI on a reply with one valid and one malformed proposal (images are cached by content)."""
    import typer

    from mindforge.cli.discover import discover_command

    contract = load_contract(CONTRACT)
    app = typer.Typer()
    app.command("discover")(discover_command)
    app.command("noop")(lambda: None)  # a second command keeps "discover" a sub-command
    out = tmp_path / "out"
    with start_scripted_policy(_script(contract, reply(VALID, MALFORMED))) as server:
        result = CliRunner().invoke(
            app,
            ["discover", "--contract", str(CONTRACT), "--count", "2", "--out", str(out), "--tasks", str(BUNDLED_TASKS),
             "--base-url", server.base_url, "--attempts", "1"],
        )
    assert result.exit_code == 0, result.output
    assert "1 of 2 proposals admitted" in result.output and "malformed" in result.output
    task = load_task(out / "g1-region-totals")
    [record_file] = list(out.glob("discovery-*.json"))
    record = json.loads(record_file.read_text())
    assert record["admitted"][0]["content_hash"] == task.content_hash
    assert record["admitted"][0]["path"] == str(out / "g1-region-totals")
    assert [r["reason"] for r in record["rejected"]] == ["malformed"]
