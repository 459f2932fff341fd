"""Weight update: GRPO on a LoRA adapter (TRL + PEFT + torch), and adapter validation.

Importing this package is cheap: the settings, sample builder and errors are pure; the
training entry points load torch on first use::

    from mindforge.trainer import TrainerConfig, build_samples, train_grpo, validate_adapter
"""

from __future__ import annotations

from typing import Any

from mindforge.payloads.training import AdapterReport, RewardStats, TrainerConfig, TrainResult
from mindforge.trainer.errors import (
    AdapterValidationError,
    EmptyAdapterError,
    NoEffectError,
    NoTrainingSignalError,
    RankLimitError,
    SampleDropped,
    TrainerError,
    UnservableAdapterError,
    ZeroAdapterError,
)
from mindforge.trainer.samples import (
    SampleSet,
    TrainingSample,
    build_samples,
    trajectory_to_sample,
)

_LAZY = {
    "train_grpo": "mindforge.trainer.grpo",
    "group_advantages": "mindforge.trainer.grpo",
    "validate_adapter": "mindforge.trainer.validate_adapter",
}


def __getattr__(name: str) -> Any:
    """Import torch-backed names on first access."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AdapterReport",
    "AdapterValidationError",
    "EmptyAdapterError",
    "NoEffectError",
    "NoTrainingSignalError",
    "RankLimitError",
    "RewardStats",
    "SampleDropped",
    "SampleSet",
    "TrainResult",
    "TrainerConfig",
    "TrainerError",
    "TrainingSample",
    "UnservableAdapterError",
    "ZeroAdapterError",
    "build_samples",
    "group_advantages",
    "train_grpo",
    "trajectory_to_sample",
    "validate_adapter",
]
