"""The trainer's CUDA path: device placement and bfloat16, where a CUDA device is present.

On a machine without one (CI, this project's 2-core hosts) every test here is skipped
with that reason; the CPU path is tested in test_trainer_grpo.py. Where CUDA is present
the same tiny model and samples train on it.
"""

from __future__ import annotations

import math

import pytest
import torch

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.grpo import train_grpo

#: a CUDA device is here (torch itself is installed by set-up everywhere: only the device may be missing)
HAS_CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device here (the CPU path: test_trainer_grpo.py)")

CONFIG = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=4, epochs=1, max_steps=2, seed=0)


def test_pick_device_takes_cuda_in_bfloat16_when_supported() -> None:
    device, dtype = lora.pick_device(use_bf16=True)
    assert device.type == "cuda"
    assert dtype == (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32)
    assert lora.pick_device(use_bf16=False) == (torch.device("cuda"), torch.float32)


def test_training_runs_on_cuda_and_saves_an_adapter_the_cpu_loads(yes_no_samples, tiny_model_dir, tmp_path) -> None:
    from mindforge.trainer.validate_adapter import validate_adapter

    result = train_grpo(tiny_model_dir, yes_no_samples, CONFIG.model_copy(update={"use_bf16": True}), tmp_path / "a")
    assert result.device.startswith("cuda")
    assert result.dtype == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32")
    assert result.losses and all(math.isfinite(loss) for loss in result.losses)
    # the saved adapter is plain PEFT: it validates (loads, probes against the base) wherever it is read
    report = validate_adapter(tmp_path / "a", tiny_model_dir, max_rank=8)
    assert report.rank == 4 and report.max_abs_logit_diff > 0.0
