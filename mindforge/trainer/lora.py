"""Base model, tokenizer and LoRA wrapping (PEFT), and per-token log-probabilities.

A training module: imports torch, transformers and PEFT at module level, so only code
that trains (or validates adapters) imports it.
"""

from __future__ import annotations

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

    Returns:
        ``(device, dtype)`` for the base model's weights.
    """
    if torch.cuda.is_available():
        dtype = torch.bfloat16 if use_bf16 and torch.cuda.is_bf16_supported() else torch.float32
        return torch.device("cuda"), dtype
    return torch.device("cpu"), torch.float32


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
    it once (batch 1, ``use_cache``), repeating its cache over the batch and running the
    suffixes against it gives the same logits, and the same gradients (the repeat is
    differentiable), as the whole rows; what is spared is ``(B - 1) * prefix`` tokens of
    forward and backward - a group's G rollouts share their whole first prompt.
    """
    if prefix < MIN_SHARED_PREFIX or _checkpointing(model):
        return model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits
    out = model(input_ids=input_ids[:1, :prefix], use_cache=True)
    # transformers 5 names the KV cache ``cache`` (``past_key_values`` before, deprecated since)
    name = "cache" if getattr(out, "cache", None) is not None else "past_key_values"
    cache = getattr(out, name)
    cache.batch_repeat_interleave(input_ids.shape[0])
    suffix = {"input_ids": input_ids[:, prefix:], "attention_mask": attention_mask, name: cache}
    return model(**suffix, logits_to_keep=keep, use_cache=False).logits


def per_token_logps(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, first: int = 1,
    *, share_prefix: bool = True,
) -> torch.Tensor:
    """Log-probability of each token given its prefix.

    Only positions ``>= first`` are computed (``logits_to_keep``), which spares the
    vocabulary-sized logits of the prompt, and the prefix all rows share runs once
    (:func:`shared_prefix_len`; not under gradient checkpointing, which drops the cache).

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
