"""Checks an adapter must pass before it is registered as a revision.

In order, each failure its own named error (see :mod:`mindforge.trainer.errors`):

1. the directory, ``adapter_config.json`` and a non-empty weights file exist
   (:class:`EmptyAdapterError`);
2. it is a plain LoRA a LoRA server can hot-load: no ``modules_to_save`` (full copies of
   modules), no trainable or added tokens, no resized embeddings, no DoRA, no LoRA bias
   (:class:`UnservableAdapterError`; vLLM's ``--enable-lora`` serves LoRA matrices only);
3. its rank, from the config (``r`` and ``rank_pattern``) and from the tensor shapes, is at
   most ``max_rank`` (:class:`RankLimitError`; vLLM's ``--max-lora-rank``);
4. some LoRA B matrix is non-zero (:class:`ZeroAdapterError`: B starts at zero, so an
   all-zero B is an untrained adapter);
5. it changes the base model's logits on a fixed probe prompt by more than ``atol``
   (:class:`NoEffectError`).

The report carries the sha256 of every weights file, for the artifact registry.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from mindforge.payloads.training import AdapterReport
from mindforge.trainer.errors import (
    EmptyAdapterError,
    NoEffectError,
    RankLimitError,
    UnservableAdapterError,
    ZeroAdapterError,
)

WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
DEFAULT_PROBE_PROMPT = "You are operating a Linux terminal. List the files in /app, then write the answer to out.txt."


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in ``chunk_bytes`` chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def _read_config(adapter_dir: Path) -> tuple[dict, Path]:
    if not adapter_dir.is_dir():
        raise EmptyAdapterError(f"{adapter_dir}: adapter directory does not exist")
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file() or config_path.stat().st_size == 0:
        raise EmptyAdapterError(f"{config_path}: missing or empty")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EmptyAdapterError(f"{config_path}: not JSON ({exc.msg})") from exc
    weights = next((adapter_dir / n for n in WEIGHT_FILES if (adapter_dir / n).is_file()), None)
    if weights is None or weights.stat().st_size == 0:
        raise EmptyAdapterError(f"{adapter_dir}: no non-empty {' or '.join(WEIGHT_FILES)}")
    return config, weights


def _load_tensors(weights: Path) -> dict:
    import torch

    if weights.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(weights))
        except Exception as exc:  # safetensors raises its own SafetensorError
            raise EmptyAdapterError(f"{weights}: unreadable safetensors ({exc})") from exc
    return torch.load(str(weights), map_location="cpu", weights_only=True)


def _check_servable(config: dict, tensors: dict, adapter_dir: Path) -> None:
    if config.get("peft_type", "LORA") != "LORA":
        raise UnservableAdapterError(f"{adapter_dir}: peft_type {config.get('peft_type')!r} is not LORA")
    if config.get("modules_to_save"):
        raise UnservableAdapterError(f"{adapter_dir}: modules_to_save {config['modules_to_save']} (full module copies)")
    if config.get("trainable_token_indices"):
        raise UnservableAdapterError(f"{adapter_dir}: trainable_token_indices set (token embeddings trained)")
    if config.get("use_dora"):
        raise UnservableAdapterError(f"{adapter_dir}: DoRA adapters are not servable as plain LoRA")
    if config.get("lora_bias") or config.get("bias", "none") != "none":
        raise UnservableAdapterError(f"{adapter_dir}: LoRA with bias terms is not servable as plain LoRA")
    added = adapter_dir / "added_tokens.json"
    if added.is_file() and json.loads(added.read_text(encoding="utf-8") or "{}"):
        raise UnservableAdapterError(f"{added}: the adapter adds tokens to the vocabulary")
    extra = [k for k in tensors if "lora_A" not in k and "lora_B" not in k]
    if extra:
        raise UnservableAdapterError(
            f"{adapter_dir}: non-LoRA tensors (resized embeddings or saved modules): {sorted(extra)[:5]}"
        )


def _rank(config: dict, tensors: dict) -> int:
    ranks = [int(config.get("r", 0))] + [int(v) for v in (config.get("rank_pattern") or {}).values()]
    ranks += [int(t.shape[0]) for k, t in tensors.items() if "lora_A" in k and t.ndim >= 1]
    return max(ranks)


def _probe_logit_diff(adapter_dir: Path, base_model_path: Path, prompt: str) -> float:
    import torch
    from peft import PeftModel

    from mindforge.trainer import lora

    tokenizer = lora.load_tokenizer(base_model_path)
    base = lora.load_base(base_model_path, torch.device("cpu"), torch.float32).eval()
    model = PeftModel.from_pretrained(base, str(adapter_dir)).eval()
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
        with model.disable_adapter():
            plain = model(input_ids=ids).logits
    return float((adapted - plain).abs().max())


def validate_adapter(
    adapter_dir: Path,
    base_model_path: Path,
    *,
    max_rank: int,
    probe_prompt: str = DEFAULT_PROBE_PROMPT,
    atol: float = 1e-6,
) -> AdapterReport:
    """Validate a PEFT LoRA adapter for registration and serving.

    The logit probe runs on CPU in float32 (one forward of the base and one of the
    adapted model on ``probe_prompt``).

    Args:
        adapter_dir: the adapter directory (``save_pretrained`` output).
        base_model_path: the base model it applies to.
        max_rank: largest LoRA rank the serving endpoint accepts.
        probe_prompt: fixed text whose logits must change under the adapter.
        atol: logits differing by at most this (absolute) count as unchanged.

    Returns:
        the report, with sha256 digests of the weights.

    Raises:
        EmptyAdapterError, UnservableAdapterError, RankLimitError, ZeroAdapterError,
        NoEffectError: in the order checked (see the module docstring).
    """
    adapter_dir, base_model_path = Path(adapter_dir), Path(base_model_path)
    config, weights = _read_config(adapter_dir)
    tensors = _load_tensors(weights)
    if not tensors:
        raise EmptyAdapterError(f"{weights}: holds no tensors")
    _check_servable(config, tensors, adapter_dir)
    rank = _rank(config, tensors)
    if rank > max_rank:
        raise RankLimitError(f"{adapter_dir}: LoRA rank {rank} exceeds max_rank {max_rank}")
    b_matrices = [t for k, t in tensors.items() if "lora_B" in k]
    if not b_matrices or all(not bool(t.any()) for t in b_matrices):
        raise ZeroAdapterError(f"{adapter_dir}: all {len(b_matrices)} LoRA B matrices are zero (untrained)")
    diff = _probe_logit_diff(adapter_dir, base_model_path, probe_prompt)
    if not diff > atol:
        raise NoEffectError(f"{adapter_dir}: max |logit change| {diff:.3g} <= atol {atol:g} on the probe prompt")
    files = [adapter_dir / n for n in WEIGHT_FILES if (adapter_dir / n).is_file()]
    target = config.get("target_modules") or []
    return AdapterReport(
        adapter_dir=adapter_dir,
        base_model_path=base_model_path,
        rank=rank,
        lora_alpha=float(config.get("lora_alpha", 0)),
        target_modules=sorted(target) if isinstance(target, list) else [str(target)],
        num_lora_tensors=len(tensors),
        size_bytes=sum(f.stat().st_size for f in files),
        weight_sha256={f.name: sha256_file(f) for f in files},
        sha256=sha256_file(weights),
        max_abs_logit_diff=diff,
    )
