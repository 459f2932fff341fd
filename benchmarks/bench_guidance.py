"""Benchmark: does off-policy guidance teach SmolLM2 the guided tasks? Guide log-probabilities, by guide loss.

Reads a lineage that ran ``benchmarks/bench_update.py --guidance`` (its store rows, its
rollouts' ATIF trajectories and the guides its Update wrote under
``<artifacts>/guides/<lineage>/``) and measures, on the search split only:

- ``--mode adapter`` (default): for each guided task, the log-probability (nats, summed
  over the reply tokens) of its guide's replies under the base weights and under the
  lineage's registered adapter - did training make the validated solution likelier?
  And each guided task's rollouts passed per policy version;
- ``--mode offline``: one training update from the base weights on the lineage's first
  iteration (its rollouts from the base weights plus the guides of its groups that all
  failed), once per guide loss (``TrainerConfig.guide_loss``: ``weighted_nll`` and
  ``luffy_shaping``), each with the product's trainer (:func:`mindforge.trainer.grpo.train_grpo`)
  and the ``TrainerConfig`` defaults: the mean change of the guides' log-probability and
  of the policy's own failed replies', each loss against the other in the same run.

- ``--mode chores`` (no lineage): the same comparison on chores made for the purpose,
  never a bundled task (any task under ``tasks/`` can be a lineage's sealed task, and the
  two modes above read a lineage's search split of the bundled suite): "reply with the
  word X spelled backwards", rewarded by :func:`benchmarks.bench_grpo_sweep.reward`. A
  group of ``G`` completions of each training chore is sampled from the base weights; a
  group that never earned 1 is joined by a guide, the exact answer as an off-policy
  sample (reward 1); then one update per guide loss, as above, and the training and
  held-out chores' mean reward after it (held-out words: none of the training words).

Run on demand (needs the ``train`` extra; the first two after a guided ``bench_update``)::

    .venv/bin/python benchmarks/bench_guidance.py --lineage bu-guided2
    .venv/bin/python benchmarks/bench_guidance.py --lineage bu-guided2 --mode offline
    .venv/bin/python benchmarks/bench_guidance.py --mode chores
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def reply_logprob(model: Any, sample: Any) -> float:
    """Summed log-probability (nats) of ``sample``'s model tokens under ``model``."""
    import torch

    from mindforge.trainer import lora

    ids = torch.tensor([sample.input_ids])
    with torch.no_grad():
        logps = lora.per_token_logps(model, ids, torch.ones_like(ids), sample.loss_mask.index(1))[0]
    return float(logps[torch.tensor(sample.loss_mask, dtype=torch.bool)].sum())


def load_policy(base: Path, adapter: Path | None) -> Any:
    """The base model (float32, CPU), with ``adapter`` applied when given, in eval mode."""
    import torch
    from peft import PeftModel

    from mindforge.trainer import lora

    model = lora.load_base(base, torch.device("cpu"), torch.float32)
    return (PeftModel.from_pretrained(model, str(adapter)) if adapter else model).eval()


def lineage_data(name: str) -> dict[str, Any]:
    """The lineage's rollouts (records and trajectories), its guides by iteration, and its registered adapter."""
    from mindforge.atif import read_trajectory
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import registry, trials

    settings = get_settings()
    with se.session_scope(se.init_db(settings.db_url)) as s:
        rows = trials.list_trials(session=s, lineage_id=name, stage="rollout")
        rollouts = [(r.adapter or "", r.to_record(), r.artifacts.get("trajectory")) for r in rows]
        adapters = registry.list_adapters(session=s, lineage_id=name)
    guides: dict[str, dict[str, Any]] = defaultdict(dict)  # trained adapter -> task id -> guide trajectory
    for path in sorted((settings.artifacts / "guides" / name).rglob("*.json")):
        trajectory = read_trajectory(path)
        guides[path.parent.name][(trajectory.extra or {})["mindforge"]["task_id"]] = trajectory
    return {"rollouts": rollouts, "guides": dict(guides), "adapter": Path(adapters[-1].path) if adapters else None}


def adapter_mode(name: str, base: Path) -> None:
    """Each guided task's guide log-probability under the base and the registered adapter, and its pass counts."""
    from mindforge.trainer import lora
    from mindforge.trainer.guidance import build_guide_samples

    data = lineage_data(name)
    latest: dict[str, Any] = {}
    for _adapter, by_task in sorted(data["guides"].items()):
        latest.update(by_task)
    tokenizer = lora.load_tokenizer(base)
    samples = build_guide_samples([(t, 1.0, task) for task, t in sorted(latest.items())], tokenizer=tokenizer).samples
    base_model = load_policy(base, None)
    before = {s.group_id: reply_logprob(base_model, s) for s in samples}
    trained = load_policy(base, data["adapter"]) if data["adapter"] else None
    passes: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for adapter, record, _path in data["rollouts"]:
        passes[record.task_id][adapter.rsplit("-", 1)[-1] if adapter else "base"].append(int(record.passed))
    print(f"=== bench_guidance --mode adapter ({name}; search split; guide reply log-probability, nats) ===")
    print(f"adapter: {data['adapter']}")
    up = 0
    for s in samples:
        after = reply_logprob(trained, s) if trained is not None else float("nan")
        up += after > before[s.group_id]
        counts = " ".join(f"{v}:{sum(p)}/{len(p)}" for v, p in passes[s.group_id].items())
        print(f"  {s.group_id:28s} base {before[s.group_id]:8.2f} -> adapter {after:8.2f}   rollouts passed {counts}")
    print(f"guides made likelier by the adapter: {up} of {len(samples)}")


def offline_mode(name: str, base: Path) -> None:
    """One update from the base on the first iteration's groups, per guide loss; the guides' and failures' change."""
    from mindforge.atif import read_trajectory
    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import build_samples, lora
    from mindforge.trainer.grpo import train_grpo
    from mindforge.trainer.guidance import build_guide_samples

    data = lineage_data(name)
    first = [(record, path) for adapter, record, path in data["rollouts"] if adapter == "" and path]
    rewards: dict[str, list[float]] = defaultdict(list)
    for record, _path in first:
        rewards[record.task_id].append(float(record.reward or 0.0))
    failed = {task for task, r in rewards.items() if len(r) >= 2 and max(r) < 1.0}
    guides: dict[str, Any] = next((g for a, g in sorted(data["guides"].items()) if a.endswith("-i0")), {})
    tokenizer = lora.load_tokenizer(base)
    rollouts = build_samples(
        [(read_trajectory(Path(p)), float(r.reward or 0.0), r.task_id) for r, p in first], tokenizer=tokenizer
    ).samples
    guided = build_guide_samples(
        [(t, 1.0, task) for task, t in sorted(guides.items()) if task in failed], tokenizer=tokenizer
    ).samples
    failures = [s for s in rollouts if s.group_id in failed]
    base_model = load_policy(base, None)
    g0 = {s.group_id: reply_logprob(base_model, s) for s in guided}
    f0 = sum(reply_logprob(base_model, s) for s in failures) / max(1, len(failures))
    print(f"=== bench_guidance --mode offline ({name}, first iteration: {len(rollouts)} rollouts, {len(guided)} guides "
          f"of {len(failed)} groups that all failed; search split) ===")
    for loss in ("weighted_nll", "luffy_shaping"):
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            result = train_grpo(base, [*rollouts, *guided], TrainerConfig(guide_loss=loss), Path(tmp) / "adapter")
            model = load_policy(base, Path(tmp) / "adapter")
            changes = [reply_logprob(model, s) - g0[s.group_id] for s in guided]
            f1 = sum(reply_logprob(model, s) for s in failures) / max(1, len(failures))
        mean = sum(changes) / max(1, len(changes))
        print(f"{loss}: {result.steps} steps in {time.monotonic() - started:.0f} s; guide log-probability "
              f"{mean:+.2f} nats on average ({sum(c > 0 for c in changes)} of {len(changes)} up); the policy's own "
              f"failed replies {f0:.2f} -> {f1:.2f} nats on average")


#: the chores' words (written here; reversed, they are the answers); held-out words share none with training
CHORE_WORDS = ["planet", "garden", "bottle", "silver", "window", "pencil"]
HELD_OUT_CHORE_WORDS = ["marble", "tunnel", "basket", "copper"]


def chores_mode(base: Path, size: int = 8, seed: int = 0) -> None:
    """Guide losses compared on made-for-purpose chores: guide and failure log-probabilities, rewards after."""
    import statistics

    import torch

    from benchmarks.bench_grpo_sweep import Chore, Sampler
    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer import lora
    from mindforge.trainer.grpo import train_grpo
    from mindforge.trainer.samples import TrainingSample

    def chore(word: str) -> Chore:
        return Chore(f"Reply with the word {word!r} spelled backwards, and nothing else.", word[::-1])

    train, held = [chore(w) for w in CHORE_WORDS], [chore(w) for w in HELD_OUT_CHORE_WORDS]
    tokenizer = lora.load_tokenizer(base)
    sampler = Sampler(tokenizer, max_new_tokens=16)
    base_model = load_policy(base, None)
    torch.manual_seed(seed)
    groups = {c.answer: sampler.group(base_model, c, size, f"c{i}") for i, c in enumerate(train)}
    rollouts = [s for g in groups.values() for s in g]
    guides = []
    for i, c in enumerate(train):
        if max(s.reward for s in groups[c.answer]) >= 1.0:
            continue
        prompt = sampler.prompt_ids(c)
        reply = [int(x) for x in tokenizer.encode(c.answer, add_special_tokens=False)] + [tokenizer.eos_token_id]
        guides.append(TrainingSample(
            sample_id=f"c{i}/guide", group_id=f"c{i}", reward=1.0, input_ids=prompt + reply,
            loss_mask=[0] * len(prompt) + [1] * len(reply), rollout_logprobs=[0.0] * (len(prompt) + len(reply)),
            has_rollout_logprobs=True, source="recorded", off_policy=True,
        ))  # fmt: skip
    failed = {g.group_id for g in guides}
    failures = [s for s in rollouts if s.group_id in failed]
    g0 = {s.group_id: reply_logprob(base_model, s) for s in guides}
    f0 = statistics.fmean(reply_logprob(base_model, s) for s in failures) if failures else float("nan")
    base_train = statistics.fmean(s.reward for s in rollouts)
    base_held = sampler.mean_reward(base_model, held, size, seed + 1)
    print(f"=== bench_guidance --mode chores ({len(train)} training chores x {size} completions from the base weights, "
          f"{len(guides)} guides of the groups that never earned 1; {len(held)} held-out chores; made for the "
          f"purpose, no bundled task) ===")
    print(f"base weights: training chores' mean reward {base_train:.3f}, held-out {base_held:.3f}")
    for loss in ("weighted_nll", "luffy_shaping"):
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            result = train_grpo(base, [*rollouts, *guides], TrainerConfig(guide_loss=loss), Path(tmp) / "adapter")
            model = load_policy(base, Path(tmp) / "adapter")
            changes = [reply_logprob(model, s) - g0[s.group_id] for s in guides]
            f1 = statistics.fmean(reply_logprob(model, s) for s in failures) if failures else float("nan")
            after_train = sampler.mean_reward(model, train, size, seed + 2)
            after_held = sampler.mean_reward(model, held, size, seed + 1)
        mean = statistics.fmean(changes) if changes else float("nan")
        print(f"{loss}: {result.steps} steps in {time.monotonic() - started:.0f} s; guide log-probability "
              f"{mean:+.2f} nats on average ({sum(c > 0 for c in changes)} of {len(changes)} up); the policy's own "
              f"failed replies {f0:.2f} -> {f1:.2f} nats on average; mean reward after: training chores "
              f"{after_train:.3f} ({after_train - base_train:+.3f}), held-out {after_held:.3f} "
              f"({after_held - base_held:+.3f})")


def main(argv: list[str] | None = None) -> int:
    from mindforge.policy.engines.models import resolve_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lineage", help="a lineage that ran bench_update --guidance (adapter and offline modes)")
    parser.add_argument("--mode", choices=["adapter", "offline", "chores"], default="adapter")
    args = parser.parse_args(argv)
    base = Path(resolve_model("smollm2").hf_dir)
    if args.mode == "chores":
        chores_mode(base)
    elif not args.lineage:
        parser.error(f"--mode {args.mode} reads a lineage: give --lineage NAME")
    else:
        (adapter_mode if args.mode == "adapter" else offline_mode)(args.lineage, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
