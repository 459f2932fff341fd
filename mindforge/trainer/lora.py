"""Base model, tokenizer and LoRA wrapping (PEFT), and per-token log-probabilities.

A training module: imports torch, transformers and PEFT at module level, so only code
that trains (or validates adapters) imports it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import cast

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from trl.trainer.utils import selective_log_softmax

from mindforge.errors import InputError
from mindforge.payloads.training import TrainerConfig


def pick_device(use_bf16: bool = True) -> tuple[torch.device, torch.dtype]:
    """CUDA with bfloat16 when available (and ``use_bf16``), else CPU with float32.

    On the CPU the weights stay float32; bfloat16 enters there as autocast
    (:func:`autocast_dtype`).

    Returns:
        ``(device, dtype)`` for the base model's weights.
    """
    if torch.cuda.is_available():
        dtype = torch.bfloat16 if use_bf16 and torch.cuda.is_bf16_supported() else torch.float32
        return torch.device("cuda"), dtype
    return torch.device("cpu"), torch.float32


#: the fewest base-model parameters for which bfloat16 autocast is used on a CPU. Measured by
#: ``benchmarks/bench_train_cpu.py`` on an AMD EPYC with AVX512-BF16 (2026-12-05): SmolLM2-135M's
#: GRPO step 1.35x faster than float32 at equal loss; the tiny test model's step (a few hundred
#: thousand parameters, 64 wide) 0.62x, and under bfloat16 two trainer tests fail (a rewarded
#: reply rose 0.08 nats where 0.1 is asked; a checkpointed update no longer equals the plain one).
#: The threshold lies between the two.
CPU_BF16_MIN_PARAMS = 50_000_000


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX), as torch reports it."""
    checks = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    return any(bool(check()) for check in checks if check is not None)


def autocast_dtype(model: torch.nn.Module, device: torch.device, use_bf16: bool = True) -> torch.dtype | None:
    """The dtype the forward passes autocast to, or None (they run in the weights' dtype).

    bfloat16 on a CPU that multiplies it natively (:func:`cpu_has_native_bf16`) for a model
    of at least :data:`CPU_BF16_MIN_PARAMS` parameters, when ``use_bf16``: the weights, the
    LoRA parameters, AdamW and the loss stay float32 (log-probabilities are taken in
    float32 from the logits); the matrix multiplies run in bfloat16. None on CUDA, where
    :func:`pick_device` loads the weights in bfloat16 already.

    A caveat, measured: a bfloat16 forward rounds away a LoRA update smaller than about
    0.4% of a layer's output, so the ratios to the rollout policy that training sees lag
    the policy float32 serves (after one step the step loss read -0.014 under bfloat16
    against -0.051 in float32), while the adapter it trains is as good read in float32
    (loss -0.0963 against -0.0969 after the same two steps): ``bench_train_cpu.py``.

    Args:
        model: the model to train (its parameter count decides).
        device: where it runs.
        use_bf16: ``TrainerConfig.use_bf16``.
    """
    if not use_bf16 or device.type != "cpu" or not cpu_has_native_bf16():
        return None
    if sum(p.numel() for p in model.parameters()) < CPU_BF16_MIN_PARAMS:
        return None
    return torch.bfloat16


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    """The forward passes' precision context: ``torch.autocast`` to ``dtype`` on ``device``, or nothing when None.

    Wrap forwards (and the loss) only; the backward pass runs in the dtypes the forward
    chose, and a checkpointed layer's replay restores the autocast state of its first pass.
    """
    if dtype is None:
        return nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def load_tokenizer(base_model_path: Path):
    """The base model's tokenizer (``AutoTokenizer``), with a pad token guaranteed.

    Raises:
        InputError: the directory holds no loadable tokenizer.
    """
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(base_model_path))
    except (OSError, ValueError) as exc:
        raise InputError(base_model_path, "", f"cannot load tokenizer: {exc}") from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_base(base_model_path: Path, device: torch.device, dtype: torch.dtype) -> PreTrainedModel:
    """Load the frozen base causal LM onto ``device`` in ``dtype``.

    Raises:
        InputError: the directory holds no loadable model.
    """
    try:
        model = AutoModelForCausalLM.from_pretrained(str(base_model_path), dtype=dtype)
    except (OSError, ValueError) as exc:
        raise InputError(base_model_path, "", f"cannot load base model: {exc}") from exc
    return model.to(device)  # type: ignore[arg-type]  # transformers' @wraps(Module.to) types the method unbound


def lora_config(config: TrainerConfig) -> LoraConfig:
    """PEFT ``LoraConfig`` from the trainer settings (causal LM, no bias, no extra modules)."""
    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,  # type: ignore[arg-type]  # peft annotates int; scaling is lora_alpha / r
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )


def wrap_lora(base: PreTrainedModel, config: TrainerConfig, parent_adapter: Path | None = None) -> PeftModel:
    """Wrap ``base`` with a trainable LoRA adapter.

    A fresh adapter is initialised from ``config`` under ``torch.manual_seed(config.seed)``
    (A random, B zero, as in Hu et al. 2021). With ``parent_adapter`` the parent's
    weights and its own LoRA shape are loaded and trained further, so a new revision
    continues its lineage.

    Raises:
        InputError: ``parent_adapter`` is not a loadable PEFT adapter.
    """
    torch.manual_seed(config.seed)
    model: PeftModel
    if parent_adapter is None:
        model = get_peft_model(base, lora_config(config))
    else:
        try:
            model = PeftModel.from_pretrained(base, str(parent_adapter), is_trainable=True)
        except (OSError, ValueError) as exc:
            raise InputError(parent_adapter, "", f"cannot load parent adapter: {exc}") from exc
    for name, param in model.named_parameters():  # only LoRA matrices learn
        param.requires_grad_("lora_" in name)
    if config.gradient_checkpointing:
        set_checkpointing(model, True)
    return model


def set_checkpointing(model: torch.nn.Module, on: bool) -> None:
    """Turn activation (gradient) checkpointing of ``model``'s base on or off, between micro-batches.

    A long micro-batch keeps every layer's activations for the backward pass, the attention
    weights among them (heads x L x L floats a layer under the attention the CPU runs with a
    mask): a 3,000-token SmolLM2 trajectory held 13 GB. Checkpointing keeps each layer's
    input only and recomputes the layer in the backward pass (about one more forward).
    """
    base = cast(PreTrainedModel, model.get_base_model() if isinstance(model, PeftModel) else model)
    if _checkpointing(base) == on:
        return
    if on:
        # non-reentrant checkpointing needs no input that requires grad (the base is frozen)
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        base.gradient_checkpointing_disable()


def adapter_rank(model: PeftModel) -> int:
    """The LoRA rank ``r`` of the model's ``default`` adapter.

    Raises:
        TypeError: that adapter is not a LoRA adapter.
    """
    adapter = model.peft_config["default"]
    if not isinstance(adapter, LoraConfig):
        raise TypeError(f"the default adapter is a {type(adapter).__name__}, not a LoRA adapter")
    return int(adapter.r)


def lora_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The trainable LoRA parameters by name."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


#: the fewest tokens a batch's rows must share before their common prefix runs once
#: (below it a second forward call costs more than the tokens it spares)
MIN_SHARED_PREFIX = 32


def shared_prefix_len(input_ids: torch.Tensor, attention_mask: torch.Tensor, first: int) -> int:
    """How many leading tokens every row of the batch has in common (all real), capped at ``first - 1``.

    The cap keeps the prefix to positions whose logits are not needed: position
    ``first - 1``'s logits predict the first scored token, so it runs with the suffix.
    0 for a batch of one row.

    Args:
        input_ids / attention_mask: shape (B, L), right-padded.
        first: first position whose log-prob is needed (>= 1).
    """
    if input_ids.shape[0] < 2:
        return 0
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    run = int(same.int().cumprod(dim=0).sum())
    return max(0, min(run, first - 1))


def _checkpointing(model: torch.nn.Module) -> bool:
    """Whether activation (gradient) checkpointing is on (transformers 5 names it ``is_activation_checkpointing``)."""
    flag = getattr(model, "is_activation_checkpointing", None)
    if flag is None:
        flag = getattr(model, "is_gradient_checkpointing", False)
    return bool(flag)


def _logits(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int, prefix: int
) -> torch.Tensor:
    """The last ``keep`` positions' logits; a shared ``prefix`` runs once and its KV cache serves every row.

    Causal attention makes the prefix's keys and values the same for every row, so running
    it once and the suffixes against it gives the same logits, and the same gradients, as
    the whole rows, checkpointed or not (:mod:`mindforge.trainer.prefix`); what is spared
    is ``(B - 1) * prefix`` tokens of forward and backward - a group's G rollouts share
    their whole first prompt.
    """
    if prefix >= MIN_SHARED_PREFIX:
        try:
            from mindforge.trainer.prefix import shared_prefix_logits
        except ImportError:  # a transformers without per-layer caches (< 4.56): the rows run whole
            pass
        else:
            logits = shared_prefix_logits(model, input_ids, attention_mask, keep, prefix)
            if logits is not None:
                return logits
    return model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits


def per_token_logps(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, first: int = 1,
    *, share_prefix: bool = True,
) -> torch.Tensor:
    """Log-probability of each token given its prefix.

    Only positions ``>= first`` are computed (``logits_to_keep``), which spares the
    vocabulary-sized logits of the prompt, and the prefix all rows share runs once
    (:func:`shared_prefix_len`, :mod:`mindforge.trainer.prefix`), under activation
    checkpointing too.

    Args:
        model: a causal LM.
        input_ids: shape (B, L).
        attention_mask: shape (B, L), 1 on real tokens (right padding).
        first: first position whose log-prob is needed (>= 1).
        share_prefix: run the rows' common prefix once (False: every row whole, the
            reference the benchmark and the tests compare with).

    Returns:
        float32 tensor of shape (B, L): ``out[b, t] = log p(input_ids[b, t] | input_ids[b, :t])``
        for ``t >= first``, 0 for ``t < first``.
    """
    first = max(1, first)
    length = input_ids.shape[1]
    keep = length - first + 1  # logits at positions first-1 .. L-1; the last one predicts nothing
    prefix = shared_prefix_len(input_ids, attention_mask, first) if share_prefix else 0
    logits = _logits(model, input_ids, attention_mask, keep, prefix)
    targets = input_ids[:, first:]
    # one row at a time in float32: exact enough for probability ratios, and the peak is
    # one row's (L, vocab) float copy rather than the batch's
    logps = torch.cat(
        [
            selective_log_softmax(logits[b : b + 1, :-1, :].float(), targets[b : b + 1])
            for b in range(input_ids.shape[0])
        ]
    )
    return torch.nn.functional.pad(logps, (first, 0), value=0.0)
