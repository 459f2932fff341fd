"""bfloat16 autocast on the CPU: chosen at run time, never for the tiny model, and an update close to float32's."""

from __future__ import annotations

import pytest
import torch

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.grpo import grpo_step, make_optimizer
from mindforge.trainer.objective import group_advantages

CONFIG = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=8, seed=0, checkpoint_above_tokens=1)
CPU = torch.device("cpu")


def test_autocast_is_bfloat16_only_for_a_large_model_on_a_cpu_that_multiplies_it(tiny_model_dir) -> None:
    tiny = lora.load_base(tiny_model_dir, CPU, torch.float32)
    assert lora.autocast_dtype(tiny, CPU, use_bf16=True) is None  # a few hundred thousand parameters
    large = torch.nn.Linear(8192, 8192, device="meta")  # 67M parameters, no memory
    assert sum(p.numel() for p in large.parameters()) >= lora.CPU_BF16_MIN_PARAMS
    expected = torch.bfloat16 if lora.cpu_has_native_bf16() else None
    assert lora.autocast_dtype(large, CPU, use_bf16=True) is expected
    assert lora.autocast_dtype(large, CPU, use_bf16=False) is None
    assert lora.autocast_dtype(large, torch.device("cuda"), use_bf16=True) is None  # bf16 weights there instead


def _one_step(tiny_model_dir, samples, pad_id: int, dtype: torch.dtype | None) -> tuple[float, torch.Tensor, list]:
    model = lora.wrap_lora(lora.load_base(tiny_model_dir, CPU, torch.float32), CONFIG)
    before = torch.cat([p.detach().flatten().clone() for p in lora.lora_parameters(model).values()])
    adv = group_advantages([s.reward for s in samples], [s.group_id for s in samples])
    stats = grpo_step(model, make_optimizer(model, CONFIG), samples, adv, CONFIG, pad_id=pad_id, device=CPU,
                      compute_dtype=dtype)  # fmt: skip
    params = list(lora.lora_parameters(model).values())
    after = torch.cat([p.detach().flatten() for p in params])
    return stats.loss, after - before, [p.dtype for p in params]


def test_a_bfloat16_step_keeps_float32_parameters_and_moves_them_as_float32_does(
    yes_no_samples, tokenizer, tiny_model_dir
) -> None:
    """Checkpointed (every micro-batch), shared prompt, AdamW: the same step under autocast and without."""
    pad = tokenizer.pad_token_id
    loss32, delta32, _ = _one_step(tiny_model_dir, yes_no_samples, pad, None)
    loss16, delta16, dtypes = _one_step(tiny_model_dir, yes_no_samples, pad, torch.bfloat16)
    assert set(dtypes) == {torch.float32}  # LoRA weights and AdamW stay float32
    assert loss16 == pytest.approx(loss32, abs=0.01)
    assert float(delta32.norm()) > 0
    cosine = float(torch.nn.functional.cosine_similarity(delta16, delta32, dim=0))
    assert cosine > 0.9
