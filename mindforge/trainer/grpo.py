"""GRPO on LoRA over recorded multi-turn agent trajectories: the training loop.

The objective (group advantages, clipped ratio to the rollout log-probs, k3 KL to the
base, IcePop masking, token-mean normalisation) is in :mod:`mindforge.trainer.objective`.

**Why not TRL's GRPOTrainer** (checked in TRL 1.16, ``trl/trainer/grpo_trainer.py``):
it is an online trainer. Completions come from its own generation or a
``rollout_func(prompts, trainer)`` called every step for a dataset of prompts with a
fixed ``num_generations`` per prompt; rewards come from ``reward_funcs``; tool/
observation tokens are masked through ``tool_mask`` (or ``env_mask`` returned by the
rollout function), combined with ``completion_mask``. Offline, precomputed multi-turn
trajectories with given rewards could be pushed through a look-up ``rollout_func``, but
(1) groups here have varying sizes after dropped samples; (2) the recorded sampler
log-probs are used only for ``vllm_importance_sampling_correction`` (whose
``token_mask`` mode is IcePop-like) and only when ``use_vllm=True``: without vLLM the
trainer recomputes its own "old" log-probs and ignores ours; (3) it brings the
accelerate/Trainer loop and a datasets dependency for what is ~100 lines of loss here.
So this module uses PEFT directly and TRL only for ``selective_log_softmax``.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

import torch

from mindforge.payloads.training import RewardStats, TrainerConfig, TrainResult
from mindforge.trainer import lora
from mindforge.trainer.errors import NoTrainingSignalError
from mindforge.trainer.objective import (
    Batch,
    LossParts,
    collate,
    group_advantages,
    grpo_loss,
)
from mindforge.trainer.samples import TrainingSample

__all__ = [
    "Batch",
    "LossParts",
    "StepStats",
    "collate",
    "fill_rollout_logprobs",
    "group_advantages",
    "grpo_loss",
    "grpo_step",
    "reward_stats",
    "train_grpo",
    "train_steps",
]

ProgressCallback = Callable[[int, float, dict], None]


class TrainTotals(TypedDict):
    """What :func:`train_steps` adds up: the loss of every step, token counts over all steps."""

    losses: list[float]
    tokens_trained: int
    icepop_masked_tokens: int
    clipped_tokens: int


def reward_stats(samples: Sequence[TrainingSample]) -> RewardStats:
    """Reward summary of ``samples`` (see :class:`RewardStats`)."""
    rewards = [s.reward for s in samples]
    groups: dict[str, set[float]] = defaultdict(set)
    for s in samples:
        groups[s.group_id].add(s.reward)
    return RewardStats(
        num_samples=len(rewards),
        num_groups=len(groups),
        mean=statistics.fmean(rewards) if rewards else 0.0,
        std=statistics.pstdev(rewards) if rewards else 0.0,
        min=min(rewards, default=0.0),
        max=max(rewards, default=0.0),
        flat_groups=sum(1 for values in groups.values() if len(values) == 1),
    )


@torch.no_grad()
def fill_rollout_logprobs(
    model: torch.nn.Module,
    samples: list[TrainingSample],
    pad_id: int,
    device: torch.device,
    micro: int,
    max_positions: int | None = None,
) -> list[TrainingSample]:
    """Give samples without recorded log-probs those of ``model`` (the start-of-training policy).

    Forwards run ``micro`` samples at most, and at most ``max_positions`` logit positions
    (:func:`micro_batches`).
    """
    out = list(samples)
    missing = [i for i, s in enumerate(samples) if not s.has_rollout_logprobs]
    chunks = [samples[i] for i in missing]
    for start, end in micro_batches(["one"] * len(chunks), micro, extents_of(chunks), max_positions):
        chunk = chunks[start:end]
        batch = collate(chunk, [0.0] * len(chunk), pad_id, device)
        logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first)
        for row, i in enumerate(missing[start:end]):
            n = len(samples[i].input_ids)
            values = (logp[row, :n] * batch.loss_mask[row, :n]).tolist()
            out[i] = samples[i].model_copy(update={"rollout_logprobs": values, "has_rollout_logprobs": True})
    return out


@dataclass
class StepStats:
    """One optimizer step's outcome.

    Attributes:
        loss: token-mean GRPO loss of the step (0.0 when no token survived).
        tokens / icepop_masked / clipped: token counts summed over micro-batches.
        kl: token-mean k3 KL to the base (0.0 when ``kl_coef`` is 0).
        grad_norm: gradient norm before clipping.
    """

    loss: float
    tokens: int
    icepop_masked: int
    clipped: int
    kl: float
    grad_norm: float


def grpo_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[TrainingSample],
    advantages: Sequence[float],
    config: TrainerConfig,
    *,
    pad_id: int,
    device: torch.device,
) -> StepStats:
    """One optimizer step over ``samples`` (split into micro-batches of ``config.micro_batch_size``).

    The per-micro-batch loss sums are back-propagated, the summed gradients divided by the
    step's surviving model-token count, clipped to ``config.max_grad_norm`` and applied.
    A step in which no token survives changes nothing. Micro-batches end where a group
    does (:func:`micro_batches`), so the rows of one share their group's prompt, which
    the forward runs once (:func:`mindforge.trainer.lora.per_token_logps`).
    """
    params = [p for group in optimizer.param_groups for p in group["params"]]
    micro = config.micro_batch_size or config.batch_size
    optimizer.zero_grad(set_to_none=True)
    loss_sum, tokens, masked, clipped, kl_sum = 0.0, 0, 0, 0, 0.0
    spans = micro_batches([s.group_id for s in samples], micro, extents_of(samples), config.micro_batch_positions)
    for start, end in spans:
        batch = collate(samples[start:end], advantages[start:end], pad_id, device)
        long = config.checkpoint_above_tokens is not None and batch.input_ids.shape[1] > config.checkpoint_above_tokens
        lora.set_checkpointing(model, config.gradient_checkpointing or long)
        parts = grpo_loss(model, batch, config)
        if parts.tokens:
            parts.loss_sum.backward()
        loss_sum += float(parts.loss_sum.detach())
        tokens, masked, clipped = tokens + parts.tokens, masked + parts.icepop_masked, clipped + parts.clipped
        kl_sum += parts.kl_sum
    grad_norm = 0.0
    if tokens:
        for p in params:
            if p.grad is not None:
                p.grad.div_(tokens)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm or float("inf")))
        optimizer.step()
    return StepStats(
        loss=loss_sum / tokens if tokens else 0.0,
        tokens=tokens,
        icepop_masked=masked,
        clipped=clipped,
        kl=kl_sum / tokens if tokens else 0.0,
        grad_norm=grad_norm,
    )


def micro_batches(
    group_ids: Sequence[str],
    size: int,
    extents: Sequence[tuple[int, int]] | None = None,
    max_positions: int | None = None,
) -> list[tuple[int, int]]:
    """``(start, end)`` spans of at most ``size`` consecutive samples, each within one group's run.

    With ``extents`` and ``max_positions``, a span also ends before its forward would hold
    more than ``max_positions`` vocabulary-sized logit rows: a micro-batch of B samples
    computes logits at B x (longest length - earliest first model token + 1) positions
    (:func:`mindforge.trainer.lora.per_token_logps`), each a float row of the vocabulary
    (49,152 for SmolLM2: about 0.8 MB with its float32 copy and gradient). A sample over
    the cap runs alone.

    Args:
        group_ids: shape (N,), the group of each sample in step order.
        size: most samples per micro-batch (>= 1).
        extents: shape (N,), each sample's (length in tokens, position of its first model token).
        max_positions: most logit positions per micro-batch (None: no cap).
    """
    spans: list[tuple[int, int]] = []
    start = 0

    def positions(a: int, b: int) -> int:
        assert extents is not None
        rows = extents[a:b]
        return (b - a) * (max(n for n, _ in rows) - min(f for _, f in rows) + 1)

    for i in range(1, len(group_ids) + 1):
        full = i - start == size
        over = (
            extents is not None and max_positions is not None and i < len(group_ids)
            and positions(start, i + 1) > max_positions
        )
        if i == len(group_ids) or group_ids[i] != group_ids[start] or full or over:
            spans.append((start, i))
            start = i
    return spans


def extents_of(samples: Sequence[TrainingSample]) -> list[tuple[int, int]]:
    """Each sample's (length in tokens, position of its first model token), as :func:`micro_batches` takes them."""
    return [(len(s.input_ids), s.loss_mask.index(1) if 1 in s.loss_mask else len(s.input_ids)) for s in samples]


def group_order(group_ids: Sequence[str], generator: torch.Generator) -> list[int]:
    """A seeded visiting order with each group's samples together: groups shuffled, then members shuffled.

    A step of ``batch_size`` samples then holds one group or a few, as TRL's GRPO batches
    are laid out (``num_generations`` completions of a prompt side by side), and its rows
    share their prompt.

    Args:
        group_ids: shape (N,), the group of each sample.
        generator: the seeded generator of this run.
    """
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    groups = sorted(members)
    order: list[int] = []
    for g in (groups[k] for k in torch.randperm(len(groups), generator=generator).tolist()):
        idx = members[g]
        order += [idx[k] for k in torch.randperm(len(idx), generator=generator).tolist()]
    return order


def make_optimizer(model: torch.nn.Module, config: TrainerConfig) -> torch.optim.Optimizer:
    """AdamW over the model's trainable (LoRA) parameters."""
    params = list(lora.lora_parameters(model).values())
    return torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)


def train_steps(
    model: torch.nn.Module,
    samples: Sequence[TrainingSample],
    advantages: Sequence[float],
    config: TrainerConfig,
    *,
    pad_id: int,
    device: torch.device,
    progress_cb: ProgressCallback | None = None,
) -> TrainTotals:
    """Run the GRPO optimisation loop on an already wrapped model.

    Each epoch visits the samples in a seeded random order that keeps each group's samples
    together (:func:`group_order`), ``config.batch_size`` per optimizer step, until
    ``config.epochs`` or ``config.max_steps`` runs out.

    Args:
        model: PEFT model with trainable LoRA parameters.
        samples / advantages: the samples to train on and their advantages, shape (N,).
        config: trainer settings (epochs, steps, batch sizes, lr, ...).
        pad_id: padding token id.
        device: where ``model`` lives.
        progress_cb: called after every optimizer step as ``(step, loss, stats)`` with
            ``stats`` the :class:`StepStats` fields as a dict.

    Returns:
        ``{"losses", "tokens_trained", "icepop_masked_tokens", "clipped_tokens"}``.
    """
    optimizer = make_optimizer(model, config)
    generator = torch.Generator().manual_seed(config.seed)
    totals: TrainTotals = {"losses": [], "tokens_trained": 0, "icepop_masked_tokens": 0, "clipped_tokens": 0}
    model.train()
    step = 0
    for _epoch in range(config.epochs):
        order = group_order([s.group_id for s in samples], generator)
        for start in range(0, len(order), config.batch_size):
            if config.max_steps is not None and step >= config.max_steps:
                return totals
            chosen = order[start : start + config.batch_size]
            stats = grpo_step(
                model,
                optimizer,
                [samples[i] for i in chosen],
                [advantages[i] for i in chosen],
                config,
                pad_id=pad_id,
                device=device,
            )
            step += 1
            totals["losses"].append(stats.loss)
            totals["tokens_trained"] += stats.tokens
            totals["icepop_masked_tokens"] += stats.icepop_masked
            totals["clipped_tokens"] += stats.clipped
            if progress_cb is not None:
                progress_cb(step, stats.loss, asdict(stats))
    return totals


def train_grpo(
    base_model_path: Path,
    samples: Sequence[TrainingSample],
    config: TrainerConfig,
    out_dir: Path,
    *,
    progress_cb: ProgressCallback | None = None,
    parent_adapter: Path | None = None,
) -> TrainResult:
    """Train a LoRA adapter on ``samples`` with GRPO and save it in PEFT format.

    Runs on CUDA (bfloat16 base when supported) if present, else on CPU in float32,
    where it is deterministic for ``config.seed``.

    Args:
        base_model_path: directory of the frozen base model and its tokenizer.
        samples: training samples (see :mod:`mindforge.trainer.samples`); samples
            longer than ``config.max_seq_len`` are rejected.
        config: hyper-parameters.
        out_dir: where the adapter is written (``save_pretrained``).
        progress_cb: called after every optimizer step as ``(step, loss, stats)``
            (e.g. to heartbeat a Temporal activity).
        parent_adapter: adapter directory to continue training from.

    Returns:
        the saved adapter's path and training metrics.

    Raises:
        NoTrainingSignalError: no sample has a non-zero advantage.
        ValueError: a sample exceeds ``config.max_seq_len``.
        InputError: the base model, tokenizer or parent adapter cannot be loaded.
    """
    began = time.monotonic()
    samples = list(samples)
    too_long = [s.sample_id for s in samples if len(s.input_ids) > config.max_seq_len]
    if too_long:
        raise ValueError(f"samples longer than max_seq_len {config.max_seq_len}: {too_long[:5]}")
    advantages = group_advantages([s.reward for s in samples], [s.group_id for s in samples], config.adv_eps)
    used = [i for i, a in enumerate(advantages) if a != 0.0]
    if not used:
        raise NoTrainingSignalError(f"all {len(samples)} samples have zero advantage (every group is flat)")
    device, dtype = lora.pick_device(config.use_bf16)
    tokenizer = lora.load_tokenizer(base_model_path)
    model = lora.wrap_lora(lora.load_base(base_model_path, device, dtype), config, parent_adapter)
    micro = config.micro_batch_size or config.batch_size
    model.eval()
    train_samples = fill_rollout_logprobs(
        model, [samples[i] for i in used], tokenizer.pad_token_id, device, micro, config.micro_batch_positions
    )
    totals = train_steps(
        model,
        train_samples,
        [advantages[i] for i in used],
        config,
        pad_id=tokenizer.pad_token_id,
        device=device,
        progress_cb=progress_cb,
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), save_embedding_layers=False)
    losses = totals["losses"]
    return TrainResult(
        adapter_dir=out_dir,
        base_model_path=Path(base_model_path),
        parent_adapter=Path(parent_adapter) if parent_adapter else None,
        steps=len(losses),
        mean_loss=statistics.fmean(losses) if losses else 0.0,
        losses=losses,
        tokens_trained=totals["tokens_trained"],
        icepop_masked_tokens=totals["icepop_masked_tokens"],
        clipped_tokens=totals["clipped_tokens"],
        samples_used=len(used),
        off_policy_samples=sum(1 for i in used if samples[i].off_policy),
        zero_advantage_samples=len(samples) - len(used),
        reward=reward_stats(samples),
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        wall_sec=time.monotonic() - began,
        lora_rank=lora.adapter_rank(model),
        seed=config.seed,
    )
