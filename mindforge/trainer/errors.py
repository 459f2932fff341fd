"""Named failures of the weight-update path (one exception per failure mode)."""

from __future__ import annotations

from mindforge.errors import MindForgeError


class TrainerError(MindForgeError):
    """Base class of weight-update failures."""


class NoTrainingSignalError(TrainerError):
    """No sample has a non-zero advantage (every group is flat), so GRPO has nothing to learn."""


class SampleDropped(TrainerError):
    """A trajectory cannot become a training sample; ``reason`` is a short stable key.

    Args:
        reason: e.g. ``token_mismatch``, ``no_model_tokens``, ``too_long``.
        detail: one line of evidence.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class AdapterValidationError(TrainerError):
    """Base class of adapter-validation failures; never retryable (the adapter is what it is)."""


class EmptyAdapterError(AdapterValidationError):
    """The adapter directory, its config or its weights file is missing or empty."""


class ZeroAdapterError(AdapterValidationError):
    """Every LoRA B matrix is zero: the adapter is a fresh, untrained initialisation."""


class NoEffectError(AdapterValidationError):
    """The adapter does not change the base model's logits on the probe prompt."""


class RankLimitError(AdapterValidationError):
    """The adapter's LoRA rank exceeds what the serving endpoint accepts."""


class UnservableAdapterError(AdapterValidationError):
    """The adapter carries parts a LoRA server cannot hot-load (full modules, new tokens, DoRA)."""
