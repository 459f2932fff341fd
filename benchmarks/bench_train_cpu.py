"""Benchmark: one GRPO forward + backward of SmolLM2-135M with LoRA on the CPU, by thread count and precision.

The Update's training Ray task runs torch on as many threads as the CPUs it asks Ray for
(Ray sets ``OMP_NUM_THREADS`` to them): :func:`workers.ray_trials.train_resources`. This
measures what that choice is worth on this host: seconds per forward + backward of the
product's LoRA model (:mod:`mindforge.trainer.lora`, the ``TrainerConfig`` defaults) on a
batch shaped like an Update's samples (4 sequences of 900 tokens, log-probs of the last
100: a long prompt of retrieved examples, a short reply), at 1 thread and at every core,
in float32 and under bfloat16 autocast, each against 1 thread in float32 measured in the
same run. Random token ids: the cost of a step does not depend on which tokens they are.

``--mode prefix`` measures the other saving: a GRPO group's G samples share their whole
first prompt, and the trainer runs that prefix once and serves its KV cache to every row
(:func:`mindforge.trainer.lora.per_token_logps`). It times one forward + backward of a
group of 8 rows sharing a 600-token prompt, each with a 24-token reply, against the same
batch run whole (``share_prefix=False``: the trainer before), at every core in float32.

Run on demand (needs the ``train`` extra and the bundled model)::

    .venv/bin/python benchmarks/bench_train_cpu.py [--repeats 2]
    .venv/bin/python benchmarks/bench_train_cpu.py --mode prefix
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


def prefix_seconds(model, *, shared: bool, repeats: int, group: int = 8, prompt: int = 600, reply: int = 24) -> float:
    """Median seconds of one forward + backward of a group, its shared prompt run once (``shared``) or per row."""
    import statistics

    import torch

    from mindforge.trainer import lora

    gen = torch.Generator().manual_seed(1)
    head = torch.randint(0, 40_000, (1, prompt), generator=gen).expand(group, -1)
    ids = torch.cat([head, torch.randint(0, 40_000, (group, reply), generator=gen)], dim=1)
    mask = torch.ones_like(ids)
    times = []
    for i in range(repeats + 1):
        started = time.perf_counter()
        lora.per_token_logps(model, ids, mask, prompt, share_prefix=shared).sum().backward()
        model.zero_grad(set_to_none=True)
        if i:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import lora

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per setting (median)")
    parser.add_argument("--mode", choices=["threads", "prefix"], default="threads")
    args = parser.parse_args(argv)
    base = Path(resolve_model("smollm2").hf_dir)
    model = lora.wrap_lora(lora.load_base(base, torch.device("cpu"), torch.float32), TrainerConfig(), None)
    model.train()
    if args.mode == "prefix":
        torch.set_num_threads(os.cpu_count() or 1)
        apart = prefix_seconds(model, shared=False, repeats=args.repeats)
        once = prefix_seconds(model, shared=True, repeats=args.repeats)
        print(f"=== bench_train_cpu --mode prefix (SmolLM2-135M + LoRA r16, a group of 8 rows: 600-token prompt + "
              f"24-token reply, {os.cpu_count()} threads, float32) ===")
        print(f"the batch run whole (baseline): {apart:.1f} s per forward + backward")
        print(f"shared prompt run once: {once:.1f} s ({apart / once:.2f}x the baseline)")
        return 0
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
