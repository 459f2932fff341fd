"""Adapter validation: each failure mode raises its own error; a trained adapter passes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.errors import (
    EmptyAdapterError,
    NoEffectError,
    RankLimitError,
    UnservableAdapterError,
    ZeroAdapterError,
)
from mindforge.trainer.validate_adapter import validate_adapter

WEIGHTS = "adapter_model.safetensors"


@pytest.fixture()
def adapter_copy(trained_adapter, tmp_path: Path) -> Path:
    dst = tmp_path / "adapter"
    shutil.copytree(trained_adapter.adapter_dir, dst)
    return dst


def test_trained_adapter_passes_with_digests(trained_adapter, tiny_model_dir) -> None:
    report = validate_adapter(trained_adapter.adapter_dir, tiny_model_dir, max_rank=16)
    weights = trained_adapter.adapter_dir / WEIGHTS
    assert report.sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert report.weight_sha256 == {WEIGHTS: report.sha256}
    assert report.rank == 4 and report.lora_alpha == 8
    assert report.max_abs_logit_diff > 1e-6
    assert report.num_lora_tensors == 2 * 7 * 2  # A and B, 7 projections, 2 layers
    assert report.size_bytes == weights.stat().st_size


def test_fresh_adapter_is_zero(tiny_model_dir, tmp_path: Path) -> None:
    base = lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32)
    lora.wrap_lora(base, TrainerConfig(lora_rank=4)).save_pretrained(str(tmp_path / "fresh"))
    with pytest.raises(ZeroAdapterError):
        validate_adapter(tmp_path / "fresh", tiny_model_dir, max_rank=16)


def test_rank_limit(trained_adapter, tiny_model_dir) -> None:
    validate_adapter(trained_adapter.adapter_dir, tiny_model_dir, max_rank=4)
    with pytest.raises(RankLimitError, match="rank 4 exceeds max_rank 2"):
        validate_adapter(trained_adapter.adapter_dir, tiny_model_dir, max_rank=2)


def test_missing_or_empty(adapter_copy: Path, tiny_model_dir, tmp_path: Path) -> None:
    with pytest.raises(EmptyAdapterError):
        validate_adapter(tmp_path / "nowhere", tiny_model_dir, max_rank=16)
    (adapter_copy / WEIGHTS).write_bytes(b"")
    with pytest.raises(EmptyAdapterError, match="no non-empty"):
        validate_adapter(adapter_copy, tiny_model_dir, max_rank=16)
    (adapter_copy / WEIGHTS).unlink()
    with pytest.raises(EmptyAdapterError):
        validate_adapter(adapter_copy, tiny_model_dir, max_rank=16)


def test_unservable_parts(adapter_copy: Path, tiny_model_dir) -> None:
    config_path = adapter_copy / "adapter_config.json"
    original = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**original, "modules_to_save": ["lm_head"]}))
    with pytest.raises(UnservableAdapterError, match="modules_to_save"):
        validate_adapter(adapter_copy, tiny_model_dir, max_rank=16)
    config_path.write_text(json.dumps(original))
    tensors = load_file(str(adapter_copy / WEIGHTS))
    tensors["base_model.model.model.embed_tokens.weight"] = torch.zeros(4, 4)  # resized-embedding copy
    save_file(tensors, str(adapter_copy / WEIGHTS))
    with pytest.raises(UnservableAdapterError, match="non-LoRA tensors"):
        validate_adapter(adapter_copy, tiny_model_dir, max_rank=16)


def test_no_effect(adapter_copy: Path, tiny_model_dir) -> None:
    tensors = load_file(str(adapter_copy / WEIGHTS))
    # B stays non-zero but A is zeroed: the product B @ A, the adapter's whole effect, vanishes
    save_file({k: torch.zeros_like(t) if "lora_A" in k else t for k, t in tensors.items()}, str(adapter_copy / WEIGHTS))
    with pytest.raises(NoEffectError):
        validate_adapter(adapter_copy, tiny_model_dir, max_rank=16)
