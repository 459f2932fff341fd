"""GRPO on LoRA over recorded multi-turn agent trajectories.

The objective (per model token t of sample i, group g):

- advantage, group-relative, from DeepSeekMath's GRPO (Shao et al. 2024,
  arXiv:2402.03300, outcome supervision): ``A_i = (r_i - mean_g) / (std_g + adv_eps)``
  with the population std (ddof 0), so a group of one or a flat group gets A = 0;
  samples with A = 0 carry no policy-gradient signal and are not trained on;
- ratio ``rho_t = exp(logp_theta(t) - logp_rollout(t))`` against the log-probs the
  sampling policy recorded (the trajectory's ATIF ``logprobs``);
- clipped surrogate (PPO, Schulman et al. 2017; asymmetric "clip-higher" as in DAPO,
  Yu et al. 2025): ``-min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)``;
- optional KL to the base (adapter disabled) with the k3 estimator used by GRPO:
  ``exp(d) - d - 1`` with ``d = logp_base - logp_theta``, weighted by ``kl_coef``;
- IcePop masking (Ling Team, "Every Step Evolves: Scaling Reinforcement Learning for
  Trillion-Scale Thinking Model", arXiv:2510.18855, 2025): a token whose
  training/rollout probability ratio ``k_t = p_train(t) / p_rollout(t)`` lies outside
  ``[icepop_low, icepop_high]`` (the paper's ``[alpha, beta]``, default ``[0.5, 5]``)
  gets zero gradient and is counted. Here ``p_train`` is the current policy, so the band
  also bounds how far repeated epochs drift from the rollout policy.

Only tokens with ``loss_mask`` 1 (the model's own samples) contribute. **Normalisation:**
the loss of one optimizer step is the sum over its samples' surviving model tokens
divided by their number (token-mean over the whole step, as DAPO's token-level loss;
long trajectories weigh by their tokens, not per sequence). With micro-batches the
per-micro-batch sums are back-propagated and the summed gradients divided by the step's
token count, which is exact.

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

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mindforge.trainer import lora
from mindforge.trainer.config import RewardStats, TrainerConfig, TrainResult
from mindforge.trainer.errors import NoTrainingSignalError
from mindforge.trainer.samples import TrainingSample

ProgressCallback = Callable[[int, float, dict], None]


def group_advantages(rewards: Sequence[float], group_ids: Sequence[str], eps: float = 1e-6) -> list[float]:
    """GRPO group-relative advantages ``(r - mean_g) / (std_g + eps)`` (population std).

    Args:
        rewards: shape (N,), one reward per sample.
        group_ids: shape (N,), the group of each sample.
        eps: added to the std so that nearly flat groups stay finite.

    Returns:
        shape (N,) advantages; exactly 0.0 for every member of a flat group.
    """
    if len(rewards) != len(group_ids):
        raise ValueError("rewards and group_ids differ in length")
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(group_ids):
        members[group].append(index)
    out = [0.0] * len(rewards)
    for indices in members.values():
        values = [float(rewards[i]) for i in indices]
        mean = statistics.fmean(values)
        std = statistics.pstdev(values)
        for i in indices:
            out[i] = 0.0 if std == 0.0 else (float(rewards[i]) - mean) / (std + eps)
    return out


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


@dataclass
class Batch:
    """Right-padded tensors of a micro-batch; shapes (B, L) unless stated.

    Attributes:
        input_ids / attention_mask / loss_mask / rollout_logprobs: as in the samples,
            padded with pad id / 0 / 0 / 0.
        advantages: shape (B,).
        first: first position holding a model token in any row.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    advantages: torch.Tensor
    first: int


def collate(
    samples: Sequence[TrainingSample], advantages: Sequence[float], pad_id: int, device: torch.device
) -> Batch:
    """Pad samples (right) into a :class:`Batch` on ``device``."""
    length = max(len(s.input_ids) for s in samples)

    def pad(rows: list[list], value, dtype) -> torch.Tensor:
        return torch.tensor([r + [value] * (length - len(r)) for r in rows], dtype=dtype, device=device)

    loss_mask = pad([s.loss_mask for s in samples], 0, torch.float32)
    first = min(s.loss_mask.index(1) for s in samples)
    return Batch(
        input_ids=pad([s.input_ids for s in samples], pad_id, torch.long),
        attention_mask=pad([[1] * len(s.input_ids) for s in samples], 0, torch.long),
        loss_mask=loss_mask,
        rollout_logprobs=pad([s.rollout_logprobs for s in samples], 0.0, torch.float32),
        advantages=torch.tensor(list(advantages), dtype=torch.float32, device=device),
        first=first,
    )


@dataclass
class LossParts:
    """One micro-batch's summed GRPO loss and token counts.

    Attributes:
        loss_sum: scalar tensor, sum of per-token losses over surviving model tokens.
        tokens: model tokens that survive IcePop (the normaliser).
        icepop_masked: model tokens masked by IcePop.
        clipped: surviving tokens whose PPO ratio was clipped.
        kl_sum: summed k3 KL over surviving tokens (0 when ``kl_coef`` is 0).
    """

    loss_sum: torch.Tensor
    tokens: int
    icepop_masked: int
    clipped: int
    kl_sum: float


def grpo_loss(model: torch.nn.Module, batch: Batch, config: TrainerConfig) -> LossParts:
    """The summed GRPO loss of one micro-batch (forward only; the caller back-propagates).

    Args:
        model: the PEFT model (adapter enabled); with ``config.kl_coef > 0`` its
            ``disable_adapter()`` context gives the base for the KL term.
        batch: the micro-batch.
        config: clip, KL and IcePop settings.

    Returns:
        the loss sum and counts; divide by the step's total ``tokens`` for the mean.
    """
    logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first)
    model_token = batch.loss_mask > 0
    log_ratio = logp - batch.rollout_logprobs
    with torch.no_grad():
        in_band = (log_ratio >= math.log(config.icepop_low)) & (log_ratio <= math.log(config.icepop_high))
        keep = model_token & in_band
    # masked positions get a constant 0 log-ratio: no gradient, and no overflow in exp
    ratio = torch.exp(torch.where(keep, log_ratio, torch.zeros_like(log_ratio)))
    adv = batch.advantages.unsqueeze(1)
    clipped_ratio = torch.clamp(ratio, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high)
    per_token = -torch.minimum(ratio * adv, clipped_ratio * adv)
    kl_sum = 0.0
    if config.kl_coef > 0:
        with torch.no_grad(), model.disable_adapter():
            base_logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first)
        delta = torch.where(keep, base_logp - logp, torch.zeros_like(logp))
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + config.kl_coef * kl
        kl_sum = float((kl * keep).sum().detach())
    with torch.no_grad():
        was_clipped = keep & (((ratio > 1 + config.clip_eps_high) & (adv > 0)) | ((ratio < 1 - config.clip_eps_low) & (adv < 0)))
    return LossParts(
        loss_sum=(per_token * keep).sum(),
        tokens=int(keep.sum()),
        icepop_masked=int((model_token & ~in_band).sum()),
        clipped=int(was_clipped.sum()),
        kl_sum=kl_sum,
    )


@torch.no_grad()
def fill_rollout_logprobs(
    model: torch.nn.Module, samples: list[TrainingSample], pad_id: int, device: torch.device, micro: int
) -> list[TrainingSample]:
    """Give samples without recorded log-probs those of ``model`` (the start-of-training policy)."""
    out = list(samples)
    missing = [i for i, s in enumerate(samples) if not s.has_rollout_logprobs]
    for start in range(0, len(missing), micro):
        chunk = [samples[i] for i in missing[start : start + micro]]
        batch = collate(chunk, [0.0] * len(chunk), pad_id, device)
        logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first)
        for row, i in enumerate(missing[start : start + micro]):
            n = len(samples[i].input_ids)
            values = (logp[row, :n] * batch.loss_mask[row, :n]).tolist()
            out[i] = samples[i].model_copy(update={"rollout_logprobs": values, "has_rollout_logprobs": True})
    return out


def train_steps(
    model: torch.nn.Module,
    samples: Sequence[TrainingSample],
    advantages: Sequence[float],
    config: TrainerConfig,
    *,
    pad_id: int,
    device: torch.device,
    progress_cb: ProgressCallback | None = None,
) -> dict:
    """Run the GRPO optimisation loop on an already wrapped model.

    Args:
        model: PEFT model with trainable LoRA parameters.
        samples / advantages: the samples to train on and their advantages, shape (N,).
        config: trainer settings (epochs, steps, batch sizes, lr, ...).
        pad_id: padding token id.
        device: where ``model`` lives.
        progress_cb: called after every optimizer step as ``(step, loss, stats)``.

    Returns:
        ``{"losses", "tokens_trained", "icepop_masked_tokens", "clipped_tokens"}``.
    """
    params = list(lora.lora_parameters(model).values())
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    micro = config.micro_batch_size or config.batch_size
    totals = {"losses": [], "tokens_trained": 0, "icepop_masked_tokens": 0, "clipped_tokens": 0}
    model.train()
    step = 0
    for _epoch in range(config.epochs):
        order = torch.randperm(len(samples), generator=generator).tolist()
        for start in range(0, len(order), config.batch_size):
            if config.max_steps is not None and step >= config.max_steps:
                return totals
            chosen = order[start : start + config.batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss_sum, tokens, masked, clipped, kl_sum = 0.0, 0, 0, 0, 0.0
            for m in range(0, len(chosen), micro):
                part_ids = chosen[m : m + micro]
                batch = collate([samples[i] for i in part_ids], [advantages[i] for i in part_ids], pad_id, device)
                parts = grpo_loss(model, batch, config)
                if parts.tokens:
                    parts.loss_sum.backward()
                loss_sum += float(parts.loss_sum.detach())
                tokens, masked, clipped = tokens + parts.tokens, masked + parts.icepop_masked, clipped + parts.clipped
                kl_sum += parts.kl_sum
            if tokens:
                for p in params:
                    if p.grad is not None:
                        p.grad.div_(tokens)
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm or float("inf")))
                optimizer.step()
            else:
                grad_norm = 0.0
            step += 1
            loss = loss_sum / tokens if tokens else 0.0
            totals["losses"].append(loss)
            totals["tokens_trained"] += tokens
            totals["icepop_masked_tokens"] += masked
            totals["clipped_tokens"] += clipped
            if progress_cb is not None:
                stats = {"tokens": tokens, "icepop_masked": masked, "clipped": clipped,
                         "kl": kl_sum / tokens if tokens else 0.0, "grad_norm": grad_norm}
                progress_cb(step, loss, stats)
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
    train_samples = fill_rollout_logprobs(model, [samples[i] for i in used], tokenizer.pad_token_id, device, micro)
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
        zero_advantage_samples=len(samples) - len(used),
        reward=reward_stats(samples),
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        wall_sec=time.monotonic() - began,
        lora_rank=int(model.peft_config["default"].r),
        seed=config.seed,
    )
