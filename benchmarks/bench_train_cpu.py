"""Benchmark: one GRPO forward + backward of SmolLM2-135M with LoRA on the CPU, by thread count and precision.

The Update's training Ray task runs torch on as many threads as the CPUs it asks Ray for
(Ray sets ``OMP_NUM_THREADS`` to them): :func:`workers.ray_trials.train_resources`. This
measures what that choice is worth on this host: seconds per forward + backward of the
product's LoRA model (:mod:`mindforge.trainer.lora`, the ``TrainerConfig`` defaults) on a
batch shaped like an Update's samples (4 sequences of 900 tokens, log-probs of the last
100: a long prompt of retrieved examples, a short reply), at 1 thread and at every core,
in float32 and under bfloat16 autocast, each against 1 thread in float32 measured in the
same run. Random token ids: the cost of a step does not depend on which tokens they are.

Run on demand (needs the ``train`` extra and the bundled model)::

    .venv/bin/python benchmarks/bench_train_cpu.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def step_seconds(model, ids, mask, first: int, *, threads: int, bf16: bool, repeats: int) -> float:
    """Median seconds of one forward + backward through ``per_token_logps`` (after one warm-up)."""
    import statistics

    import torch

    from mindforge.trainer import lora

    torch.set_num_threads(threads)
    times = []
    for i in range(repeats + 1):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logps = lora.per_token_logps(model, ids, mask, first)
        logps.sum().backward()
        model.zero_grad(set_to_none=True)
        if i:  # the first pass warms the allocator and the kernels
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import lora

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per setting (median)")
    args = parser.parse_args(argv)
    base = Path(resolve_model("smollm2").hf_dir)
    model = lora.wrap_lora(lora.load_base(base, torch.device("cpu"), torch.float32), TrainerConfig(), None)
    model.train()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 40_000, (4, 900), generator=gen)
    mask = torch.ones_like(ids)
    cores = os.cpu_count() or 1
    baseline = step_seconds(model, ids, mask, 800, threads=1, bf16=False, repeats=args.repeats)
    print(f"=== bench_train_cpu (SmolLM2-135M + LoRA r16, 4 x 900 tokens, {cores} cores) ===")
    print(f"1 thread, float32 (baseline): {baseline:.1f} s per forward + backward")
    for threads in sorted({1, cores}):
        for bf16 in (False, True):
            if threads == 1 and not bf16:
                continue
            secs = step_seconds(model, ids, mask, 800, threads=threads, bf16=bf16, repeats=args.repeats)
            label = "bfloat16 autocast" if bf16 else "float32"
            print(f"{threads} thread(s), {label}: {secs:.1f} s ({baseline / secs:.2f}x the baseline)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
