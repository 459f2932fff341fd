"""The Update's time budget inside training: the loop stops between optimizer steps, within one step of it.

Real tiny model and real PEFT training. No timed assertion: where the deadline is ahead
of now, a clock passed in (the trainer's ``clock``) advances a fixed number of seconds
per optimizer step, so a step's duration is known exactly; where it is behind, the wall
clock serves (any step outlasts a deadline that has passed already).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import torch

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.budget import StepBudget
from mindforge.trainer.grpo import group_advantages, train_grpo, train_steps
from mindforge.trainer.validate_adapter import validate_adapter

CONFIG = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=2, epochs=3, seed=0)


class StepClock:
    """POSIX seconds that advance by ``step_sec`` each time an optimizer step ends (via the progress callback)."""

    def __init__(self, start: float, step_sec: float) -> None:
        self.now, self.step_sec = start, step_sec

    def __call__(self) -> float:
        return self.now

    def step_done(self, *_args) -> None:
        self.now += self.step_sec


def test_the_first_step_always_runs_and_a_step_starts_only_if_it_is_expected_to_end_in_time() -> None:
    start = 1_000_000.0
    deadline = datetime.fromtimestamp(start + 35.0, UTC)
    clock = StepClock(start, 10.0)
    budget = StepBudget(None, deadline, clock)
    taken = 0
    while budget.allows(taken):
        taken += 1
        clock.step_done()
    # steps end at 10, 20, 30; a fourth would end at 40 > 35
    assert (taken, budget.stop_reason, clock.now) == (3, "deadline", start + 30.0)

    late = StepClock(start + 100.0, 10.0)  # past the deadline before the first step
    late_budget = StepBudget(None, deadline, late)
    assert late_budget.allows(0) and not late_budget.allows(1) and late_budget.stop_reason == "deadline"

    capped = StepBudget(2, None)
    assert capped.allows(0) and capped.allows(1) and not capped.allows(2) and capped.stop_reason == "max_steps"
    with pytest.raises(ValueError, match="timezone-aware"):
        StepBudget(None, datetime(2026, 1, 1), clock)
    with pytest.raises(ValueError, match="timezone-aware"):
        CONFIG.model_validate({**CONFIG.model_dump(), "deadline_at": datetime(2026, 1, 1)})


def test_training_stops_within_one_optimizer_step_of_the_deadline(yes_no_samples, tokenizer, tiny_model_dir) -> None:
    """8 samples, batch 2, 3 epochs: 12 steps planned; at 10 s a step and a deadline 35 s away, 3 run."""
    start = 1_000_000.0
    clock = StepClock(start, 10.0)
    config = CONFIG.model_copy(update={"deadline_at": datetime.fromtimestamp(start + 35.0, UTC)})
    model = lora.wrap_lora(lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32), config)
    adv = group_advantages([s.reward for s in yes_no_samples], [s.group_id for s in yes_no_samples])
    totals = train_steps(
        model, yes_no_samples, adv, config, pad_id=tokenizer.pad_token_id, device=torch.device("cpu"),
        progress_cb=clock.step_done, clock=clock,
    )
    assert (len(totals["losses"]), totals["planned_steps"], totals["stop_reason"]) == (3, 12, "deadline")
    assert clock.now <= start + 35.0  # every step that started ended before the deadline

    without = train_steps(
        model, yes_no_samples, adv, CONFIG.model_copy(update={"max_steps": 5}), pad_id=tokenizer.pad_token_id,
        device=torch.device("cpu"),
    )
    assert (len(without["losses"]), without["planned_steps"], without["stop_reason"]) == (5, 5, "max_steps")


def test_a_run_past_its_deadline_takes_one_step_and_saves_a_valid_adapter(
    yes_no_samples, tiny_model_dir, tmp_path
) -> None:
    config = CONFIG.model_copy(update={"deadline_at": datetime.now(UTC) - timedelta(seconds=1)})
    result = train_grpo(tiny_model_dir, yes_no_samples, config, tmp_path / "late")
    assert (result.steps, result.planned_steps, result.stop_reason) == (1, 12, "deadline")
    report = validate_adapter(result.adapter_dir, tiny_model_dir, max_rank=16)  # not zero, changes the logits
    assert report.max_abs_logit_diff > 0

    full = train_grpo(tiny_model_dir, yes_no_samples, CONFIG.model_copy(update={"epochs": 1}), tmp_path / "full")
    assert (full.steps, full.planned_steps, full.stop_reason) == (4, 4, "epochs")
