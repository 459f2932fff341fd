"""bench_rollouts' arithmetic: rates over trial intervals, what the model allows, ceilings, intervals, trial costs."""

from __future__ import annotations

import math

import pytest

from benchmarks.rollout_parts import (
    Batch,
    active_seconds,
    ceiling,
    model_per_minute,
    paired_difference,
    per_minute,
    rate_text,
    shared_core_bound,
    trial_cost,
)
from mindforge.agent.transcript import TranscriptWriter
from mindforge.trials.record import PhaseTimings, TrialRecord


def test_active_seconds_is_the_union_of_the_intervals() -> None:
    assert active_seconds([]) == 0.0
    assert active_seconds([(0.0, 10.0), (20.0, 25.0)]) == 15.0  # the gap between them does not count
    assert active_seconds([(0.0, 10.0), (5.0, 12.0), (2.0, 3.0)]) == 12.0  # overlapping and nested
    assert active_seconds([(20.0, 25.0), (0.0, 10.0), (10.0, 11.0)]) == 16.0  # order does not matter; touching joins
    with pytest.raises(ValueError, match="ends before it starts"):
        active_seconds([(5.0, 4.0)])


def test_per_minute() -> None:
    assert per_minute(12, 60.0) == 12.0
    assert per_minute(3, 20.0) == pytest.approx(9.0)
    assert per_minute(5, 0.0) == 0.0


def test_model_allows_a_trial_its_tokens_at_the_machine_rates() -> None:
    # 1,000 computed prompt tokens at 250 tok/s (4 s) + 100 completion tokens at 50 tok/s (2 s): 6 s a trial
    assert model_per_minute(1000, 100, 250.0, 50.0) == pytest.approx(10.0)
    assert model_per_minute(0, 100, 250.0, 50.0) == pytest.approx(30.0)
    assert model_per_minute(0, 0, 250.0, 50.0) == math.inf
    with pytest.raises(ValueError, match="positive rates"):
        model_per_minute(10, 0, 0.0, 50.0)


def test_a_stage_ceiling_is_the_lower_of_floor_and_model() -> None:
    assert ceiling(90.0, 30.0) == 30.0
    assert ceiling(90.0, math.inf) == 90.0


def test_rate_text_carries_the_wilson_interval() -> None:
    assert rate_text(0, 10) == "0/10 = 0.00 [0.00, 0.28]"
    assert rate_text(5, 10) == "5/10 = 0.50 [0.24, 0.76]"
    assert rate_text(0, 0) == "0/0 = 0.00 [0.00, 1.00]"


def test_paired_difference_pairs_by_task() -> None:
    same = {"a": [1.0], "b": [0.0], "c": [1.0]}
    assert paired_difference(same, same) == (0.0, 0.0, 0.0, 3)
    mean, lo, hi, n = paired_difference({"a": [0.0], "b": [0.0]}, {"a": [1.0], "b": [1.0], "x": [1.0]})
    assert (mean, lo, hi, n) == (1.0, 1.0, 1.0, 2)  # "x" has no pair
    before = {t: [0.0] for t in "abcdefghij"}
    after = {t: [1.0 if t in "abc" else 0.0] for t in "abcdefghij"}
    mean, lo, hi, n = paired_difference(before, after)
    assert mean == pytest.approx(0.3) and 0.0 <= lo < 0.3 < hi <= 0.7 and n == 10
    with pytest.raises(ValueError, match="both arms"):
        paired_difference({"a": [1.0]}, {"b": [1.0]})


def _record(trial_id: str, task: str, reward: float | None, transcript: str = "") -> TrialRecord:
    timings = PhaseTimings(build_sec=0.1, start_sec=0.2, agent_sec=3.0, verify_sec=0.3, teardown_sec=0.4)
    artifacts = {"transcript": transcript} if transcript else {}
    return TrialRecord(trial_id=trial_id, run_id="r", task_id=task, task_hash=task, agent="model", reward=reward,
                       timings=timings, artifacts=artifacts)


def test_trial_cost_reads_the_replies_of_the_transcript(tmp_path) -> None:
    writer = TranscriptWriter(tmp_path / "transcript.jsonl")
    writer.write("request", messages=[])
    writer.write("reply", request_sec=1.5, usage={"prompt_tokens": 900, "completion_tokens": 40, "cached_tokens": 0},
                 timings={"queue_ms": 100.0, "prompt_ms": 800.0, "predicted_ms": 500.0})
    writer.write("reply", request_sec=0.5, usage={"prompt_tokens": 1000, "completion_tokens": 20, "cached_tokens": 950},
                 timings={"queue_ms": 0.0, "prompt_ms": 50.0, "predicted_ms": 300.0})
    writer.close()
    cost = trial_cost(_record("t", "a", 1.0, str(writer.path)))
    assert cost.transcript and cost.requests == 2
    assert (cost.computed_tokens, cost.cached_tokens, cost.completion_tokens) == (950, 950, 60)
    assert cost.request_sec == pytest.approx(2.0) and cost.prefill_sec == pytest.approx(0.85)
    assert cost.docker_sec == pytest.approx(1.0) and cost.agent_sec == 3.0
    missing = trial_cost(_record("u", "a", 1.0, str(tmp_path / "gone.jsonl")))
    assert not missing.transcript and missing.requests == 0


def test_batch_rate_and_rewards_by_task() -> None:
    records = [_record("1", "a", 1.0), _record("2", "a", 0.0), _record("3", "b", None)]
    batch = Batch("x", 2, 30.0, records, [trial_cost(r) for r in records])
    assert batch.per_minute == pytest.approx(6.0)
    assert batch.rewards() == {"a": [1.0, 0.0]}  # a trial without a real reward is left out
    assert batch.mean("docker_sec") == pytest.approx(1.0)


def test_the_shared_core_bound_adds_the_times_and_lies_below_the_ceiling() -> None:
    assert shared_core_bound(160.0, 40.0) == pytest.approx(32.0)  # 1 / (1/160 + 1/40): 0.375 + 1.5 s a trial
    assert shared_core_bound(160.0, 40.0) < ceiling(160.0, 40.0)
    assert shared_core_bound(60.0, 60.0) == pytest.approx(30.0)
    assert shared_core_bound(160.0, math.inf) == pytest.approx(160.0)  # a trial of no tokens costs Docker only
    with pytest.raises(ValueError, match="positive"):
        shared_core_bound(0.0, 40.0)
