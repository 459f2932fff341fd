"""Benchmark: the Update's GRPO training of SmolLM2-135M with LoRA on the CPU - precision, shared prompt, iteration.

``--mode update`` (the default) trains one synthetic Update iteration shaped like a
library contract's rollouts - ``--groups`` groups of ``--group`` samples, each group
sharing a ``--prompt``-token first prompt (system turn, worked examples, instruction),
then ``--turns`` model replies of ``--reply`` tokens with ``--obs``-token observations
between them; rewards 1, 0, 1, 0 in each group. The tokens are slices of this
repository's ``docs/*.md`` (real text: a step's cost does not depend on the tokens, but the
log-probabilities bfloat16 must match do, and random ids give a model's extreme ones). The
rollout log-probs are the float32 base's, as a rollout engine records them. Three settings
train the same samples from the same initial adapter, in one process, their optimizer
steps interleaved (the order rotating each step) so that load from other processes hits
them alike:

- ``old``: the trainer before - float32, and above ``checkpoint_above_tokens`` (1,024)
  activation checkpointing with every row run whole (``share_prompt`` off): the baseline;
- ``fp32``: float32, checkpointed, the shared prompt run once (:mod:`mindforge.trainer.prefix`);
- ``bf16``: the same under bfloat16 autocast (:func:`mindforge.trainer.lora.autocast_dtype`).

Each takes the steps of 2 epochs (``batch_size`` 8). It prints per setting: seconds per
optimizer step (median), the most a step raised the resident memory (``VmHWM`` reset
before each step, less ``VmRSS`` then: its activations, logits and gradients),
seconds per iteration (one model load + its steps + one adapter save, as
:func:`~mindforge.trainer.grpo.train_grpo` spends them), each step's loss as training saw
it, and the loss of the trained adapter read in float32 on all samples. Ratios are against
``old`` and ``fp32``. **Equal loss** (stated before measuring): bfloat16's float32-read loss
within :data:`LOSS_TOL_REL` of float32's progress (its loss drop from the start), and its
log-probabilities at the start within :data:`LOGP_TOL` nats a model token on average. The
step losses under bfloat16 are not the measure: a bfloat16 forward rounds away a LoRA
update smaller than about 0.4% of a layer's output, so the ratios it sees lag the policy
float32 serves. Then the tiny test model's step time under both precisions (why it stays
float32), and the ``TrainerConfig`` defaults' setting and seconds per iteration.

``--mode threads`` times one forward + backward at 1 thread and at every core, float32 and
bfloat16 autocast; ``--mode prefix`` a group of 8 rows sharing a 600-token prompt, run
whole against the prompt run once (no checkpointing). Epochs are measured by
``benchmarks/bench_train_epochs.py``.

Run on demand (needs the ``train`` extra and the bundled model; ``--mode update`` about
8 minutes on 2 shared cores)::

    .venv/bin/python benchmarks/bench_train_cpu.py [--threads 1]
    .venv/bin/python benchmarks/bench_train_cpu.py --settings bf16 --group 8 --prompt 3000   # long prompts' memory
    .venv/bin/python benchmarks/bench_train_cpu.py --mode threads [--repeats 2]
    .venv/bin/python benchmarks/bench_train_cpu.py --mode prefix
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: equal loss: bfloat16's trained adapter, read in float32, within this fraction of float32's
#: progress (its loss drop from the start of training)
LOSS_TOL_REL = 0.10
#: equal log-probabilities: mean |log p(bf16) - log p(fp32)| over model tokens at the start, nats
#: (a quarter of the PPO clip range 0.2, far inside the IcePop band [0.5, 5])
LOGP_TOL = 0.05
#: the settings of ``--mode update``: TrainerConfig overrides
SETTINGS: dict[str, dict[str, Any]] = {
    "old": {"use_bf16": False, "share_prompt": False, "epochs": 2},
    "fp32": {"use_bf16": False, "epochs": 2},
    "bf16": {"use_bf16": True, "epochs": 2},
}


def iteration_samples(args: argparse.Namespace, pool: list[int], seed: int = 0) -> list[Any]:
    """The synthetic iteration: ``groups`` x ``group`` samples, each group one shared prompt (see module doc).

    Args:
        args: the sizes (``groups``, ``group``, ``prompt``, ``turns``, ``reply``, ``obs``).
        pool: token ids the slices are cut from.
    """
    import random

    from mindforge.trainer.samples import TrainingSample

    rng = random.Random(seed)

    def cut(n: int) -> list[int]:
        start = rng.randrange(0, len(pool) - n)
        return pool[start : start + n]

    samples = []
    for g in range(args.groups):
        prompt = cut(args.prompt)
        for k in range(args.group):
            ids, mask = list(prompt), [0] * args.prompt
            for turn in range(args.turns):
                if turn:
                    ids, mask = ids + cut(args.obs), mask + [0] * args.obs
                ids, mask = ids + cut(args.reply), mask + [1] * args.reply
            samples.append(TrainingSample(
                sample_id=f"g{g}/{k}", group_id=f"g{g}", reward=float(k % 2 == 0), input_ids=ids, loss_mask=mask,
                rollout_logprobs=[0.0] * len(ids), has_rollout_logprobs=False, source="recorded",
            ))  # fmt: skip
    return samples


def peak_reset() -> bool:
    """Reset this process's peak resident memory (``VmHWM``); False where the kernel refuses."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def memory_gb(field: str) -> float:
    """This process's ``VmRSS`` (resident now) or ``VmHWM`` (peak since the last :func:`peak_reset`), GB."""
    match = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    kib = int(match.group(1)) if match else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1e6


class Setting:
    """One setting's model, optimizer, precision and what its steps measured."""

    def __init__(self, name: str, hf_dir: Path) -> None:
        import torch

        from mindforge.payloads.training import TrainerConfig
        from mindforge.trainer import grpo, lora

        self.name, self.config = name, TrainerConfig(**SETTINGS[name])
        began = time.perf_counter()
        self.model = lora.wrap_lora(lora.load_base(hf_dir, torch.device("cpu"), torch.float32), self.config)
        self.load_sec = time.perf_counter() - began
        self.compute = lora.autocast_dtype(self.model, torch.device("cpu"), self.config.use_bf16)
        self.optimizer = grpo.make_optimizer(self.model, self.config)
        self.step_sec: list[float] = []
        self.losses: list[float] = []
        self.peak: list[float] = []

    def step(self, samples: list[Any], advantages: list[float], pad_id: int) -> None:
        """One optimizer step on ``samples``, timed, its peak memory read."""
        import torch

        from mindforge.trainer import grpo

        self.model.train()
        before = memory_gb("VmRSS")
        reset = peak_reset()
        began = time.perf_counter()
        stats = grpo.grpo_step(self.model, self.optimizer, samples, advantages, self.config, pad_id=pad_id,
                               device=torch.device("cpu"), compute_dtype=self.compute)  # fmt: skip
        self.step_sec.append(time.perf_counter() - began)
        self.losses.append(stats.loss)
        self.peak.append(memory_gb("VmHWM") - before if reset else float("nan"))


def read_loss(model: Any, samples: list[Any], advantages: list[float], config: Any, pad_id: int) -> float:
    """The GRPO loss (token mean) of ``model`` on ``samples``, read in float32 without gradient."""
    import torch

    from mindforge.trainer import grpo

    model.eval()
    loss, tokens = 0.0, 0
    with torch.no_grad():
        for g in sorted({s.group_id for s in samples}):
            rows = [i for i, s in enumerate(samples) if s.group_id == g]
            batch = grpo.collate([samples[i] for i in rows], [advantages[i] for i in rows], pad_id, torch.device("cpu"))
            parts = grpo.grpo_loss(model, batch, config)
            loss, tokens = loss + float(parts.loss_sum), tokens + parts.tokens
    return loss / tokens


def prepared(args: argparse.Namespace, hf_dir: Path) -> tuple[list[Any], float, int]:
    """The samples with the float32 base's log-probs recorded, mean |bf16 - fp32| log-prob a model token, pad id."""
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import grpo, lora

    tokenizer = lora.load_tokenizer(hf_dir)
    docs = sorted((Path(__file__).resolve().parents[1] / "docs").glob("*.md"))
    pool = tokenizer("\n".join(p.read_text(encoding="utf-8") for p in docs))["input_ids"]
    model = lora.wrap_lora(lora.load_base(hf_dir, torch.device("cpu"), torch.float32), TrainerConfig())
    model.eval()
    samples = iteration_samples(args, pool)
    pad, cpu = tokenizer.pad_token_id, torch.device("cpu")
    fp32 = grpo.fill_rollout_logprobs(model, samples, pad, cpu, args.group)
    bf16 = grpo.fill_rollout_logprobs(model, samples, pad, cpu, args.group, compute_dtype=torch.bfloat16)
    diffs = [
        abs(a - b)
        for s32, s16 in zip(fp32, bf16, strict=True)
        for a, b, m in zip(s32.rollout_logprobs, s16.rollout_logprobs, s32.loss_mask, strict=True)
        if m
    ]
    return fp32, statistics.fmean(diffs), pad


def update_mode(args: argparse.Namespace) -> int:
    """``--mode update``: the three settings' steps interleaved in this process; the comparison table."""
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import grpo, lora
    from mindforge.trainer.batching import group_order

    began = time.monotonic()
    hf_dir = Path(resolve_model("smollm2").hf_dir)
    samples, logp_diff, pad = prepared(args, hf_dir)
    settings = [Setting(name, hf_dir) for name in args.settings.split(",")]
    config = settings[0].config
    advantages = grpo.group_advantages([s.reward for s in samples], [s.group_id for s in samples], config.adv_eps)
    start_loss = read_loss(settings[0].model, samples, advantages, config, pad)
    generator = torch.Generator().manual_seed(config.seed)
    step = 0
    for _epoch in range(config.epochs):
        order = group_order([s.group_id for s in samples], generator)
        for first in range(0, len(order), config.batch_size):
            chosen = order[first : first + config.batch_size]
            for k in range(len(settings)):  # rotate, so that no setting always goes first
                setting = settings[(k + step) % len(settings)]
                setting.step([samples[i] for i in chosen], [advantages[i] for i in chosen], pad)
            step += 1
            print(f"  step {step}: " + ", ".join(f"{s.name} {s.step_sec[-1]:.1f} s" for s in settings), flush=True)
    with tempfile.TemporaryDirectory() as out:
        saved = time.perf_counter()
        settings[-1].model.save_pretrained(out, save_embedding_layers=False)
        save_sec = time.perf_counter() - saved
    read = {s.name: read_loss(s.model, samples, advantages, config, pad) for s in settings}
    chosen_name = next((s.name for s in settings if s.config == TrainerConfig()), None)
    tiny = tiny_step_ms()
    print_update(args, settings, read, start_loss, logp_diff, save_sec, tiny, chosen_name)
    print(f"native bfloat16 on this CPU: {'yes' if lora.cpu_has_native_bf16() else 'no'}; torch threads "
          f"{torch.get_num_threads()}; wall time {time.monotonic() - began:.0f} s")  # fmt: skip
    return 0


def tiny_step_ms(repeats: int = 5) -> dict[str, float]:
    """Median milliseconds of one GRPO step of the tiny test model, float32 and bfloat16 autocast, interleaved."""
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.doubles.tiny import build_tiny_model
    from mindforge.trainer import grpo, lora

    cpu = torch.device("cpu")
    times: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "tiny")
        ns = argparse.Namespace(groups=2, group=4, prompt=200, turns=2, reply=24, obs=48)
        config = TrainerConfig(lora_rank=4, lora_alpha=8)
        model = lora.wrap_lora(lora.load_base(path, cpu, torch.float32), config)
        samples = grpo.fill_rollout_logprobs(model, iteration_samples(ns, list(range(100, 1500))), 0, cpu, 4)
        adv = grpo.group_advantages([s.reward for s in samples], [s.group_id for s in samples])
        optimizer = grpo.make_optimizer(model, config)
        for i in range(repeats + 1):
            for label, dtype in (("float32", None), ("bfloat16", torch.bfloat16)):
                began = time.perf_counter()
                grpo.grpo_step(model, optimizer, samples, adv, config, pad_id=0, device=cpu, compute_dtype=dtype)
                if i:
                    times[label].append(time.perf_counter() - began)
    return {label: 1000 * statistics.median(t) for label, t in times.items()}


def print_update(
    args: argparse.Namespace, settings: list[Setting], read: dict[str, float], start: float, logp_diff: float,
    save_sec: float, tiny: dict[str, float], chosen: str | None,
) -> None:
    """The ``--mode update`` table and verdicts (those whose settings ran)."""
    length = args.prompt + args.turns * args.reply + (args.turns - 1) * args.obs
    print(f"\n=== bench_train_cpu --mode update (SmolLM2-135M + LoRA r16, {os.cpu_count()} cores): "
          f"{args.groups} group(s) x {args.group} samples of {length} tokens, {args.prompt}-token shared prompt, "
          f"{args.turns} replies of {args.reply}; 2 epochs, steps interleaved ===")  # fmt: skip
    print(f"{'setting':<7} {'compute':<9} {'s/step':>7} {'x old':>6} {'x fp32':>6} {'step GB':>7} {'s/iter':>7} "
          f"{'x old':>6} {'f32-read loss':>13}  step losses as trained")  # fmt: skip
    by = {s.name: s for s in settings}
    per_step = {s.name: statistics.median(s.step_sec) for s in settings}
    per_iter = {s.name: s.load_sec + sum(s.step_sec) + save_sec for s in settings}

    def times(table: dict[str, float], base: str, name: str) -> str:
        return f"{table[base] / table[name]:>5.2f}x" if base in table else f"{'-':>6}"

    for s in settings:
        compute = str(s.compute or "torch.float32").removeprefix("torch.")
        print(f"{s.name:<7} {compute:<9} {per_step[s.name]:>7.1f} {times(per_step, 'old', s.name)} "
              f"{times(per_step, 'fp32', s.name)} {max(s.peak):>7.2f} {per_iter[s.name]:>7.1f} "
              f"{times(per_iter, 'old', s.name)} {read[s.name]:>+13.4f}  "
              f"{' '.join(f'{x:+.4f}' for x in s.losses)}")  # fmt: skip
    print(f"start loss {start:+.4f}; mean |log p difference| bf16 - fp32 at the start {logp_diff:.4f} nats a "
          f"model token (tolerance {LOGP_TOL})")  # fmt: skip
    if {"fp32", "bf16"} <= by.keys():
        progress = start - read["fp32"]
        gap = abs(read["bf16"] - read["fp32"])
        equal = gap <= LOSS_TOL_REL * abs(progress) and logp_diff <= LOGP_TOL
        faster = per_step["bf16"] < per_step["fp32"]
        print(f"bf16 vs fp32: read-loss gap {gap:.4f} = {gap / abs(progress):.1%} of fp32's progress {progress:.4f} "
              f"(tolerance {LOSS_TOL_REL:.0%}): equal loss {'yes' if equal else 'NO'}, faster "
              f"{'yes' if faster else 'NO'} -> {'bf16' if equal and faster else 'fp32'}")  # fmt: skip
    if {"old", "fp32"} <= by.keys():
        print(f"shared prompt vs rows whole, both checkpointed in fp32: read-loss gap "
              f"{abs(read['old'] - read['fp32']):.1e} (same math), {per_step['old'] / per_step['fp32']:.2f}x the "
              f"speed, a step's memory {max(by['fp32'].peak):.2f} vs {max(by['old'].peak):.2f} GB")  # fmt: skip
    print(f"tiny test model, one GRPO step: float32 {tiny['float32']:.1f} ms, bfloat16 autocast "
          f"{tiny['bfloat16']:.1f} ms ({tiny['float32'] / tiny['bfloat16']:.2f}x the speed)")  # fmt: skip
    if chosen and "old" in by:
        print(f"the TrainerConfig defaults are {chosen}: {per_iter[chosen]:.1f} s an iteration, "
              f"{per_iter['old'] / per_iter[chosen]:.2f}x faster than old ({per_iter['old']:.1f} s)")  # fmt: skip
    else:
        print(f"the TrainerConfig defaults are {chosen or 'none of the settings run'}")


def step_seconds(model, ids, mask, first: int, *, threads: int, bf16: bool, repeats: int) -> float:
    """Median seconds of one forward + backward through ``per_token_logps`` (after one warm-up)."""
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


def forward_modes(args: argparse.Namespace) -> int:
    """``--mode threads`` and ``--mode prefix``: one forward + backward, timed in this process."""
    import torch

    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import lora

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
    print(f"=== bench_train_cpu --mode threads (SmolLM2-135M + LoRA r16, 4 x 900 tokens, {cores} cores) ===")
    print(f"1 thread, float32 (baseline): {baseline:.1f} s per forward + backward")
    for threads in sorted({1, cores}):
        for bf16 in (False, True):
            if threads == 1 and not bf16:
                continue
            secs = step_seconds(model, ids, mask, 800, threads=threads, bf16=bf16, repeats=args.repeats)
            label = "bfloat16 autocast" if bf16 else "float32"
            print(f"{threads} thread(s), {label}: {secs:.1f} s ({baseline / secs:.2f}x the baseline)")
    return 0


def main(argv: list[str] | None = None) -> int:
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["update", "threads", "prefix"], default="update")
    parser.add_argument("--repeats", type=int, default=2, help="threads/prefix: timed passes per setting (median)")
    parser.add_argument("--groups", type=int, default=1, help="update: groups in the iteration")
    parser.add_argument("--group", type=int, default=4, help="update: samples a group")
    parser.add_argument("--prompt", type=int, default=1100, help="update: shared prompt tokens (> 1,024)")
    parser.add_argument("--turns", type=int, default=2, help="update: model replies a sample")
    parser.add_argument("--reply", type=int, default=32, help="update: tokens a reply")
    parser.add_argument("--obs", type=int, default=64, help="update: tokens an observation")
    parser.add_argument("--threads", type=int, default=None, help="update: torch threads (default: every core)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"update: which of {','.join(SETTINGS)} run")
    args = parser.parse_args(argv)
    unknown = set(args.settings.split(",")) - SETTINGS.keys()
    if unknown:
        parser.error(f"unknown settings {sorted(unknown)}")
    if args.mode == "update":
        import torch

        torch.set_num_threads(args.threads or os.cpu_count() or 1)
        return update_mode(args)
    return forward_modes(args)


if __name__ == "__main__":
    raise SystemExit(main())
