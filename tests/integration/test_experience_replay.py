"""The experience library on the real Docker engine: validation by replay, and a model trial shown entries.

Replays run with no model. The one trial with a model uses the SCRIPTED POLICY
(``mindforge.policy.doubles.scripted``), the one test double MindForge allows: an OpenAI-compatible
HTTP server whose replies follow a script. Sandbox, shell, verifier, transcript and ATIF
export are real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.agent.loop import ModelAgent
from mindforge.experience import (
    ExperienceSnapshot,
    Provenance,
    RejectionReason,
    attach_snapshot,
    make_entry,
    mine_solution,
)
from mindforge.hcp import ExampleStep, load_contract
from mindforge.payloads.ray_tasks import ReplayEntryTaskInput, SandboxSettings
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.tasks.loader import load_task
from mindforge.trials.replay import replay_entry
from mindforge.trials.run import run_trial
from tests.conftest import REPO
from tests.unit.experience.helpers import LIBRARY
from workers.ray_trials import replay_entry_payload

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = REPO / "tests" / "fixtures" / "tasks"
BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")


@pytest.fixture(scope="module")
def answer_task():
    return load_task(FIXTURES / "exp_answer")


def _candidate(task, commands: list[str]):
    return make_entry(
        instruction=task.instruction,
        steps=[ExampleStep(command=c) for c in commands],
        provenance=Provenance.MODEL,
        trial_id="t-test",
        task_id=task.id,
        task_hash=task.content_hash,
    )


def test_the_oracle_entry_is_kept_with_its_outputs_through_the_ray_payload(answer_task, settings):
    """Mined from the fixture's solve.sh, replayed twice by the Ray task's payload function, kept."""
    mined = mine_solution(task_id=answer_task.id, task_hash=answer_task.content_hash,
                          instruction=answer_task.instruction, solve_sh=answer_task.solution_dir / "solve.sh",
                          split="search", lineage="test")
    assert mined is not None and mined.commands == ["echo 144 > /app/answer.txt", "cat /app/answer.txt"]
    verdict = replay_entry_payload(ReplayEntryTaskInput(
        entry=mined.model_dump(mode="json"), task_path=str(answer_task.path), run_id="exp-replay",
        sandbox=SandboxSettings.from_settings(settings)))
    assert verdict.kept and verdict.rejection is None
    assert verdict.entry.validation is not None and verdict.entry.validation.rewards == [1.0, 1.0]
    assert verdict.entry.steps[1].output == "144\n" and verdict.entry.entry_id == mined.entry_id


def test_a_failing_replay_is_rejected(answer_task, docker_engine, image_map, settings):
    verdict = replay_entry(_candidate(answer_task, ["echo 89 > /app/answer.txt"]), answer_task, docker_engine,
                           artifact_root=settings.artifacts, run_id="exp-replay", image_map=image_map)
    assert not verdict.kept and verdict.rejection is not None
    assert verdict.rejection.reason == RejectionReason.FAILED and "replay rewards 0, 0" in verdict.rejection.detail


def test_a_flaky_pass_is_rejected(docker_engine, image_map, settings):
    """The flaky fixture's verifier is a fair coin once the answer is right: with up to 12 replays
    (stopping at the first disagreement) every replay agrees with probability 2 * 2**-12."""
    task = load_task(FIXTURES / "flaky")
    verdict = replay_entry(_candidate(task, ["echo 42 > /app/answer.txt"]), task, docker_engine, runs=12,
                           artifact_root=settings.artifacts, run_id="exp-replay", image_map=image_map)
    assert not verdict.kept and verdict.rejection is not None
    assert verdict.rejection.reason == RejectionReason.FLAKY, verdict.rejection.detail


def test_the_trial_record_and_atif_name_the_entries_shown(answer_task, docker_engine, settings):
    """A model trial (scripted policy) under a contract with a snapshot: the record, transcript and ATIF
    name the entries it was shown, the request carried their instructions, and its own entry is left out."""
    own = _candidate(answer_task, ["echo 144 > /app/answer.txt"]).with_validation(LIBRARY[0].validation)
    snapshot = ExperienceSnapshot(entries=(*LIBRARY, own))
    contract = attach_snapshot(BASELINE, snapshot, revision="1.0.1", k=2)
    script = {
        "base_models": [contract.model.id],
        "rules": [{"match": {"last_message_contains": "Observation from bash"},
                   "reply": {"content": json.dumps({"tool": "finish", "arguments": {}})}}],
        "default": {"content": json.dumps({"tool": "bash", "arguments": {"command": "echo 144 > /app/answer.txt"}})},
    }
    with start_scripted_policy(script) as server:
        rec = run_trial(answer_task, ModelAgent(contract, base_url=server.base_url), docker_engine,
                        run_id="exp-agent", trial_id="shown", artifact_root=settings.artifacts)
    assert rec.passed, rec.failure_detail
    assert len(rec.experience_entries) == 2 and own.entry_id not in rec.experience_entries
    assert set(rec.experience_entries) <= {e.entry_id for e in LIBRARY}
    trajectory = json.loads(Path(rec.artifacts["trajectory"]).read_text())
    assert trajectory["extra"]["mindforge"]["experience_entries"] == rec.experience_entries
    assert trajectory["extra"]["mindforge"]["experience_snapshot"] == snapshot.snapshot_id
    shown = {e.entry_id: e for e in LIBRARY}
    context = " ".join(step.get("message", "") for step in trajectory["steps"])
    assert all(shown[i].instruction in context for i in rec.experience_entries)
