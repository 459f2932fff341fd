"""The Update stage's training task body (``workers.ray_trials.train_adapter_payload``), called directly.

Real tiny model, real PEFT training on ATIF files written here; the Ray queue is replaced
by a list-backed object with the same ``put_nowait`` (the function only puts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.atif import write_trajectory
from mindforge.payloads import TrainAdapterResult
from mindforge.payloads.ray_tasks import TrainingItem, TrainTaskInput
from mindforge.payloads.training import TrainerConfig
from workers.ray_trials import TRAIN_RECORD, train_adapter_payload

CONFIG = TrainerConfig(lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-2, batch_size=4)


class Progress:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    def put_nowait(self, message: dict) -> None:
        self.messages.append(message)


def _items(make_trajectory, root: Path, rewards: list[float], *, record: bool) -> list[TrainingItem]:
    items = []
    for k, reward in enumerate(rewards):
        traj = make_trajectory([{"text": " yes" if reward else " no"}], session_id=f"s{k}", record=record)
        path = write_trajectory(traj, root / f"t{k}" / "trajectory.json")
        items.append(TrainingItem(trial_id=f"t{k}", trajectory=str(path), reward=reward, group_id="g"))
    return items


def test_trains_reports_progress_and_is_idempotent(make_trajectory, tiny_model_dir, tmp_path):
    items = _items(make_trajectory, tmp_path, [1.0, 0.0, 1.0, 0.0], record=False)
    items.append(TrainingItem(trial_id="gone", trajectory=str(tmp_path / "missing.json"), reward=1.0, group_id="g"))
    payload = TrainTaskInput(
        base_model_path=str(tiny_model_dir), items=items, config=CONFIG,
        out_dir=str(tmp_path / "adapters" / "lin" / "lin-g0-r0"),
    )
    progress = Progress()
    out = train_adapter_payload(payload, progress)
    assert out.trained and out.samples_built == 4
    assert out.samples_dropped == {"unreadable_trajectory": 1}
    out_dir = Path(out.adapter_dir)
    assert (out_dir / "adapter_model.safetensors").is_file() and (out_dir / TRAIN_RECORD).is_file()
    assert not [p for p in out_dir.parent.iterdir() if p.name.startswith(".")]  # no partial dir left
    steps = [m for m in progress.messages if m.get("step")]
    assert [m["step"] for m in steps] == list(range(1, out.train.steps + 1))
    assert all({"loss", "tokens", "reward_mean", "reward_std"} <= m.keys() for m in steps)
    assert steps[0]["reward_mean"] == pytest.approx(0.5)
    # a retry finds the finished adapter and returns its record without training again
    before = (out_dir / "adapter_model.safetensors").stat().st_mtime_ns
    again = Progress()
    assert train_adapter_payload(payload, again) == TrainAdapterResult.model_validate_json(
        (out_dir / TRAIN_RECORD).read_text()
    )
    assert again.messages == [] and (out_dir / "adapter_model.safetensors").stat().st_mtime_ns == before


def test_no_signal_after_tokenisation_is_an_outcome(make_trajectory, tiny_model_dir, tmp_path):
    items = _items(make_trajectory, tmp_path, [1.0, 1.0], record=False)
    payload = TrainTaskInput(
        base_model_path=str(tiny_model_dir), items=items, config=CONFIG,
        out_dir=str(tmp_path / "adapters" / "lin" / "lin-g0-r0"),
    )
    out = train_adapter_payload(payload)
    assert out.trained is False and "zero advantage" in out.reason
    assert not (tmp_path / "adapters" / "lin" / "lin-g0-r0").exists()


def test_the_updates_deadline_stops_training_between_steps_and_the_record_says_so(
    make_trajectory, tiny_model_dir, tmp_path
):
    """The deadline the workflow hands ``train_adapter`` reaches the trainer; one past already allows one step."""
    from datetime import UTC, datetime, timedelta

    from mindforge.payloads import TrainAdapterInput, UpdateSpec
    from workers.training_activities import run_config

    trainer = CONFIG.model_copy(update={"batch_size": 2, "epochs": 3})
    spec = UpdateSpec(base_model_path=str(tiny_model_dir), trainer=trainer)
    deadline = datetime.now(UTC) - timedelta(seconds=1)
    inp = TrainAdapterInput(lineage_id="lin", generation=0, update=spec, adapter_name="lin-g0-r0-i0", groups=[],
                            deadline_at=deadline)  # fmt: skip
    config = run_config(inp)
    assert config.deadline_at == deadline and config.model_copy(update={"deadline_at": None}) == spec.trainer
    assert run_config(inp.model_copy(update={"deadline_at": None})) is spec.trainer
    items = _items(make_trajectory, tmp_path, [1.0, 0.0, 1.0, 0.0], record=False)
    payload = TrainTaskInput(
        base_model_path=str(tiny_model_dir), items=items, config=config,
        out_dir=str(tmp_path / "adapters" / "lin" / "lin-g0-r0-i0"),
    )
    out = train_adapter_payload(payload)
    assert out.trained and out.train is not None
    assert (out.train.steps, out.train.planned_steps, out.train.stop_reason) == (1, 6, "deadline")
    assert (Path(out.adapter_dir) / "adapter_model.safetensors").is_file()
    record = TrainAdapterResult.model_validate_json((Path(out.adapter_dir) / TRAIN_RECORD).read_text())
    assert record.train is not None and record.train.stop_reason == "deadline"
