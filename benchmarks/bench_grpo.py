"""GRPO step cost vs its floor: tokens/s and peak memory, same model, same token batch.

Two measurements on one batch of synthetic multi-turn trajectories (prompt, then
alternating model completions and observations, so the loss mask has several spans):

- ``grpo``: one full optimizer step of :func:`mindforge.trainer.grpo.grpo_step`
  (log-probs from ``logits_to_keep``, ratio to the rollout log-probs, clip, IcePop
  masks, optional k3 KL via a second forward with the adapter disabled, gradient
  normalisation, clipping, AdamW);
- ``floor``: one plain forward + backward of the same LoRA model on the same token
  batch (mean cross-entropy over all tokens), no GRPO bookkeeping and no optimizer.

Step times are measured in one child process with the two modes interleaved (so load
from other processes hits both alike); peak memory in one child process per mode, so
that it is its own: on CPU the ``ru_maxrss`` rise over the steps (resident set,
includes allocator slack); on CUDA ``torch.cuda.max_memory_allocated`` above the
pre-step allocation. Times are medians over
``--repeats`` steps after ``--warmup``; throughput counts all non-pad tokens of the
batch. Prints the results and the grpo/floor ratios; asserts nothing.

Usage::

    .venv/bin/python benchmarks/bench_grpo.py            # tiny model, CPU or CUDA
    .venv/bin/python benchmarks/bench_grpo.py --model PATH --batch 8 --seq-len 2048
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ARG_NAMES = ("batch", "seq_len", "turns", "rank", "kl_coef", "repeats", "warmup")


def synthetic_samples(vocab: int, batch: int, seq_len: int, turns: int, seed: int):
    """``batch`` samples of ``seq_len`` tokens: a prompt, then ``turns`` completion/observation pairs."""
    from mindforge.trainer.samples import TrainingSample

    rng = random.Random(seed)
    samples = []
    for i in range(batch):
        prompt = seq_len // 4
        segment = (seq_len - prompt) // (2 * turns)
        mask = [0] * prompt
        for _ in range(turns):
            mask += [1] * segment + [0] * segment
        mask = (mask + [0] * seq_len)[:seq_len]
        while mask[-1] == 0:  # end on the last model token, as built samples do
            mask.pop()
        ids = [rng.randrange(3, vocab) for _ in mask]
        samples.append(
            TrainingSample(
                sample_id=f"s{i}",
                group_id=f"g{i // 4}",
                reward=float(i % 2),
                input_ids=ids,
                loss_mask=mask,
                rollout_logprobs=[0.0] * len(ids),
                has_rollout_logprobs=False,
                source="recorded",
            )
        )
    return samples


def _peak_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _setup(model_path: str, args: dict):
    """Load the LoRA model and the batch; return ``(steps, device, compute dtype, tokens)``.

    The precision is the one :func:`mindforge.trainer.grpo.train_grpo` chooses (bfloat16
    autocast on a CPU with native bfloat16 for a model that is not tiny), for both modes.
    """
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)

    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import grpo, lora

    torch.manual_seed(0)
    config = TrainerConfig(
        lora_rank=args["rank"], batch_size=args["batch"], kl_coef=args["kl_coef"], max_seq_len=args["seq_len"] + 1
    )
    device, dtype = lora.pick_device(config.use_bf16)
    tokenizer = lora.load_tokenizer(Path(model_path))
    model = lora.wrap_lora(lora.load_base(Path(model_path), device, dtype), config)
    compute = lora.autocast_dtype(model, device, config.use_bf16)  # as train_grpo chooses
    pad = tokenizer.pad_token_id
    samples = synthetic_samples(len(tokenizer), args["batch"], args["seq_len"], args["turns"], seed=1)
    model.eval()
    samples = grpo.fill_rollout_logprobs(model, samples, pad, device, args["batch"])
    advantages = grpo.group_advantages([s.reward for s in samples], [s.group_id for s in samples])
    model.train()
    optimizer = grpo.make_optimizer(model, config)
    batch = grpo.collate(samples, advantages, pad, device)

    def floor_step() -> None:
        model.zero_grad(set_to_none=True)
        with lora.autocast(device, compute):
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(), batch.input_ids[:, 1:].flatten(), reduction="mean"
        )
        loss.backward()

    def grpo_step() -> None:
        grpo.grpo_step(model, optimizer, samples, advantages, config, pad_id=pad, device=device, compute_dtype=compute)

    return {"floor": floor_step, "grpo": grpo_step}, device, compute or dtype, int(batch.attention_mask.sum())


def _child_timing(model_path: str, args: dict) -> dict:
    """Median step time of both modes, interleaved so that load from other processes hits both alike."""
    import torch

    steps, device, dtype, tokens = _setup(model_path, args)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {mode: [] for mode in steps}
    for i in range(args["warmup"] + args["repeats"]):
        for mode, step in steps.items():
            sync()
            began = time.perf_counter()
            step()
            sync()
            if i >= args["warmup"]:
                times[mode].append(time.perf_counter() - began)
    device_name = f"{device.type}/{str(dtype).removeprefix('torch.')}"
    return {
        mode: {"device": device_name, "median_sec": statistics.median(t), "tokens": tokens} for mode, t in times.items()
    }


def _child_memory(mode: str, model_path: str, args: dict) -> dict:
    """Peak memory rise (MB) over ``warmup + 1`` steps of one mode, in a process of its own."""
    import torch

    steps, device, _dtype, _tokens = _setup(model_path, args)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated() / 2**20
    else:
        baseline = _peak_mb(device)
    for _ in range(args["warmup"] + 1):
        steps[mode]()
    return {"peak_mem_mb": _peak_mb(device) - baseline}


def _run_child(child: str, model_path: Path, ns: argparse.Namespace) -> dict:
    """Run one measurement in a fresh interpreter (so that its peak memory is its own)."""
    cmd = [sys.executable, __file__, "--child", child, "--model", str(model_path)]
    for name in ARG_NAMES:
        cmd += [f"--{name.replace('_', '-')}", str(getattr(ns, name))]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{child} measurement failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="base model directory (default: build the tiny model)")
    parser.add_argument("--batch", type=int, default=8, help="trajectories per step")
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per trajectory")
    parser.add_argument("--turns", type=int, default=3, help="model turns per trajectory")
    parser.add_argument("--rank", type=int, default=16, help="LoRA rank")
    parser.add_argument("--kl-coef", type=float, default=0.0, help="> 0 adds the base-model reference forward")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--child", choices=("timing", "floor", "grpo"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        args = {k: getattr(ns, k) for k in ARG_NAMES}
        if ns.child == "timing":
            print(json.dumps(_child_timing(str(ns.model), args)))
        else:
            print(json.dumps(_child_memory(ns.child, str(ns.model), args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        model_path = ns.model
        if model_path is None:
            from mindforge.policy.doubles.tiny import build_tiny_model

            model_path = build_tiny_model(Path(tmp) / "tiny")
        results = _run_child("timing", model_path, ns)
        for mode, r in results.items():
            r.update(_run_child(mode, model_path, ns), mode=mode, tokens_per_sec=r["tokens"] / r["median_sec"])
    print(
        f"model={model_path} batch={ns.batch} seq_len={ns.seq_len} turns={ns.turns} rank={ns.rank} "
        f"kl_coef={ns.kl_coef} repeats={ns.repeats}"
    )
    print(f"{'mode':<6} {'device':<14} {'median s/step':>14} {'tokens/s':>12} {'peak mem MB':>12}")
    for r in results.values():
        print(
            f"{r['mode']:<6} {r['device']:<14} {r['median_sec']:>14.4f} {r['tokens_per_sec']:>12.0f} "
            f"{r['peak_mem_mb']:>12.1f}"
        )
    floor, step = results["floor"], results["grpo"]
    mem_ratio = step["peak_mem_mb"] / floor["peak_mem_mb"] if floor["peak_mem_mb"] > 0 else float("nan")
    print(
        f"ratio grpo/floor: time {step['median_sec'] / floor['median_sec']:.2f}x, "
        f"throughput {step['tokens_per_sec'] / floor['tokens_per_sec']:.2f}x, peak memory {mem_ratio:.2f}x"
    )


if __name__ == "__main__":
    main()
