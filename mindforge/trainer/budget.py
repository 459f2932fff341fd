"""When the GRPO loop stops: its epochs, its step cap, or a wall-clock deadline between optimizer steps.

The Update has a time budget (``UpdateSpec.time_budget_sec``) that its rollouts and its
training share: the workflow turns it into an absolute deadline when the loop starts and
hands it to every training run (``TrainerConfig.deadline_at``). The trainer checks it
between optimizer steps only - a step is the unit a saved adapter is made of - and
does not start a step it does not expect to finish in time (the mean duration of the
steps so far). Stopped early, the run still saves the adapter of the steps it took.

The first step always runs: the rollouts it trains on are already paid for, and a
revision needs at least one step (an untrained LoRA adapter is the base model, which
validation rejects). So a run that starts past its deadline overshoots it by one step
(plus loading and saving the model), and a run that starts before it stops within one
step of it.

Pure Python (no torch): the loop in :mod:`mindforge.trainer.grpo` asks :class:`StepBudget`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from mindforge.payloads.training import StopReason

__all__ = ["StepBudget", "StopReason"]


class StepBudget:
    """Whether another optimizer step may start.

    Args:
        max_steps: most optimizer steps (None: no cap).
        deadline: the run's deadline, timezone-aware (None: no deadline).
        clock: the current time as POSIX seconds (``time.time``; a test passes its own).
    """

    def __init__(
        self, max_steps: int | None, deadline: datetime | None, clock: Callable[[], float] = time.time
    ) -> None:
        if deadline is not None and deadline.tzinfo is None:
            raise ValueError("deadline must be timezone-aware (UTC)")
        self.max_steps = max_steps
        self.deadline = deadline.timestamp() if deadline is not None else None
        self.clock = clock
        self.started: float | None = None
        self.stop_reason: StopReason | None = None

    def allows(self, steps_taken: int) -> bool:
        """True when step ``steps_taken + 1`` may start; else False, with :attr:`stop_reason` set.

        Args:
            steps_taken: optimizer steps finished so far in this run.
        """
        if self.max_steps is not None and steps_taken >= self.max_steps:
            self.stop_reason = "max_steps"
            return False
        if self.deadline is None:
            return True
        now = self.clock()
        if self.started is None or steps_taken == 0:
            self.started = now
            return True
        mean_step = (now - self.started) / steps_taken
        if now + mean_step > self.deadline:
            self.stop_reason = "deadline"
            return False
        return True
