"""The model-driven agent on the real Docker engine, against a SCRIPTED POLICY.

The scripted policy (``mindforge.policy.doubles.scripted``) is the one test double MindForge
allows: an OpenAI-compatible HTTP server whose replies follow a script. Everything else
(sandbox, shell, verifier, transcript) is real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.agent.loop import ModelAgent
from mindforge.agent.transcript import read_transcript
from mindforge.hcp import derive, load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.tasks.loader import load_task
from mindforge.trials.record import FailureClass, LimitFired
from mindforge.trials.run import run_trial
from tests.conftest import REPO
from tests.fixtures.examples import COUNT_LINES, SORT_UNIQUE

pytestmark = pytest.mark.docker

BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")


def _act(tool: str, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments})}


def make_task(root: Path, agent_timeout_sec: float = 120) -> Path:
    """A tiny task: /app/answer.txt must hold the 12th Fibonacci number (144)."""
    d = root / "fib-answer"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "task.toml").write_text(
        f'version = "1.0"\n[agent]\ntimeout_sec = {agent_timeout_sec}\n[verifier]\ntimeout_sec = 30\n'
        '[environment]\nbuild_timeout_sec = 120\ncpus = 1\nmemory_mb = 512\n'
    )
    (d / "instruction.md").write_text("Write the 12th Fibonacci number (F1 = F2 = 1) to /app/answer.txt.\n")
    (d / "environment" / "Dockerfile").write_text("FROM mindforge/base:bookworm\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text(
        'if [ "$(cat /app/answer.txt 2>/dev/null)" = "144" ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n"
    )
    (d / "solution" / "solve.sh").write_text("echo 144 > /app/answer.txt\n")
    return d


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(make_task(tmp_path_factory.mktemp("tasks")))


def _trial(task, contract, script, docker_engine, settings, name):
    script = {**script, "base_models": [contract.model.id]}
    with start_scripted_policy(script) as server:
        agent = ModelAgent(contract, base_url=server.base_url)
        return run_trial(
            task, agent, docker_engine, run_id="agent-loop", trial_id=name, artifact_root=settings.artifacts
        )


SOLVE_WITH_HINT = {
    "rules": [
        {"match": {"system_contains": "HINT_FIB", "turn": 0}, "reply": _act("bash", command="echo 144 > answer.txt")},
        {"match": {"last_message_contains": "Observation from bash"}, "reply": _act("finish")},
    ],
    "default": _act("bash", command="echo 89 > /app/answer.txt"),
}


def test_hint_contract_solves_and_baseline_fails(task, docker_engine, settings):
    hinted = derive(
        BASELINE, name="hinted", revision="1.0.0", edit="append hint",
        changes={"resources.append_system_prompt": "HINT_FIB"},
    )
    rec = _trial(task, hinted, SOLVE_WITH_HINT, docker_engine, settings, "hint")
    assert rec.reward == 1.0, (rec.failure_class, rec.failure_detail)
    assert rec.contract_hash == hinted.content_hash
    assert rec.prompt_tokens > 0 and rec.completion_tokens > 0
    base = _trial(task, BASELINE, SOLVE_WITH_HINT, docker_engine, settings, "base")
    assert base.reward == 0.0
    assert base.failure_class == FailureClass.MAX_TURNS or base.failure_class == FailureClass.TASK_FAILED

    events = read_transcript(Path(rec.artifacts["transcript"]))
    replies = [e for e in events if e["event"] == "reply"]
    assert replies and all(e["completion_token_ids"] for e in replies)
    assert all(e["logprobs"] for e in replies)
    assert Path(rec.artifacts["trajectory"]).is_file()


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        ({"content": "I am not sure what to do."}, FailureClass.PARSE_ERROR),
        ({"content": ""}, FailureClass.EMPTY_REPLY),
        ({"content": '{"tool": "bash", "argu', "finish_reason": "length"}, FailureClass.TRUNCATED_REPLY),
    ],
)
def test_unusable_replies_have_their_own_class(reply, failure, task, docker_engine, settings):
    rec = _trial(task, BASELINE, {"rules": [], "default": reply}, docker_engine, settings, f"bad-{failure}")
    assert rec.failure_class == failure, rec.failure_detail
    assert rec.reward == 0.0  # the verifier still ran: the agent's failure is why it scored 0


def test_an_endpoint_that_fails_is_no_score(task, docker_engine, settings):
    """A 5xx from the policy endpoint is the endpoint's failure: no reward, no verifier run."""
    reply = {"content": "x", "http_status": 500}
    rec = _trial(task, BASELINE, {"rules": [], "default": reply}, docker_engine, settings, "bad-endpoint")
    assert rec.failure_class == FailureClass.ENDPOINT_ERROR, rec.failure_detail
    assert rec.reward is None and not rec.has_real_reward
    assert rec.timings.verify_sec == 0.0


def test_max_turns_fires(task, docker_engine, settings):
    short = derive(BASELINE, name="short", revision="1.0.0", edit="max_turns 3", changes={"workspace.max_turns": 3})
    rec = _trial(task, short, {"default": _act("bash", command="true")}, docker_engine, settings, "turns")
    assert (rec.failure_class, rec.limit_fired, rec.num_turns) == (FailureClass.MAX_TURNS, LimitFired.MAX_TURNS, 3)


@pytest.mark.slow
def test_agent_timeout_fires(tmp_path, docker_engine, settings):
    quick = load_task(make_task(tmp_path, agent_timeout_sec=4))
    rec = _trial(quick, BASELINE, {"default": _act("bash", command="sleep 30")}, docker_engine, settings, "timeout")
    assert (rec.failure_class, rec.limit_fired) == (FailureClass.AGENT_TIMEOUT, LimitFired.AGENT_TIMEOUT)
    assert rec.timings.agent_sec < 20


def test_shell_session_persists_and_background_server_returns(task, docker_engine, settings):
    script = {
        "rules": [
            {"match": {"turn": 0}, "reply": _act("bash", command="cd /tmp && export FIB_VAR=fib-42")},
            {"match": {"turn": 1},
             "reply": _act("bash", command="python3 -m http.server 8123 >/dev/null 2>&1 & echo started")},
            {"match": {"turn": 2}, "reply": _act("bash", command="pwd; echo $FIB_VAR")},
            {"match": {"turn": 3}, "reply": _act("write_file", path="notes/a.txt", content="hello")},
            {"match": {"turn": 4}, "reply": _act("read_file", path="/app/notes/a.txt")},
        ],
        "default": _act("finish"),
    }
    rec = _trial(task, BASELINE, script, docker_engine, settings, "shell")
    obs = [e["content"] for e in read_transcript(Path(rec.artifacts["transcript"])) if e["event"] == "observation"]
    assert "started" in obs[1]
    assert "/tmp" in obs[2] and "fib-42" in obs[2]
    assert obs[4].startswith("hello")
    assert rec.timings.agent_sec < 30


def _small_model_contract(fmt: str, mode: str, **changes):
    """The plain baseline with the harness features a small model needs (a test contract, not a shipped one)."""

    examples = [COUNT_LINES, SORT_UNIQUE]
    return derive(
        BASELINE,
        name=f"small-{fmt.replace('_', '-')}",
        revision="1.0.0",
        edit=f"{fmt} format, worked examples, {mode}",
        changes={
            "tools.action_format": fmt,
            "tools.allow": ["bash", "finish"],
            "resources.examples": examples,
            "workspace.mode": mode,
            **changes,
        },
    )


def _requests(server) -> list[dict]:
    return server.app.state.policy.requests


def test_command_format_with_examples_in_single_command_mode_passes(task, docker_engine, settings):
    """One model call: the reply's first line is the command, it runs, the verifier passes (scripted policy)."""
    contract = _small_model_contract(
        "command", "single_command", **{"provider_options.stop": ["\n"], "model.max_tokens": 64}
    )
    script = {
        "rules": [
            {
                "match": {"last_message_contains": "Fibonacci", "conversation_contains": ["planets.txt", "birds.txt"]},
                "reply": {"content": "$ echo 144 > /app/answer.txt\nthat should do it"},
            }
        ],
        "default": {"content": "I am not sure."},
        "base_models": [contract.model.id],
    }
    with start_scripted_policy(script) as server:
        agent = ModelAgent(contract, base_url=server.base_url)
        rec = run_trial(task, agent, docker_engine, run_id="loop", trial_id="cmd", artifact_root=settings.artifacts)
        requests = _requests(server)
    assert rec.reward == 1.0 and rec.failure_class is None, (rec.failure_class, rec.failure_detail)
    assert rec.num_turns == 1 and len(requests) == 1
    sent = requests[0]
    assert sent["stop"] == ["\n"] and sent["max_tokens"] == 64 and not sent.get("tools")
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]  # two examples, then the task
    assert sent["messages"][2]["content"] == "wc -l < planets.txt > planet_count.txt && cat planet_count.txt"
    events = read_transcript(Path(rec.artifacts["transcript"]))
    action = next(e for e in events if e["event"] == "action")
    assert action["arguments"] == {"command": "echo 144 > /app/answer.txt"}  # first line, "$ " stripped
    observation = next(e for e in events if e["event"] == "observation")
    assert observation["exit_code"] == 0 and observation["content"].startswith("[exit code 0]")
    from mindforge.atif import read_trajectory

    trajectory = read_trajectory(Path(rec.artifacts["trajectory"]))
    assert sum(1 for s in trajectory.steps if s.is_copied_context) == 2
    assert trajectory.extra["mindforge"]["agent_steps"] == 1


def test_fenced_bash_in_multi_turn_mode_passes_and_finishes_with_done(task, docker_engine, settings):
    """A fenced ```bash block acts, the terminal-style output comes back, ``done`` finishes (scripted policy)."""
    contract = _small_model_contract("fenced_bash", "multi_turn", **{"tools.show_turn_budget": False})
    script = {
        "rules": [
            {"match": {"last_message_contains": "Output:"}, "reply": {"content": "done"}},
            {
                "match": {"last_message_contains": "Fibonacci"},
                "reply": {"content": "I will write it.\n```bash\ncd /app\necho 144 > answer.txt\n```"},
            },
        ],
        "default": {"content": "no idea"},
        "base_models": [contract.model.id],
    }
    with start_scripted_policy(script) as server:
        agent = ModelAgent(contract, base_url=server.base_url)
        rec = run_trial(task, agent, docker_engine, run_id="loop", trial_id="fenced", artifact_root=settings.artifacts)
        requests = _requests(server)
    assert rec.reward == 1.0 and rec.failure_class is None, (rec.failure_class, rec.failure_detail)
    assert rec.num_turns == 2
    assert "stop" not in requests[0] or not requests[0]["stop"]
    assert requests[1]["messages"][-1]["content"] == "Output:\n[exit code 0]"  # no turn-budget line
    example_reply = requests[0]["messages"][2]["content"]
    assert example_reply == "```bash\nwc -l < planets.txt > planet_count.txt\n```"
    events = read_transcript(Path(rec.artifacts["transcript"]))
    assert [e["tool"] for e in events if e["event"] == "action"] == ["bash", "finish"]


def test_single_command_mode_ends_at_the_first_unusable_reply(task, docker_engine, settings):
    """No retry in single_command mode: one call, the parse error is the trial's class, the verifier still ran."""
    contract = _small_model_contract("fenced_bash", "single_command")
    script = {"default": {"content": "echo 144 > answer.txt"}}  # no fenced block
    rec = _trial(task, contract, script, docker_engine, settings, "single-bad")
    assert (rec.failure_class, rec.num_turns, rec.reward) == (FailureClass.PARSE_ERROR, 1, 0.0)
    assert "single_command" in rec.failure_detail
