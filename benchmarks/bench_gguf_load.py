"""Loading a GGUF model: transformers' own GGUF load vs MindForge's converted copy, and greedy speed.

Three child processes, each measuring its own wall time and peak resident memory
(``ru_maxrss``) from process start (imports excluded from the times, included in the
memory):

- ``direct``: ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`` plus the
  tokenizer, as transformers loads a GGUF file every time (dequantise on each start);
- ``convert``: :func:`mindforge.policy.engines.models.resolve_model` with an empty cache (the
  first use: the same load, then ``save_pretrained`` of the plain float copy);
- ``serve``: the embedded policy server started on the cached copy (what every later
  start costs), then greedy chat completions of ``--max-tokens`` on a short prompt
  through the HTTP API, median over ``--repeats``, in completion tokens per second.

Prints the figures and the direct/serve load ratio; asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_gguf_load.py                 # the bundled smollm2
    .venv/bin/python benchmarks/bench_gguf_load.py --model PATH.gguf --max-tokens 64
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

PROMPT: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Write a bash command that lists the files in /app, one per line."}
]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _direct(spec: str) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mindforge.policy.engines.models import smollm2_gguf_path

    path = smollm2_gguf_path() if spec == "smollm2" else Path(spec)
    began = time.perf_counter()
    AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return {"load_sec": time.perf_counter() - began, "rss_mb": _rss_mb()}


def _convert(spec: str, cache: Path) -> dict:
    from mindforge.policy.engines.models import resolve_model

    began = time.perf_counter()
    resolved = resolve_model(spec, cache_dir=cache)
    return {"load_sec": time.perf_counter() - began, "rss_mb": _rss_mb(), "hf_dir": resolved.hf_dir}


def _serve(spec: str, cache: Path, max_tokens: int, repeats: int) -> dict:
    import os

    import openai

    os.environ["MINDFORGE_DATA_DIR"] = str(cache.parent)
    from mindforge.policy.server.server import start_policy_server

    began = time.perf_counter()
    server = start_policy_server(spec, device="cpu")
    load_sec = time.perf_counter() - began
    rss_loaded = _rss_mb()
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=600)
    name = server.app.state.engine.base_name
    rates, raw_rates, tokens = [], [], []
    try:
        for _ in range(repeats + 1):  # the first round warms up
            t0 = time.perf_counter()
            resp = client.chat.completions.create(model=name, messages=PROMPT, max_tokens=max_tokens, temperature=0)
            dt = time.perf_counter() - t0
            if resp.usage is None:
                raise RuntimeError("the policy server's reply has no usage (completion token count)")
            tokens.append(resp.usage.completion_tokens)
            rates.append(resp.usage.completion_tokens / dt)
            raw_rates.append(_raw_generate_rate(server.app.state.engine, max_tokens))
    finally:
        server.stop()
    return {
        "load_sec": load_sec,
        "rss_mb": rss_loaded,
        "rss_after_mb": _rss_mb(),
        "tokens_per_sec": statistics.median(rates[1:]),
        "raw_tokens_per_sec": statistics.median(raw_rates[1:]),
        "completion_tokens": tokens[1:],
    }


def _raw_generate_rate(engine, max_tokens: int) -> float:
    """Greedy ``model.generate`` on the same prompt, without the server (tokens/s)."""
    import torch

    ids = engine.tokenizer.apply_chat_template(
        PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = engine.model.generate(**ids, max_new_tokens=max_tokens, do_sample=False)
    return (out.shape[1] - ids["input_ids"].shape[1]) / (time.perf_counter() - t0)


def _child(mode: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--model", args.model, "--cache", str(args.cache)]
    cmd += ["--max-tokens", str(args.max_tokens), "--repeats", str(args.repeats)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 or a .gguf file")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "direct":
            result = _direct(args.model)
        elif args.child == "convert":
            result = _convert(args.model, args.cache)
        else:
            result = _serve(args.model, args.cache, args.max_tokens, args.repeats)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory(prefix="bench-gguf-") as tmp:
        args.cache = Path(tmp) / "models"
        results = {mode: _child(mode, args) for mode in ("direct", "convert", "serve")}
    for mode, r in results.items():
        print(f"{mode:8s} load {r['load_sec']:6.2f} s, peak RSS {r['rss_mb']:7.0f} MB")
    serve = results["serve"]
    print(
        f"serve    greedy {serve['tokens_per_sec']:.1f} tokens/s through the HTTP API ({serve['completion_tokens']} "
        f"tokens), {serve['raw_tokens_per_sec']:.1f} tokens/s plain generate; "
        f"peak RSS after {serve['rss_after_mb']:.0f} MB"
    )
    load_ratio = results["direct"]["load_sec"] / serve["load_sec"]
    print(f"ratio direct GGUF load / cached-copy server start: {load_ratio:.1f}x")
    print(f"ratio HTTP API / plain generate tokens/s: {serve['tokens_per_sec'] / serve['raw_tokens_per_sec']:.2f}")


if __name__ == "__main__":
    main()
