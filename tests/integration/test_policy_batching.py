"""Concurrent requests to the transformers engine run as one batch and answer as if run alone.

Real parts only: the tiny local model (random weights) and a PEFT LoRA adapter made in
the test with a large random ``lora_B``, so its greedy text varies token by token.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import require_module

torch = require_module("torch")
transformers = require_module("transformers")
peft = require_module("peft")

from mindforge.policy.server.protocol import ChatCompletionRequest  # noqa: E402 - imported after the checks above, which fail the module when its extra is missing


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    """The engine on the tiny model with adapter ``var`` loaded."""
    from mindforge.policy.doubles.tiny import build_tiny_model
    from mindforge.policy.engines.engine import PolicyEngine

    root = tmp_path_factory.mktemp("batching")
    model_dir = build_tiny_model(root / "tiny")
    base = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    lora = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 5.0)
    lora.save_pretrained(str(root / "var"))
    eng = PolicyEngine(str(model_dir), served_name="tiny", device="cpu", batch_wait_sec=0.0)
    eng.load_adapter("var", str(root / "var"))
    yield eng
    eng.close()


def request(model: str, content: str, **kw) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        model=model,
        messages=[{"role": "user", "content": content}],
        temperature=kw.pop("temperature", 0),
        logprobs=True,
        top_logprobs=2,
        return_token_ids=True,
        **kw,
    )


def run_together(engine, reqs: list[ChatCompletionRequest]) -> list[dict]:
    """Queue ``reqs`` behind a held engine lock, so that the batcher takes them in one round."""
    out: dict[int, dict] = {}
    threads = []
    with engine.lock:
        started = len(engine.batcher.batch_sizes)
        blocker = threading.Thread(target=engine.chat, args=(request("tiny", "wait", max_tokens=1),))
        blocker.start()
        while len(engine.batcher.batch_sizes) == started:  # until the worker runs the blocker (waiting for the lock)
            time.sleep(0.01)
        for i, req in enumerate(reqs):
            t = threading.Thread(target=lambda i=i, req=req: out.__setitem__(i, engine.chat(req)))
            t.start()
            threads.append(t)
        deadline = time.monotonic() + 30
        while engine.batcher._queue.qsize() < len(reqs) and time.monotonic() < deadline:
            time.sleep(0.01)
    for t in [blocker, *threads]:
        t.join(timeout=120)
    return [out[i] for i in range(len(reqs))]


def same_reply(batched: dict, alone: dict) -> None:
    a, b = batched["choices"][0], alone["choices"][0]
    assert a["token_ids"] == b["token_ids"]
    assert a["message"] == b["message"] and a["finish_reason"] == b["finish_reason"]
    assert batched["prompt_token_ids"] == alone["prompt_token_ids"] and batched["usage"] == alone["usage"]
    for x, y in zip(a["logprobs"]["content"], b["logprobs"]["content"], strict=True):
        assert x["token"] == y["token"] and x["logprob"] == pytest.approx(y["logprob"], abs=1e-4)
        assert [t["token"] for t in x["top_logprobs"]] == [t["token"] for t in y["top_logprobs"]]


def test_a_mixed_batch_answers_each_row_as_alone(engine) -> None:
    probe = engine.chat(request("var", "List the files in /app.", max_tokens=12))
    text = probe["choices"][0]["message"]["content"]
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip() and text.find(stop) > 0, text
    reqs = [
        request("tiny", "List the files in /app.", max_tokens=3),  # base row, budget 3
        request("var", "List the files in /app.", max_tokens=12, stop=[stop]),  # adapter row, cut by a stop string
        request("var", "Say hello to the user, then list /etc.", max_tokens=9),  # adapter row, other prompt length
        request("tiny", "Say hello", max_tokens=7, stop=["\n"]),  # base row, stop string at once
    ]
    alone = [engine.chat(r) for r in reqs]
    n_batches = len(engine.batcher.batch_sizes)
    together = run_together(engine, reqs)
    assert engine.batcher.batch_sizes[n_batches:] == [1, 4]  # the blocker, then all four rows at once
    for b, a in zip(together, alone, strict=True):
        same_reply(b, a)
    finishes = [a["choices"][0]["finish_reason"] for a in alone]
    assert finishes == ["length", "stop", "length", "stop"]
    lengths = [len(a["choices"][0]["token_ids"]) for a in alone]
    assert lengths[0] == 3 and lengths[2] == 9 and lengths[1] < 12
    assert alone[1]["choices"][0]["message"]["content"] == text[: text.find(stop)]
    assert alone[0]["choices"][0]["token_ids"] != alone[1]["choices"][0]["token_ids"][:3]  # the adapter acts


def test_different_sampling_settings_run_in_separate_batches(engine) -> None:
    reqs = [
        request("tiny", "List the files in /app.", max_tokens=4),
        request("var", "List the files in /app.", max_tokens=4, temperature=0.7, seed=11),
        request("var", "List the files in /app.", max_tokens=4, temperature=0.7, seed=11),
    ]
    n_batches = len(engine.batcher.batch_sizes)
    together = run_together(engine, reqs)
    # greedy alone; each seeded sampling request alone, so its sample does not depend on batch mates
    assert sorted(engine.batcher.batch_sizes[n_batches + 1 :]) == [1, 1, 1]
    assert together[1]["choices"][0]["token_ids"] == together[2]["choices"][0]["token_ids"]
    same_reply(together[0], engine.chat(reqs[0]))


def test_unseeded_sampling_requests_share_a_batch(engine) -> None:
    reqs = [request("var", "List the files in /app.", max_tokens=5, temperature=0.9, top_p=0.95) for _ in range(2)]
    reqs.append(request("tiny", "Say hello", max_tokens=3, temperature=0.9, top_p=0.95))
    n_batches = len(engine.batcher.batch_sizes)
    together = run_together(engine, reqs)
    assert engine.batcher.batch_sizes[n_batches:] == [1, 3]
    for body, req in zip(together, reqs, strict=True):
        choice = body["choices"][0]
        assert body["model"] == req.model and 1 <= len(choice["token_ids"]) <= req.max_tokens
        assert len(choice["logprobs"]["content"]) == len(choice["token_ids"])


def second_turn(first: dict, content: str, question: str) -> list[dict]:
    return [
        {"role": "user", "content": content},
        {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
        {"role": "user", "content": question},
    ]


def test_a_second_turn_reuses_the_first_turns_states_and_answers_the_same(engine) -> None:
    """Turn 2 of two conversations (one per adapter) with the cached prefix, in one batch, equals turn 2 on an
    engine without prefix reuse, and it took (at least) the whole turn-1 prompt from the store."""
    from mindforge.policy.engines.engine import PolicyEngine

    cold = PolicyEngine(engine.model_path, served_name="tiny", device="cpu", batch_wait_sec=0.0, prefix_cache_mb=0)
    cold.load_adapter("var", engine.adapters.loaded["var"][0])
    try:
        firsts = [
            engine.chat(request("var", "List the files in /app.", max_tokens=10)),
            engine.chat(request("tiny", "Say hello to the user, then list /etc.", max_tokens=6)),
        ]
        seconds = [
            request("var", "", max_tokens=8),
            request("tiny", "", max_tokens=5),
        ]
        seconds[0].messages = second_turn(firsts[0], "List the files in /app.", "Now /tmp.")
        seconds[1].messages = second_turn(firsts[1], "Say hello to the user, then list /etc.", "Thanks!")
        n_hits = len(engine.prefix_cache.hits)
        warm = run_together(engine, seconds)
        hits = engine.prefix_cache.hits[n_hits + 1 :]  # after the blocker's row
        assert len(hits) == 2
        assert all(hit >= len(f["prompt_token_ids"]) for hit, f in zip(hits, firsts, strict=True))
        for w, req in zip(warm, seconds, strict=True):
            same_reply(w, cold.chat(req))
    finally:
        cold.close()


def test_an_unloaded_adapter_leaves_no_states_behind(engine, tmp_path) -> None:
    path = engine.adapters.loaded["var"][0]
    engine.load_adapter("var2", path)
    engine.chat(request("var2", "List the files in /app.", max_tokens=3))
    assert any(e.adapter == "var2" for e in engine.prefix_cache._entries.values())
    engine.unload_adapter("var2")
    assert not any(e.adapter == "var2" for e in engine.prefix_cache._entries.values())
