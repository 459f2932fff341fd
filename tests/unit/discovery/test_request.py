"""request_proposals over the real OpenAI-compatible HTTP API.

Test double: the scripted policy server (``mindforge.policy.doubles.scripted``), the only double
allowed; it answers the proposal prompt with fixed replies. No Docker.
"""

from __future__ import annotations

import json

import openai
import pytest

from mindforge.discovery.proposal import (
    DiscoveryEndpointError,
    PoolSummary,
    request_proposals,
)
from mindforge.discovery.records import RejectReason
from mindforge.hcp import contract_from_document, load_contract
from mindforge.hcp.derive import apply_changes
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.settings import REPO_ROOT
from tests.unit.discovery.sample_proposals import MALFORMED, VALID, reply

CONTRACT = REPO_ROOT / "hcp_contracts" / "baseline.toml"


def _serve(contract, content: str, **reply_kw):
    return start_scripted_policy(
        {"base_models": [contract.model.id], "default": {"content": content, **reply_kw}}
    )


def test_reply_is_parsed_and_logged(tmp_path):
    contract = load_contract(CONTRACT)
    with _serve(contract, reply(VALID, MALFORMED)) as server:
        outcomes = request_proposals(server.base_url, contract, PoolSummary(), 2, reply_path=tmp_path / "reply.json")
        [request] = server.app.state.policy.requests
    assert [o.reason for o in outcomes] == [None, RejectReason.MALFORMED]
    assert request["model"] == contract.model.id
    assert request["temperature"] == contract.provider_options.temperature
    assert request["max_tokens"] == contract.model.max_tokens
    logged = json.loads((tmp_path / "reply.json").read_text())
    assert logged["reply"] == reply(VALID, MALFORMED) and logged["finish_reason"] == "stop"


def test_the_adapter_name_is_the_model_sent():
    base = load_contract(CONTRACT)
    contract = contract_from_document(apply_changes(base.to_document(), {"model.adapter": "lineage-r3"}, "test"))
    with start_scripted_policy({"base_models": ["base"], "default": {"content": reply(VALID)}}) as server:
        # the adapter is not loaded on the server: the request names it, and the server refuses it
        with pytest.raises(DiscoveryEndpointError, match="lineage-r3"):
            request_proposals(server.base_url, contract, PoolSummary(), 1)


def test_a_cut_reply_is_malformed_as_a_whole():
    contract = load_contract(CONTRACT)
    with _serve(contract, reply(VALID)[:200], finish_reason="length") as server:
        [outcome] = request_proposals(server.base_url, contract, PoolSummary(), 1, max_tokens=50)
    assert outcome.index == -1 and outcome.reason == RejectReason.MALFORMED
    assert "completion limit of 50 tokens" in outcome.detail


def test_an_endpoint_error_is_an_infra_error():
    contract = load_contract(CONTRACT)
    with _serve(contract, "", http_status=500) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)
        with pytest.raises(DiscoveryEndpointError, match="500"):
            request_proposals(client, contract, PoolSummary(), 1)
