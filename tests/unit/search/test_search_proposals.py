"""Model-proposed prompt edits: strict parsing, rejection with a reason, and a real call.

The endpoint is the scripted policy behind the real OpenAI-compatible HTTP API (the only
test double MindForge allows), answering the proposal prompt in a known way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.policy.server.runner import free_port
from mindforge.search import (
    PromptRequest,
    make_candidate,
    materialize,
    propose_prompt_edit,
)
from mindforge.search.proposals import (
    AuditSummary,
    PromptReplyError,
    parse_prompt_reply,
)

REPO = Path(__file__).resolve().parents[3]
ROOT = load_contract(REPO / "hcp_contracts" / "baseline.toml")
GOOD = "When a command's output is long, page through it with head and tail instead of reading it whole."
REQUEST = PromptRequest(
    cluster="config:config.output_cut",
    audits=[
        AuditSummary(
            task_id="logs-1",
            failure_class="task_failed",
            owner="config",
            rule="config.output_cut",
            detail="50000 bytes cut",
        )
    ],
)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (f'{{"append_system_prompt": "{GOOD}", "rationale": "outputs were cut"}}', None),
        (f'```json\n{{"append_system_prompt": "{GOOD}"}}\n```', None),
        ("Sure! Here is my suggestion: be careful.", "not one JSON object"),
        (f'{{"append_system_prompt": "{GOOD}", "tools": ["read_file"]}}', "keys must be"),
        ('{"append_system_prompt": "be careful"}', "characters"),
        ('{"append_system_prompt": ["a list"]}', "not a string"),
        ('{"append_system_prompt": "Always write the answer to {output_path} before you finish."}', "placeholder"),
        (f'[{{"append_system_prompt": "{GOOD}"}}]', "not an object"),
    ],
)
def test_prompt_replies_are_parsed_strictly(reply: str, error: str | None) -> None:
    if error is None:
        assert parse_prompt_reply(reply) == GOOD
    else:
        with pytest.raises(PromptReplyError, match=error):
            parse_prompt_reply(reply)


def _script(content: str) -> dict:
    return {"rules": [{"match": {"system_contains": "You improve the harness"}, "reply": {"content": content}}]}


def test_a_good_proposal_becomes_a_candidate_with_its_diff() -> None:
    with start_scripted_policy(_script(f'{{"append_system_prompt": "{GOOD}", "rationale": "cut output"}}')) as server:
        proposal = propose_prompt_edit(ROOT, REQUEST, base_url=server.base_url, model="scripted")
        sent = server.app.state.policy.requests[0]["messages"]
    assert proposal.rejected is None and proposal.edit is not None
    assert "logs-1" in sent[1]["content"] and "config.output_cut" in sent[1]["content"]
    cand = make_candidate(ROOT, [proposal.edit], origin="model", step=0)
    assert materialize(ROOT, cand.edits).resources.append_system_prompt.endswith(GOOD)


def test_bad_proposals_are_rejected_with_a_reason() -> None:
    with start_scripted_policy(_script("I would tell the agent to try harder.")) as server:
        proposal = propose_prompt_edit(ROOT, REQUEST, base_url=server.base_url, model="scripted")
    assert proposal.edit is None and "not one JSON object" in proposal.rejected
    assert proposal.raw.startswith("I would")
    dead = propose_prompt_edit(ROOT, REQUEST, base_url=f"http://127.0.0.1:{free_port()}/v1", model="x", timeout_sec=2)
    assert dead.edit is None and dead.rejected.startswith("endpoint error")
