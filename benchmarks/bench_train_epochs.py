"""Benchmark: how many epochs an Update iteration should take - held-out success log-likelihood per second.

An iteration's samples can be passed over more than once (``TrainerConfig.epochs``); each
pass costs training time that a fresh iteration - new rollouts from the updated policy,
then its own first pass - could use instead. This measures what each pass buys, on the
real model with the product's code, and says which count makes the most of a second.

**Chores made for the purpose, never a bundled task**: ``bench_grpo_sweep``'s single-turn
chores ("reply with exactly the word X", "what is a + b"; reward 1 for exactly the
answer, partial credit otherwise). Per seed: ``G`` completions of each chore are drawn from
SmolLM2-135M-Instruct (the smollm2 contract's temperature and top-p; the iteration's
rollouts, their log-probs recorded by the float32 base), and a second, independent draw
whose successes are **held out**: its completions with a positive advantage in their group
(the ones GRPO pushes up - the base rarely replies with exactly the answer, so these are
mostly replies that hold it). A fresh LoRA adapter is trained on the
first draw's groups with signal by :func:`mindforge.trainer.grpo.train_steps` (the
``TrainerConfig`` defaults but ``epochs``; the precision :func:`train_grpo` would choose)
for ``--max-epochs`` passes; after each pass the mean log-likelihood per completion token
of the held-out successes is read (float32, no gradient; not counted in the training
time). The figure of merit:

- ``gain(E)``: held-out success log-likelihood after E passes minus the base's, nats a token
  (mean over seeds);
- per second of an iteration: ``gain(E) / (R + E x T)``, with ``R`` the seconds an
  iteration's rollouts take and ``T`` the seconds one pass of its training takes in the
  product (``--rollout-sec``, ``--epoch-sec``; defaults and their sources in ``--help``).
  The chosen epoch count is the E with the highest rate: beyond it another pass over the
  same samples buys less per second than the loop's average, and the time is better left
  to the next iteration or stage.

It also prints the rate per second of this run's own training (``gain(E) / E x t``, t the
measured seconds of a pass here), which does not depend on R and T.

Run on demand (needs the ``train`` extra; about 4 minutes on 2 shared cores)::

    .venv/bin/python benchmarks/bench_train_epochs.py [--seeds 3] [--max-epochs 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def success_loglik(model: Any, samples: list[Any], pad_id: int) -> float:
    """Mean log-likelihood per completion token of ``samples`` under ``model`` (float32, no gradient)."""
    import torch

    from mindforge.trainer import grpo, lora

    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(samples), 8):
            chunk = samples[start : start + 8]
            batch = grpo.collate(chunk, [0.0] * len(chunk), pad_id, torch.device("cpu"))
            logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first)
            total += float((logp * batch.loss_mask).sum())
            tokens += int(batch.loss_mask.sum())
    model.train(was_training)
    return total / tokens


def one_seed(seed: int, hf_dir: Path, sampler: Any, base: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    """Draw, hold out, train ``max_epochs`` passes; held-out log-likelihood and training seconds after each."""
    import torch

    from benchmarks.bench_grpo_sweep import SUMS, WORDS, chores
    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import grpo, lora

    tasks = chores(WORDS, SUMS)
    torch.manual_seed(seed * 1000)
    base.eval()
    drawn = [s for i, c in enumerate(tasks) for s in sampler.group(base, c, args.group, f"g{i}")]
    torch.manual_seed(seed * 1000 + 1)
    second = [s for i, c in enumerate(tasks) for s in sampler.group(base, c, args.group, f"h{i}")]
    config = TrainerConfig(epochs=args.max_epochs, seed=seed)
    second_adv = grpo.group_advantages([s.reward for s in second], [s.group_id for s in second], config.adv_eps)
    held = [s for s, a in zip(second, second_adv, strict=True) if a > 0]
    advantages = grpo.group_advantages([s.reward for s in drawn], [s.group_id for s in drawn], config.adv_eps)
    used = [i for i, a in enumerate(advantages) if a != 0.0]
    if not used or not held:
        return None
    pad, cpu = sampler.tokenizer.pad_token_id, torch.device("cpu")
    model = lora.wrap_lora(lora.load_base(hf_dir, cpu, torch.float32), config)
    compute = lora.autocast_dtype(model, cpu, config.use_bf16)
    samples = grpo.fill_rollout_logprobs(model, [drawn[i] for i in used], pad, cpu, 8)
    per_epoch = -(-len(samples) // config.batch_size)
    curve = [success_loglik(model, held, pad)]
    seconds = [0.0]
    clock = {"last": time.perf_counter()}

    def on_step(step: int, _loss: float, _stats: dict) -> None:
        if step % per_epoch == 0:
            seconds.append(seconds[-1] + time.perf_counter() - clock["last"])
            curve.append(success_loglik(model, held, pad))
            clock["last"] = time.perf_counter()

    grpo.train_steps(model, samples, [advantages[i] for i in used], config, pad_id=pad, device=cpu,
                     progress_cb=on_step, compute_dtype=compute)  # fmt: skip
    return {"curve": curve, "seconds": seconds, "samples": len(samples), "held": len(held), "steps": per_epoch,
            "compute": str(compute or torch.float32).removeprefix("torch.")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import warnings

    import torch
    from transformers.utils import logging as hf_logging

    from benchmarks.bench_grpo_sweep import Sampler
    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import lora

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="independent draws (each its own adapter)")
    parser.add_argument("--max-epochs", type=int, default=4)
    parser.add_argument("--group", type=int, default=8, help="completions a chore (G)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every core)")
    parser.add_argument("--rollout-sec", type=float, default=60.0,
                        help="R: an iteration's rollouts in the product (60 s: the main job's Update drew 16 "
                             "rollouts at 16.1 a minute, ../shared/MEASURED.md, 2026-12-05)")  # fmt: skip
    parser.add_argument("--epoch-sec", type=float, default=32.0,
                        help="T: one pass of an iteration's training in the product (32 s: 2 groups of 4 samples "
                             "of 1,228 tokens at 16.2 s a group at the chosen settings, bench_train_cpu "
                             "--threads 1, 2026-12-05)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    began = time.monotonic()
    hf_dir = Path(resolve_model("smollm2").hf_dir)
    sampler = Sampler(lora.load_tokenizer(hf_dir), args.max_new_tokens)
    base = lora.load_base(hf_dir, torch.device("cpu"), torch.float32)
    runs = []
    for seed in range(args.seeds):
        run = one_seed(seed, hf_dir, sampler, base, args)
        print(f"  seed {seed}: {run}", flush=True)
        if run is not None:
            runs.append(run)
    if not runs:
        print("no draw had a group with signal and a held-out success")
        return 1
    report(runs, args, time.monotonic() - began)
    return 0


def report(runs: list[dict[str, Any]], args: argparse.Namespace, wall: float) -> None:
    """The per-epoch table (means over seeds) and the chosen epoch count."""
    print(f"\n=== bench_train_epochs (SmolLM2-135M-Instruct, {len(runs)} seeds x 12 chores x G={args.group}, "
          f"{runs[0]['compute']} forwards; held-out successes {[r['held'] for r in runs]}, trained samples "
          f"{[r['samples'] for r in runs]}) ===")  # fmt: skip
    print(f"R = {args.rollout_sec:g} s rollouts, T = {args.epoch_sec:g} s a pass in the product")
    print(f"{'epochs':>6} {'gain nats/tok':>13} {'marginal':>9} {'train s here':>12} {'gain/s here':>11} "
          f"{'gain/s of an iteration':>22}")  # fmt: skip
    rates, mean_gain = {}, {}
    for e in range(1, args.max_epochs + 1):
        gains = [r["curve"][e] - r["curve"][0] for r in runs]
        mean_gain[e] = statistics.fmean(gains)
        marginal = statistics.fmean(r["curve"][e] - r["curve"][e - 1] for r in runs)
        secs = statistics.fmean(r["seconds"][e] for r in runs)
        gain = statistics.fmean(gains)
        rates[e] = gain / (args.rollout_sec + e * args.epoch_sec)
        spread = f" [{min(gains):+.3f}, {max(gains):+.3f}]" if len(gains) > 1 else ""
        print(f"{e:>6} {gain:>+8.3f}{spread} {marginal:>+9.3f} {secs:>12.1f} {gain / secs:>+11.4f} "
              f"{rates[e]:>+22.5f}")  # fmt: skip
    best = max(rates, key=lambda e: rates[e])
    print(f"most held-out log-likelihood a second of an iteration: {best} epoch(s)")
    print("best epoch count by R/T (rollout seconds over a pass's): " + best_by_ratio(mean_gain))
    print(f"wall time {wall:.0f} s")


def best_by_ratio(gain: dict[int, float]) -> str:
    """Which epoch count maximises ``gain(E) / (R + E x T)`` for R/T from 0.01 to 100 (log grid), as ranges."""
    ratios = [10 ** (k / 20) for k in range(-40, 41)]

    def best(ratio: float) -> int:  # rate x T = gain / (R/T + E)
        return max(gain, key=lambda e: gain[e] / (ratio + e))

    picks = [best(x) for x in ratios]
    spans, start = [], 0
    for i in range(1, len(ratios) + 1):
        if i == len(ratios) or picks[i] != picks[start]:
            spans.append(f"{picks[start]} for {ratios[start]:.2g}..{ratios[i - 1]:.2g}")
            start = i
    return "; ".join(spans)


if __name__ == "__main__":
    raise SystemExit(main())
