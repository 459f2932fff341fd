"""Benchmark: the trainer's peak memory on long trajectories, capped micro-batches against one batch.

One GRPO step of SmolLM2-135M-Instruct + LoRA (:func:`mindforge.trainer.grpo.train_grpo`) on
synthetic samples (random token ids, never a bundled task): ``--samples`` trajectories of
``--tokens`` tokens in two groups, each with two stretches of 60 model tokens (the first
half a prompt), as a multi-turn trial under a contract with worked examples looks. Each
setting runs in its own process, which reports its peak resident memory and seconds:

- baseline: every group in one forward/backward (no position cap, no checkpointing);
- default: the ``TrainerConfig`` defaults (``micro_batch_positions``, ``checkpoint_above_tokens``).

Prints both and the ratios default / baseline. Run on demand::

    .venv/bin/python benchmarks/bench_train_memory.py                   # 4 x 2,000 tokens
    .venv/bin/python benchmarks/bench_train_memory.py --samples 8 --tokens 3000   # about 22 GB at baseline
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one(samples: int, tokens: int, setting: str) -> dict[str, float]:
    """Train one step under ``setting`` (``baseline`` or ``default``) in this process; peak RSS (GB) and seconds."""
    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer.grpo import train_grpo
    from mindforge.trainer.samples import TrainingSample

    rng = random.Random(0)
    half = tokens // 2
    mask = [0] * half + [1] * 60 + [0] * (tokens - half - 120) + [1] * 60
    rows = [
        TrainingSample(
            sample_id=f"s{i}", group_id=f"g{i % 2}", reward=float(i % 2 == i // 2 % 2),
            input_ids=[rng.randrange(100, 40_000) for _ in range(tokens)], loss_mask=mask,
            rollout_logprobs=[0.0] * tokens, has_rollout_logprobs=False, source="recorded",
        )
        for i in range(samples)
    ]
    rows.sort(key=lambda r: r.group_id)
    extra = {"micro_batch_positions": None, "checkpoint_above_tokens": None} if setting == "baseline" else {}
    config = TrainerConfig(max_steps=1, batch_size=samples, **extra)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        train_grpo(Path(resolve_model("smollm2").hf_dir), rows, config, Path(out))
    return {"peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, "seconds": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.samples, args.tokens, args.one)))
        return 0
    got = {}
    for setting in ("baseline", "default"):
        cmd = [sys.executable, __file__, "--samples", str(args.samples), "--tokens", str(args.tokens), "--one", setting]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{setting}: exit {done.returncode} (killed for memory?)\n{done.stderr[-2000:]}")
            return 1
        got[setting] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{setting:8s} peak RSS {got[setting]['peak_gb']:.2f} GB, {got[setting]['seconds']:.0f} s", flush=True)
    b, d = got["baseline"], got["default"]
    print(f"default / baseline: memory {d['peak_gb'] / b['peak_gb']:.2f}x, time {d['seconds'] / b['seconds']:.2f}x "
          f"({args.samples} samples of {args.tokens} tokens, one GRPO step)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
