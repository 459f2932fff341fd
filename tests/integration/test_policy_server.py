"""The embedded policy server on the tiny local model, driven through the ``openai`` SDK.

Real parts only: the tiny model is built locally (random weights), served in-process by
uvicorn on a free port, and LoRA adapters are made with PEFT in the test.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import REPO, require_module

torch = require_module("torch")
transformers = require_module("transformers")
peft = require_module("peft")

SYSTEM = "You are operating a Linux terminal."
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "List the files in /app."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``mindforge policy serve --model tiny`` in-process, with the data dir in a temp folder."""
    from mindforge.policy.server.server import start_policy_server
    from mindforge.settings import get_settings

    data_dir = tmp_path_factory.mktemp("mf-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINDFORGE_DATA_DIR", str(data_dir))
        get_settings.cache_clear()
        handle = start_policy_server("tiny", port=0, device="cpu")
        try:
            yield handle
        finally:
            handle.stop()
            get_settings.cache_clear()


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model_dir(server) -> Path:
    return Path(server.app.state.engine.model_path)


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path):
    return transformers.AutoTokenizer.from_pretrained(str(model_dir))


def make_adapter(model_dir: Path, out: Path, seed: int) -> Path:
    """A PEFT LoRA adapter on the tiny model whose lora_B is random (so it is not a no-op)."""
    base = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    model.save_pretrained(str(out))
    return out


def chat(client: openai.OpenAI, model: str, **kw):
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("max_tokens", 6)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=model, logprobs=True, top_logprobs=3, extra_body={"return_token_ids": True}, **kw
    )


def first_top(resp) -> dict[str, float]:
    return {t.token: t.logprob for t in resp.choices[0].logprobs.content[0].top_logprobs}


def teacher_forced(model, prompt: list[int], completion: list[int]) -> list[float]:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    return logps[len(prompt) - 1 :].gather(-1, ids[0, len(prompt) :].unsqueeze(-1)).squeeze(-1).tolist()


def test_models_lists_base(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_chat_completion_token_ids_and_logprobs(client, tokenizer, model_dir) -> None:
    resp = chat(client, "tiny", max_tokens=5)
    body = resp.model_dump()
    choice = body["choices"][0]
    prompt_ids, token_ids = body["prompt_token_ids"], choice["token_ids"]
    expected_prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert prompt_ids == tokenizer(expected_prompt, add_special_tokens=False)["input_ids"]
    assert resp.usage.prompt_tokens == len(prompt_ids)
    assert resp.usage.completion_tokens == len(token_ids) == len(choice["logprobs"]["content"])
    assert resp.usage.total_tokens == len(prompt_ids) + len(token_ids)
    if token_ids[-1] != tokenizer.eos_token_id:
        assert len(token_ids) == 5 and choice["finish_reason"] == "length"
    for entry in choice["logprobs"]["content"]:
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert entry["logprob"] == pytest.approx(tops[0], abs=1e-5)  # greedy takes the argmax
    # the reported logprobs are the model's own: recompute them teacher-forced
    model = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    got = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert got == pytest.approx(teacher_forced(model, prompt_ids, token_ids), abs=1e-4)


def test_seeded_sampling_repeats(client) -> None:
    runs = [
        chat(client, "tiny", temperature=1.0, seed=7, max_tokens=8).model_dump()["choices"][0]["token_ids"]
        for _ in range(2)
    ]
    other = chat(client, "tiny", temperature=1.0, seed=8, max_tokens=8).model_dump()["choices"][0]["token_ids"]
    assert runs[0] == runs[1]
    assert other != runs[0]


def test_stop_string_cuts_the_reply(client) -> None:
    full = chat(client, "tiny", max_tokens=12, temperature=1.0, seed=5)
    entries = full.choices[0].logprobs.content
    stop = next(e.token for e in entries[3:] if e.token.strip() and "\ufffd" not in e.token)
    text = full.choices[0].message.content
    cut = chat(client, "tiny", max_tokens=12, temperature=1.0, seed=5, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.find(stop)]
    assert cut.usage.completion_tokens < full.usage.completion_tokens


def test_tools_and_tool_messages_reach_the_template(client, tokenizer) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    messages = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls /app"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "main.py\nREADME.md"},
    ]
    resp = chat(client, "tiny", messages=messages, tools=tools, max_tokens=2)
    prompt = tokenizer.decode(resp.model_dump()["prompt_token_ids"])
    assert '"name": "bash"' in prompt and "<tools>" in prompt
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls /app"}}\n</tool_call>' in prompt
    assert "<tool_response>\nmain.py\nREADME.md\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_unknown_model_is_404(client) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        chat(client, "no-such-adapter")
    assert err.value.body["type"] == "NotFoundError" and "no-such-adapter" in err.value.body["message"]


def test_prompt_over_the_context_window_is_400(client) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        chat(client, "tiny", messages=[{"role": "user", "content": "ls -la /app && " * 3000}])
    assert "maximum context length" in err.value.body["message"]


def test_lora_adapters_load_switch_and_unload(server, client, model_dir, tmp_path) -> None:
    url = server.base_url
    ad1 = make_adapter(model_dir, tmp_path / "ad1", seed=1)
    ad2 = make_adapter(model_dir, tmp_path / "ad2", seed=2)
    base_before = first_top(chat(client, "tiny", max_tokens=1))

    resp = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": str(ad1)})
    assert resp.status_code == 200 and resp.text.startswith("Success")
    models = {m["id"]: m for m in httpx.get(f"{url}/models").json()["data"]}
    assert set(models) == {"tiny", "rev1"} and models["rev1"]["parent"] == "tiny"

    with_adapter = chat(client, "rev1", max_tokens=1)
    assert with_adapter.model == "rev1"
    adapted = first_top(with_adapter)
    # a different distribution: the top tokens or their logprobs move
    assert adapted.keys() != base_before.keys() or max(abs(adapted[k] - base_before[k]) for k in adapted) > 1e-3
    # the base model answers as before while the adapter is loaded (adapter disabled per request)
    assert first_top(chat(client, "tiny", max_tokens=1)) == pytest.approx(base_before, abs=1e-5)

    # same name, same weights: fine; same name, different weights: refused
    assert httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": str(ad1)}).status_code == 200
    clash = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": str(ad2)})
    assert clash.status_code == 400 and "different weights" in clash.json()["error"]["message"]
    missing = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev9", "lora_path": str(tmp_path / "none")})
    assert missing.status_code == 404

    assert httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev2", "lora_path": str(ad2)}).status_code == 200
    second = first_top(chat(client, "rev2", max_tokens=1))
    assert second.keys() != adapted.keys() or max(abs(second[k] - adapted[k]) for k in second) > 1e-3
    assert first_top(chat(client, "rev1", max_tokens=1)) == pytest.approx(adapted, abs=1e-5)

    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "rev1"}).status_code == 200
    with pytest.raises(openai.NotFoundError):
        chat(client, "rev1")
    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "rev1"}).status_code == 404
    # the name stays bound to its weights after unload
    assert httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": str(ad2)}).status_code == 400

    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "rev2"}).status_code == 200
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert first_top(chat(client, "tiny", max_tokens=1)) == pytest.approx(base_before, abs=1e-5)
    # and an adapter loads again after the last one was unloaded
    assert httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": str(ad1)}).status_code == 200
    assert first_top(chat(client, "rev1", max_tokens=1)) == pytest.approx(adapted, abs=1e-5)


@pytest.mark.slow
def test_serves_from_a_subprocess(model_dir: Path) -> None:
    """``python -m mindforge.policy.server --model tiny`` (what ``mindforge policy serve`` runs) answers,
    under the name ``--served-model-name`` gives it (so ``baseline.toml``'s model.id reaches the tiny model)."""
    from mindforge.hcp import load_contract
    from mindforge.policy.server.runner import PolicyServerProcess

    served = load_contract(REPO / "hcp_contracts" / "baseline.toml").model.id
    data_dir = model_dir.parents[1]  # <data_dir>/models/tiny, already built by the fixture
    env = {"MINDFORGE_DATA_DIR": str(data_dir)}
    args = ["--model", "tiny", "--device", "cpu", "--served-model-name", served]
    with PolicyServerProcess("mindforge.policy.server", args, env=env) as proc:
        client = openai.OpenAI(base_url=proc.base_url, api_key="unused", max_retries=0, timeout=60)
        assert [m.id for m in client.models.list().data] == [served]
        assert chat(client, served, max_tokens=2).usage.completion_tokens >= 1
        with pytest.raises(openai.NotFoundError):
            chat(client, "tiny", max_tokens=1)
