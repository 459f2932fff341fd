"""Hand-off of adapter revisions to an OpenAI-compatible endpoint (``mindforge.policy.handoff``).

Against the real embedded policy server on the locally built tiny model (in-process, a
free port) and LoRA adapters made with PEFT here; the scripted policy (the test double
behind the same HTTP API) checks that the hand-off takes any vLLM-shaped endpoint and
that its ``return_token_ids`` knob hides token ids and logprobs.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mindforge.policy.handoff import (
    AdapterLoadError,
    AdapterNameConflictError,
    EndpointUnavailableError,
    ProbeError,
    hand_off,
    load_adapter,
    probe_adapter,
    served_adapters,
    versioned_adapter_name,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(settings):
    from mindforge.policy.server.server import start_policy_server

    handle = start_policy_server("tiny", port=0, device="cpu")
    try:
        yield handle
    finally:
        handle.stop()


def make_adapter(model_dir: Path, out: Path, seed: int) -> Path:
    """A PEFT LoRA adapter on the tiny model with random B (not a no-op), seeded."""
    import peft
    import torch
    import transformers

    base = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def adapters(server, tmp_path_factory) -> tuple[Path, Path]:
    model_dir = Path(server.app.state.engine.model_path)
    root = tmp_path_factory.mktemp("adapters")
    return make_adapter(model_dir, root / "one", 1), make_adapter(model_dir, root / "two", 2)


def test_versioned_adapter_name():
    assert versioned_adapter_name("my-lineage", 0, 0) == "my-lineage-g0-r0"
    assert versioned_adapter_name("My Lineage/v2", 3, 7) == "my-lineage-v2-g3-r7"
    with pytest.raises(ValueError, match="no character"):
        versioned_adapter_name("///", 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        versioned_adapter_name("x", -1, 0)


def test_hand_off_loads_under_the_versioned_name_and_probes(server, adapters):
    one, _two = adapters
    name = versioned_adapter_name("serve", 0, 0)
    record = hand_off(server.base_url, name, one)
    assert record.load == "loaded" and record.probe_model == name
    assert record.probe_completion_tokens >= 1
    assert served_adapters(server.base_url)[name] == str(one)
    # a retried hand-off of the same revision is a no-op
    assert hand_off(server.base_url, name, one).load == "already_loaded"


def test_a_name_is_never_rebound_to_other_weights(server, adapters):
    one, two = adapters
    name = versioned_adapter_name("serve", 1, 1)
    assert load_adapter(server.base_url, name, one) == "loaded"
    with pytest.raises(AdapterNameConflictError, match="never reused"):
        load_adapter(server.base_url, name, two)
    assert served_adapters(server.base_url)[name] == str(one)
    # unloaded, the name stays bound to its weights: the server refuses other weights
    httpx.post(f"{server.base_url}/unload_lora_adapter", json={"lora_name": name}, timeout=60).raise_for_status()
    assert name not in served_adapters(server.base_url)
    with pytest.raises(AdapterNameConflictError, match="different weights"):
        load_adapter(server.base_url, name, two)


def test_probe_and_load_failures_are_named(server, tmp_path):
    with pytest.raises(ProbeError, match="HTTP 404"):
        probe_adapter(server.base_url, "never-loaded-g0-r0")
    with pytest.raises(AdapterLoadError, match="HTTP 404"):
        load_adapter(server.base_url, "empty-g0-r0", tmp_path)
    with pytest.raises(EndpointUnavailableError):
        load_adapter("http://127.0.0.1:9/v1", "x-g0-r0", tmp_path, timeout_sec=2)


def test_hand_off_to_the_scripted_endpoint_and_its_token_id_knob(adapters):
    from mindforge.policy.doubles.scripted import start_scripted_policy

    one, _two = adapters
    script = {"default": {"content": "ok"}, "base_models": ["tiny"], "return_token_ids": False}
    with start_scripted_policy(script) as policy:
        assert hand_off(policy.base_url, "scripted-g0-r0", one).probe_model == "scripted-g0-r0"
        body = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "logprobs": True,
            "return_token_ids": True,
        }
        out = httpx.post(f"{policy.base_url}/chat/completions", json=body, timeout=30).json()
    assert "prompt_token_ids" not in out and "token_ids" not in out["choices"][0]
    assert out["choices"][0]["logprobs"] is None
