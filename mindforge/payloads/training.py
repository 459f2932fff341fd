"""The trainer's records that travel between layers: settings, training result, selection, adapter report.

Each crosses a process boundary (Temporal activity input/result, Ray task arguments),
so it holds plain numbers, strings and paths only. The trainer
(:mod:`mindforge.trainer`) fills them; the stage payloads
(:mod:`mindforge.payloads.update`, :mod:`mindforge.payloads.ray_tasks`) carry them. Pure
pydantic: no torch.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the attention and MLP projections of Llama/Qwen2-style decoders
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: why a training run stopped: every epoch ran, ``max_steps`` was reached, or the deadline came
#: (:mod:`mindforge.trainer.budget`)
StopReason = Literal["epochs", "max_steps", "deadline"]


class TrainerConfig(BaseModel):
    """GRPO-on-LoRA hyper-parameters.

    **The defaults and where they come from.** Measured for SmolLM2-135M-Instruct by
    ``benchmarks/bench_grpo_sweep.py`` (on-policy GRPO with this package's code on
    synthetic single-turn chores written in the benchmark, never on a bundled task; one
    factor at a time around the defaults; the table is in the commit that set them), and
    chosen inside the published ranges:

    - ``learning_rate`` 1e-4, ``lora_rank`` 16 on every attention and MLP projection:
      TRL's "LoRA Without Regret" guide (``trl`` docs ``lora_without_regret``, after
      Schulman et al., Thinking Machines 2025): for RL a LoRA rank of 1-32 suffices, LoRA
      should wrap all layers (MLP included; attention-only LoRA underperforms) and wants a
      learning rate about 10x full fine-tuning's (1e-5 to 1e-4 at this size), for a few
      hundred steps. In the sweep the fitted reward slope at 1e-4 was 4.7x that at 1e-5
      (the default before it), all projections 2.1x q/v only, rank 16 2.2x rank 4
      (alpha = 2r in both).
    - ``clip_eps_low`` 0.2 / ``clip_eps_high`` 0.28: DAPO's clip-higher (Yu et al. 2025,
      arXiv:2503.14476), which also gives dynamic sampling (drop flat groups); that and
      RAGEN's filter for the most uncertain prompts (Wang et al. 2025) are the Update's
      curriculum (:mod:`mindforge.trainer.curriculum`), with TRL's GRPO default of 8
      generations per prompt as ``UpdateSpec.group_size``.
    - ``epochs`` 2 (two passes over an iteration's samples, ``batch_size`` 8 a step, so
      2 x ceil(samples / 8) steps, fewer when the Update's deadline comes first; IcePop
      bounds the drift from the rollout policy), chosen by the held-out log-likelihood of
      the selected successes per second of an iteration (``benchmarks/bench_train_epochs.py``:
      SmolLM2 on chores made for the purpose, 3 seeds, a second draw's positive-advantage
      replies held out): after 1, 2, 3, 4 passes it rose +0.057, +0.108, +0.120, +0.134
      nats a token, so the second pass buys about what the first did (+0.051) and the third
      a quarter of it (+0.012). Per second of an iteration - R seconds of rollouts plus E
      passes of T seconds - two passes are best for R/T from 0.13 to 6.3; the main job's
      Update (R about 60 s: 16 rollouts at 16.1 a minute; T about 32 s a pass,
      ``bench_train_cpu.py``) lies inside. In the earlier sweep the second pass raised the
      reward about 1.3x steeper per iteration (the intervals overlap).
    - ``kl_coef`` 0: DAPO drops the KL term for verifiable rewards; in the sweep 0.05
      changed the rise by nothing measurable and costs a reference forward a step.
    - ``guide_loss`` ``weighted_nll`` for off-policy guide tokens
      (:mod:`mindforge.trainer.guidance`, :mod:`mindforge.trainer.objective`): on one
      stored iteration of SmolLM2 groups (7 guided), one update raised the guides'
      reply log-probability by 6.87 nats on average (7 of 7 up) against 1.50 (6 of 7)
      under LUFFY's shaping (``guide_gamma`` 0.1, as published: Yan et al. 2025,
      arXiv:2504.14945, section 3.3), and lowered the policy's own failed replies less
      (-3.1 against -7.1 nats); on chores made for the purpose (``bench_guidance --mode
      chores``, no bundled task), +14.92 against +1.28 nats (6 of 6 up under both).

    Attributes:
        lora_rank: LoRA rank r.
        lora_alpha: LoRA scaling numerator (the update is scaled by alpha / r).
        lora_dropout: dropout on the LoRA input, probability in [0, 1).
        target_modules: module names PEFT wraps with LoRA.
        learning_rate: AdamW learning rate.
        weight_decay: AdamW weight decay.
        max_grad_norm: gradient-norm clip per optimizer step (0 disables).
        epochs: passes over the samples (GRPO's "iterations" per batch of rollouts).
        max_steps: stop after this many optimizer steps (None: run all epochs).
        batch_size: samples per optimizer step.
        micro_batch_size: samples per forward/backward (gradients accumulate over
            ``batch_size / micro_batch_size`` micro-batches); None = ``batch_size``.
        micro_batch_positions: most logit positions one forward/backward computes (rows x
            scored length): a micro-batch closes before it would exceed them, so memory
            stays bounded when trajectories are long (a contract with a library of worked
            examples in its prompt). Each position is a vocabulary-sized float row: about
            0.8 MB for SmolLM2 with its copy and gradient, so the default 2,048 keeps the
            logits near 1.6 GB. A longer single sample runs alone. None: no cap.
        clip_eps_low: PPO clip below: ratios under ``1 - clip_eps_low`` stop pushing.
        clip_eps_high: PPO clip above (DAPO's "clip-higher" when larger than low).
        kl_coef: weight of the k3 KL estimate to the base model (adapter disabled);
            0 skips the reference forward.
        icepop_low / icepop_high: IcePop band; a model token whose training/rollout
            probability ratio ``exp(logp_train - logp_rollout)`` falls outside
            ``[icepop_low, icepop_high]`` gets no gradient and is counted.
        adv_eps: epsilon in the group-advantage denominator ``std + adv_eps``.
        guide_loss: the loss of off-policy guide tokens (no clip, no IcePop either
            way): ``weighted_nll`` ``-A log p``, or ``luffy_shaping``
            ``-A p / (p + guide_gamma)``, with ``p`` the token's probability under the
            current policy.
        guide_gamma: LUFFY's shaping constant (``luffy_shaping`` only); smaller values
            weigh low-probability tokens more.
        seed: seeds LoRA init, dropout and sample order.
        max_seq_len: longest sample in tokens; longer samples are dropped.
        use_bf16: bfloat16 where the hardware does it: the base's weights on CUDA when
            supported; on a CPU with native bfloat16 (AVX512-BF16, AMX), autocast of the
            forwards for a model that is not tiny (weights, LoRA and AdamW stay float32:
            :func:`mindforge.trainer.lora.autocast_dtype`, measured by
            ``benchmarks/bench_train_cpu.py --mode precision``). False: float32 throughout.
        gradient_checkpointing: recompute activations in the backward pass (less memory
            for long trajectories, about one more forward of time) in every micro-batch.
        checkpoint_above_tokens: recompute activations in the backward pass of a
            micro-batch longer than this many tokens (padded length), whatever
            ``gradient_checkpointing`` says: attention weights grow with the square of the
            length (a 3,000-token SmolLM2 trajectory held 13 GB without). The group's
            shared prompt still runs once (:mod:`mindforge.trainer.prefix`). None: never.
        share_prompt: run the prompt a micro-batch's rows share once and serve its KV
            cache to every row (False: every row whole, the reference the benchmarks
            and tests compare with).
        deadline_at: stop between optimizer steps when the next step is not expected to
            end before this time (UTC; the first step always runs:
            :mod:`mindforge.trainer.budget`). Set for each run by the Update from its time
            budget, not a hyper-parameter; None: no deadline.
    """

    model_config = ConfigDict(extra="forbid")

    lora_rank: int = Field(default=16, ge=1)
    lora_alpha: float = Field(default=32.0, gt=0)
    lora_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    learning_rate: float = Field(default=1e-4, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float = Field(default=1.0, ge=0)
    epochs: int = Field(default=2, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=8, ge=1)
    micro_batch_size: int | None = Field(default=None, ge=1)
    micro_batch_positions: int | None = Field(default=2048, ge=1)
    clip_eps_low: float = Field(default=0.2, gt=0, lt=1)
    clip_eps_high: float = Field(default=0.28, gt=0)
    kl_coef: float = Field(default=0.0, ge=0)
    icepop_low: float = Field(default=0.5, gt=0)
    icepop_high: float = Field(default=5.0, gt=0)
    adv_eps: float = Field(default=1e-6, gt=0)
    guide_loss: Literal["weighted_nll", "luffy_shaping"] = "weighted_nll"
    guide_gamma: float = Field(default=0.1, gt=0)
    seed: int = 0
    max_seq_len: int = Field(default=8192, ge=2)
    use_bf16: bool = True
    gradient_checkpointing: bool = False
    checkpoint_above_tokens: int | None = Field(default=1024, ge=1)
    share_prompt: bool = True
    deadline_at: datetime | None = None

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if not self.icepop_low < 1.0 < self.icepop_high:
            raise ValueError("IcePop band must contain 1: icepop_low < 1 < icepop_high")
        if self.micro_batch_size is not None and self.micro_batch_size > self.batch_size:
            raise ValueError("micro_batch_size must not exceed batch_size")
        if not self.target_modules:
            raise ValueError("target_modules must name at least one module")
        if self.deadline_at is not None and self.deadline_at.tzinfo is None:
            raise ValueError("deadline_at must be timezone-aware (UTC)")
        return self


class RewardStats(BaseModel):
    """Reward summary over the training samples (rewards in [0, 1])."""

    num_samples: int
    num_groups: int
    mean: float
    std: float
    min: float
    max: float
    #: groups whose rewards are all equal (zero advantage: no policy-gradient signal)
    flat_groups: int


class TrainResult(BaseModel):
    """What :func:`mindforge.trainer.grpo.train_grpo` produced.

    Attributes:
        adapter_dir: the saved PEFT adapter (``adapter_config.json`` +
            ``adapter_model.safetensors``).
        base_model_path: the frozen base the adapter applies to.
        parent_adapter: the adapter training started from, if any.
        steps: optimizer steps taken.
        planned_steps: optimizer steps the epochs (or ``max_steps``) asked for.
        stop_reason: what ended the run: ``epochs`` (all ran), ``max_steps``, or
            ``deadline`` (``TrainerConfig.deadline_at``: stopped early between steps; the
            adapter holds the steps taken).
        mean_loss: mean of the per-step losses.
        losses: per-step loss (token-mean GRPO objective, see grpo.py).
        tokens_trained: model tokens that received gradient, summed over steps.
        icepop_masked_tokens: model tokens masked by IcePop, summed over steps.
        clipped_tokens: model tokens whose PPO ratio was clipped, summed over steps.
        samples_used: samples with a non-zero advantage (the ones trained on).
        off_policy_samples: guide samples among them (:mod:`mindforge.trainer.guidance`).
        zero_advantage_samples: samples skipped because their group was flat.
        reward: reward statistics of the input samples.
        device / dtype: where training ran and the base weights' dtype.
        compute_dtype: the dtype the forwards ran in (``bfloat16`` under CPU autocast).
        wall_sec: training wall time in seconds (model load included).
        lora_rank: rank of the saved adapter.
    """

    adapter_dir: Path
    base_model_path: Path
    parent_adapter: Path | None = None
    steps: int
    planned_steps: int = 0
    stop_reason: StopReason = "epochs"
    mean_loss: float
    losses: list[float]
    tokens_trained: int
    icepop_masked_tokens: int
    clipped_tokens: int
    samples_used: int
    off_policy_samples: int = 0
    zero_advantage_samples: int
    reward: RewardStats
    device: str
    dtype: str
    compute_dtype: str = ""
    wall_sec: float
    lora_rank: int
    seed: int


class GuideRef(BaseModel):
    """The off-policy guide of a group: a validated experience entry of the group's task.

    Attributes:
        entry_id: the entry (``exp-`` + 16 hex) in the training contract's snapshot.
        task_hash: the task it solves (the group's).
        provenance: ``oracle`` (the task's reference solution) or ``model`` (a passed trial).
        source_trial_id: the trial the entry was mined from (``oracle`` for a reference solution).
        snapshot_id: the experience snapshot that holds it.
        reward: the guide's reward: 1.0, what every validation replay of the entry scored.
    """

    entry_id: str
    task_hash: str
    provenance: str
    source_trial_id: str
    snapshot_id: str
    reward: float = Field(default=1.0, ge=0.0, le=1.0)


class SelectedGroup(BaseModel):
    """One GRPO group kept for training.

    Attributes:
        group_id: ``<task_hash[:16]>/<contract_hash[:12]>/<adapter or "base">``.
        task_hash / task_id: the task.
        contract_hash / adapter: the pair the attempts ran under.
        trial_ids: the kept attempts, shape (n,), n >= 2.
        rewards: their rewards in [0, 1], shape (n,); not all equal, unless ``guide`` is set.
        guide: with off-policy guidance, the entry whose guide joins a group whose
            attempts all scored below the guide's reward (None otherwise).
    """

    group_id: str
    task_hash: str
    task_id: str
    contract_hash: str
    adapter: str = ""
    trial_ids: list[str]
    rewards: list[float]
    guide: GuideRef | None = None

    @property
    def reward_std(self) -> float:
        """Population standard deviation of the group's rewards (the guide's included)."""
        return statistics.pstdev([*self.rewards, *([self.guide.reward] if self.guide else [])])


class SelectionReport(BaseModel):
    """What selection kept and what it dropped, with a count for every choice.

    Attributes:
        trials_seen: trials given to selection.
        non_search_trials: trials on selection or sealed tasks, set aside (never trained on).
        non_search_tasks: distinct such tasks among them.
        dropped_no_reward: trials without a usable real reward (sum of ``dropped_by_reason``).
        dropped_by_reason: reason -> trials: ``no_reward`` (reward None or a no-reward
            failure class), ``infra_failure`` (infrastructure/endpoint/harness failure),
            ``audit_excluded`` (audit owner infra or task), ``not_model`` (oracle/nop),
            ``no_model_turns``.
        candidate_groups: groups formed from the usable trials.
        dropped_singleton: groups with a single usable attempt.
        dropped_no_signal: groups whose rewards are all equal (and that no guide joined).
        guided_groups: groups whose attempts all scored below 1 that a guide joined
            (kept, counted in ``kept_groups``).
        capped_groups: groups over ``max_groups_per_task`` for their task.
        capped_trials: attempts trimmed by ``max_trials_per_group`` (from kept groups).
        kept_groups / kept_trials / kept_tasks: what training gets.
        max_groups_per_task / max_trials_per_group: the caps applied.
        groups: the kept groups.
    """

    trials_seen: int = 0
    non_search_trials: int = 0
    non_search_tasks: int = 0
    dropped_no_reward: int = 0
    dropped_by_reason: dict[str, int] = Field(default_factory=dict)
    candidate_groups: int = 0
    dropped_singleton: int = 0
    dropped_no_signal: int = 0
    guided_groups: int = 0
    capped_groups: int = 0
    capped_trials: int = 0
    kept_groups: int = 0
    kept_trials: int = 0
    kept_tasks: int = 0
    max_groups_per_task: int = 0
    max_trials_per_group: int = 0
    groups: list[SelectedGroup] = Field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        """The report without the group list (for the generation record)."""
        return self.model_dump(mode="json", exclude={"groups"})

    @property
    def trial_ids(self) -> list[str]:
        """Ids of every kept attempt, group by group."""
        return [t for g in self.groups for t in g.trial_ids]


class AdapterReport(BaseModel):
    """What validation found.

    Attributes:
        adapter_dir: the adapter checked.
        base_model_path: the base it was checked against.
        rank: the largest LoRA rank in the adapter.
        lora_alpha: the config's alpha.
        target_modules: modules the adapter wraps.
        num_lora_tensors: LoRA A and B tensors in the weights.
        size_bytes: total size of the weights file(s), in bytes.
        weight_sha256: weights file name -> sha256 hex digest.
        sha256: digest of the primary weights file (the one a server loads).
        max_abs_logit_diff: largest |logit(adapter) - logit(base)| on the probe prompt.
    """

    adapter_dir: Path
    base_model_path: Path
    rank: int
    lora_alpha: float
    target_modules: list[str]
    num_lora_tensors: int
    size_bytes: int
    weight_sha256: dict[str, str]
    sha256: str
    max_abs_logit_diff: float
