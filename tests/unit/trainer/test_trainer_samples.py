"""Trajectory -> token-level sample: masks, alignment, and drops by reason."""

from __future__ import annotations

import pytest

from mindforge.atif import Metrics
from mindforge.trainer.errors import SampleDropped
from mindforge.trainer.samples import build_samples, trajectory_to_sample

TURNS = [
    {"text": "Let me look.", "tool": ("bash", {"command": "ls /app"}), "obs": "README.md\nrun.sh"},
    {"text": "Now I read it.", "tool": ("bash", {"command": "cat /app/README.md"}), "obs": "exit code 0"},
    {"text": "Done.", "obs": None},
]


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def test_recorded_mask_covers_exactly_the_completions(make_trajectory, tokenizer):
    traj = make_trajectory(TURNS)
    sample = trajectory_to_sample(traj, 1.0, "g", tokenizer=tokenizer)
    calls = traj.agent_steps()
    assert sample.source == "recorded" and sample.has_rollout_logprobs
    assert sample.input_ids == calls[-1].metrics.prompt_token_ids + calls[-1].metrics.completion_token_ids
    spans = _spans(sample.loss_mask)
    assert len(spans) == 3
    for (start, end), step in zip(spans, calls, strict=True):
        assert start == len(step.metrics.prompt_token_ids)
        assert sample.input_ids[start:end] == step.metrics.completion_token_ids
        assert sample.rollout_logprobs[start:end] == step.metrics.logprobs
    # observations (tool responses) and the system/user prompt are outside the mask
    masked_text = tokenizer.decode([t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m])
    assert "README.md\nrun.sh" not in masked_text and "exit code 0" not in masked_text
    assert "ls /app" in masked_text  # the model's own tool call is trained on
    assert all(lp == 0.0 for lp, m in zip(sample.rollout_logprobs, sample.loss_mask, strict=True) if not m)
    assert sample.input_ids[-1] == tokenizer.eos_token_id


def test_retokenized_path_reproduces_the_recorded_sample(make_trajectory, tokenizer):
    recorded = trajectory_to_sample(make_trajectory(TURNS), 0.5, "g", tokenizer=tokenizer)
    plain = trajectory_to_sample(make_trajectory(TURNS, record=False), 0.5, "g", tokenizer=tokenizer)
    assert plain.source == "retokenized" and not plain.has_rollout_logprobs
    assert plain.input_ids == recorded.input_ids
    assert plain.loss_mask == recorded.loss_mask
    assert set(plain.rollout_logprobs) == {0.0}


def test_token_mismatch_drops_and_counts(make_trajectory, tokenizer):
    good = make_trajectory(TURNS, session_id="good")
    bad = make_trajectory(TURNS, session_id="bad")
    # the next call's prompt no longer contains the first completion where it should be
    m1 = bad.steps[2].metrics
    m2 = bad.steps[3].metrics
    offset = len(m1.prompt_token_ids) + 1
    tampered = list(m2.prompt_token_ids)
    tampered[offset] = (tampered[offset] + 1) % len(tokenizer)
    bad.steps[3].metrics = m2.model_copy(update={"prompt_token_ids": tampered})
    with pytest.raises(SampleDropped) as err:
        trajectory_to_sample(bad, 1.0, "g", tokenizer=tokenizer)
    assert err.value.reason == "token_mismatch"
    result = build_samples([(good, 1.0, "g"), (bad, 1.0, "g")], tokenizer=tokenizer)
    assert [s.sample_id for s in result.samples] == ["good"]
    assert result.dropped == {"token_mismatch": 1}


def test_retokenize_mismatch_when_template_disagrees(make_trajectory, tokenizer):
    traj = make_trajectory(TURNS)
    traj.steps[0] = traj.steps[0].model_copy(update={"message": "A different system prompt."})
    with pytest.raises(SampleDropped) as err:
        trajectory_to_sample(traj, 1.0, "g", tokenizer=tokenizer)
    assert err.value.reason == "retokenize_mismatch"
    kept = trajectory_to_sample(traj, 1.0, "g", tokenizer=tokenizer, check_prompt=False)
    assert kept.num_model_tokens > 0


def test_prompt_check_accepts_listed_tools_that_were_not_sent(make_trajectory, tokenizer):
    traj = make_trajectory(TURNS)
    schema = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    traj.agent = traj.agent.model_copy(update={"tool_definitions": [schema]})
    assert trajectory_to_sample(traj, 1.0, "g", tokenizer=tokenizer).source == "recorded"


def test_other_drop_reasons(make_trajectory, tokenizer):
    short = make_trajectory(TURNS[:1], session_id="short")
    lp_bad = make_trajectory(TURNS[:1], session_id="lp")
    m = lp_bad.steps[2].metrics
    lp_bad.steps[2].metrics = m.model_copy(update={"logprobs": m.logprobs[:-1]})
    partial = make_trajectory(TURNS[:2], session_id="partial")
    partial.steps[3].metrics = Metrics(prompt_tokens=3)
    unrecorded = make_trajectory(TURNS[:1], record=False, session_id="plain")
    items = [
        (short, 1.5, "g"),
        (lp_bad, 1.0, "g"),
        (partial, 1.0, "g"),
        (make_trajectory(TURNS, session_id="long"), 1.0, "g"),
        (make_trajectory([], session_id="empty"), 1.0, "g"),
    ]
    result = build_samples(items, tokenizer=tokenizer, max_seq_len=len(short.steps[2].metrics.prompt_token_ids) + 40)
    assert result.samples == []
    assert result.dropped == {
        "bad_reward": 1,
        "logprobs_length_mismatch": 1,
        "partial_token_ids": 1,
        "too_long": 1,
        "no_agent_steps": 1,
    }
    assert build_samples([(unrecorded, 1.0, "g")]).dropped == {"no_token_ids": 1}
