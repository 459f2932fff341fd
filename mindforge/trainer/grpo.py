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
from mindforge.trainer.batching import extents_of, group_order, micro_batches
from mindforge.trainer.budget import StepBudget, StopReason
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
    "group_order",
    "micro_batches",
    "reward_stats",
    "train_grpo",
    "train_steps",
]

ProgressCallback = Callable[[int, float, dict], None]


class TrainTotals(TypedDict):
    """What :func:`train_steps` adds up: the loss of every step, token counts over all steps, why it stopped.

    ``planned_steps`` is what the epochs (or ``max_steps``) asked for; ``stop_reason`` says
    which bound ended the run (:mod:`mindforge.trainer.budget`).
    """

    losses: list[float]
    tokens_trained: int
    icepop_masked_tokens: int
    clipped_tokens: int
    planned_steps: int
    stop_reason: StopReason


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
    compute_dtype: torch.dtype | None = None,
) -> list[TrainingSample]:
    """Give samples without recorded log-probs those of ``model`` (the start-of-training policy).

    Forwards run ``micro`` samples at most, and at most ``max_positions`` logit positions
    (:func:`micro_batches`), autocast to ``compute_dtype`` when given
    (:func:`mindforge.trainer.lora.autocast_dtype`), as the training forwards are.
    """
    out = list(samples)
    missing = [i for i, s in enumerate(samples) if not s.has_rollout_logprobs]
    chunks = [samples[i] for i in missing]
    for start, end in micro_batches(["one"] * len(chunks), micro, extents_of(chunks), max_positions):
        chunk = chunks[start:end]
        batch = collate(chunk, [0.0] * len(chunk), pad_id, device)
        with lora.autocast(device, compute_dtype):
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
    compute_dtype: torch.dtype | None = None,
) -> StepStats:
    """One optimizer step over ``samples`` (split into micro-batches of ``config.micro_batch_size``).

    The per-micro-batch loss sums are back-propagated, the summed gradients divided by the
    step's surviving model-token count, clipped to ``config.max_grad_norm`` and applied.
    A step in which no token survives changes nothing. Micro-batches end where a group
    does (:func:`micro_batches`), so the rows of one share their group's prompt, which
    the forward runs once (:func:`mindforge.trainer.lora.per_token_logps`), checkpointed
    or not. The forwards (and the loss) are autocast to ``compute_dtype`` when given; the
    backward pass and AdamW run outside it.
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
        with lora.autocast(device, compute_dtype):
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
    compute_dtype: torch.dtype | None = None,
    clock: Callable[[], float] = time.time,
) -> TrainTotals:
    """Run the GRPO optimisation loop on an already wrapped model.

    Each epoch visits the samples in a seeded random order that keeps each group's samples
    together (:func:`group_order`), ``config.batch_size`` per optimizer step, until
    ``config.epochs`` or ``config.max_steps`` runs out, or - between steps - until the
    next step is not expected to end before ``config.deadline_at``
    (:class:`mindforge.trainer.budget.StepBudget`; the first step always runs).

    Args:
        model: PEFT model with trainable LoRA parameters.
        samples / advantages: the samples to train on and their advantages, shape (N,).
        config: trainer settings (epochs, steps, batch sizes, lr, deadline, ...).
        pad_id: padding token id.
        device: where ``model`` lives.
        progress_cb: called after every optimizer step as ``(step, loss, stats)`` with
            ``stats`` the :class:`StepStats` fields as a dict.
        compute_dtype: the forwards' autocast dtype (None: the weights' dtype).
        clock: the current time as POSIX seconds, for the deadline (a test passes its own).

    Returns:
        the per-step losses, token totals, the steps planned and why the loop stopped.
    """
    optimizer = make_optimizer(model, config)
    generator = torch.Generator().manual_seed(config.seed)
    per_epoch = -(-len(samples) // config.batch_size)
    planned = min(per_epoch * config.epochs, config.max_steps or per_epoch * config.epochs)
    totals: TrainTotals = {
        "losses": [], "tokens_trained": 0, "icepop_masked_tokens": 0, "clipped_tokens": 0,
        "planned_steps": planned, "stop_reason": "epochs",
    }
    budget = StepBudget(config.max_steps, config.deadline_at, clock)
    model.train()
    step = 0
    for _epoch in range(config.epochs):
        order = group_order([s.group_id for s in samples], generator)
        for start in range(0, len(order), config.batch_size):
            if not budget.allows(step):
                totals["stop_reason"] = budget.stop_reason or "max_steps"
                return totals
            chosen = order[start : start + config.batch_size]
            stats = grpo_step(
                model, optimizer, [samples[i] for i in chosen], [advantages[i] for i in chosen], config,
                pad_id=pad_id, device=device, compute_dtype=compute_dtype,
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

    Runs on CUDA (bfloat16 base when supported) if present, else on CPU with float32
    weights, its forwards autocast to bfloat16 where that CPU multiplies it natively and
    the model is not a tiny one (:func:`mindforge.trainer.lora.autocast_dtype`);
    deterministic on the CPU for ``config.seed``. Stops early, between optimizer steps, at
    ``config.deadline_at`` (:mod:`mindforge.trainer.budget`), and still saves the adapter
    of the steps it took; the result says how many ran and why it stopped.

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
    compute = lora.autocast_dtype(model, device, config.use_bf16)
    micro = config.micro_batch_size or config.batch_size
    model.eval()
    train_samples = fill_rollout_logprobs(
        model, [samples[i] for i in used], tokenizer.pad_token_id, device, micro, config.micro_batch_positions,
        compute,
    )
    totals = train_steps(
        model, train_samples, [advantages[i] for i in used], config,
        pad_id=tokenizer.pad_token_id, device=device, progress_cb=progress_cb, compute_dtype=compute,
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
        planned_steps=totals["planned_steps"],
        stop_reason=totals["stop_reason"],
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
        compute_dtype=str(compute or dtype).removeprefix("torch."),
        wall_sec=time.monotonic() - began,
        lora_rank=lora.adapter_rank(model),
        seed=config.seed,
    )
