"""The GRPO objective on token-masked multi-turn samples (torch; no model loading).

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

**Off-policy guide tokens** (``TrainingSample.off_policy``: a validated experience entry
rendered as a reply, :mod:`mindforge.trainer.guidance`) were not sampled from the rollout
policy, so there is no ratio to clip or to hold in the IcePop band. By default
(``config.guide_loss = "weighted_nll"``) a guide token's loss is ``-A log p_theta(t)``:
the policy-gradient term at importance weight 1, unclipped - advantage-weighted maximum
likelihood, as the SFT term of single-stage SFT + RL hybrids (SRFT, Fu et al. 2025,
arXiv:2506.19767) weighs demonstrations. Its gradient per token has the same weight
``|A|`` as an on-policy token's at ratio 1, so within a group whose advantages sum to
0 the tokens a guide shares with the policy's failed attempts are pushed neither up nor
down, and the tokens where they differ are. The alternative ``"luffy_shaping"`` is
LUFFY's (Yan et al. 2025, "Learning to Reason under Off-Policy Guidance",
arXiv:2504.14945, section 3.3): ``-A f(p)`` with ``f(p) = p / (p + gamma)``
(``config.guide_gamma``); its weight ``gamma p / (p + gamma)^2`` is at most 1/4 and far
less on the low-probability tokens a small model misses, so the failures' pushes win:
measured on SmolLM2 after 8 iterations of ``bench_update --guidance``, 21 of 22 guided
tasks' guide log-probability fell under the trained adapter (``make-executable``: -3.05 to
-10.54 nats), and 21 of 22 rose under ``weighted_nll`` (``benchmarks/bench_guidance.py``).

Only tokens with ``loss_mask`` 1 (the model's own samples) contribute. **Normalisation:**
the loss of one optimizer step is the sum over its samples' surviving model tokens
divided by their number (token-mean over the whole step, as DAPO's token-level loss;
long trajectories weigh by their tokens, not per sequence). With micro-batches the
per-micro-batch sums are back-propagated and the summed gradients divided by the step's
token count, which is exact.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.samples import TrainingSample

if TYPE_CHECKING:
    from peft import PeftModel


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


@dataclass
class Batch:
    """Right-padded tensors of a micro-batch; shapes (B, L) unless stated.

    Attributes:
        input_ids / attention_mask / loss_mask / rollout_logprobs: as in the samples,
            padded with pad id / 0 / 0 / 0.
        advantages: shape (B,).
        off_policy: shape (B,), bool: the row is a guide (unclipped ``config.guide_loss``).
        first: first position holding a model token in any row.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    advantages: torch.Tensor
    off_policy: torch.Tensor
    first: int


def collate(samples: Sequence[TrainingSample], advantages: Sequence[float], pad_id: int, device: torch.device) -> Batch:
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
        off_policy=torch.tensor([s.off_policy for s in samples], dtype=torch.bool, device=device),
        first=first,
    )


@dataclass
class LossParts:
    """One micro-batch's summed GRPO loss and token counts.

    Attributes:
        loss_sum: scalar tensor, sum of per-token losses over surviving model tokens.
        tokens: model tokens that survive IcePop (the normaliser).
        icepop_masked: model tokens masked by IcePop (guide tokens never are).
        clipped: surviving tokens whose PPO ratio was clipped (guide tokens never are).
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
    share = config.share_prompt
    logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first, share_prefix=share)
    model_token = batch.loss_mask > 0
    guide = batch.off_policy.unsqueeze(1).expand_as(model_token)
    log_ratio = logp - batch.rollout_logprobs
    with torch.no_grad():
        in_band = (log_ratio >= math.log(config.icepop_low)) & (log_ratio <= math.log(config.icepop_high))
        keep = model_token & (in_band | guide)
    on_policy = keep & ~guide
    # masked positions get a constant 0 log-ratio: no gradient, and no overflow in exp
    ratio = torch.exp(torch.where(on_policy, log_ratio, torch.zeros_like(log_ratio)))
    adv = batch.advantages.unsqueeze(1)
    clipped_ratio = torch.clamp(ratio, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high)
    per_token = -torch.minimum(ratio * adv, clipped_ratio * adv)
    if bool(guide.any()):
        if config.guide_loss == "luffy_shaping":
            prob = torch.exp(logp)
            guided = -adv * prob / (prob + config.guide_gamma)
        else:  # weighted_nll: the policy-gradient term at importance weight 1, unclipped
            guided = -adv * logp
        per_token = torch.where(guide, guided, per_token)
    kl_sum = 0.0
    if config.kl_coef > 0:
        # a KL term needs the PEFT model (see Args): its base is the model with the adapter disabled
        with torch.no_grad(), cast("PeftModel", model).disable_adapter():
            base_logp = lora.per_token_logps(
                model, batch.input_ids, batch.attention_mask, batch.first, share_prefix=share
            )
        delta = torch.where(keep, base_logp - logp, torch.zeros_like(logp))
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + config.kl_coef * kl
        kl_sum = float((kl * keep).sum().detach())
    with torch.no_grad():
        was_clipped = on_policy & (
            ((ratio > 1 + config.clip_eps_high) & (adv > 0)) | ((ratio < 1 - config.clip_eps_low) & (adv < 0))
        )
    return LossParts(
        loss_sum=(per_token * keep).sum(),
        tokens=int(keep.sum()),
        icepop_masked=int((model_token & ~in_band & ~guide).sum()),
        clipped=int(was_clipped.sum()),
        kl_sum=kl_sum,
    )
