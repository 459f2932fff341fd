"""Off-policy guidance: which entry guides a task, the guide's trajectory, its sample and its loss.

Entries are made-up chores (tests/unit/experience/helpers.py), never bundled tasks.
"""

from __future__ import annotations

import math

import pytest
import torch

from mindforge.agent import prompts
from mindforge.experience import ExperienceSnapshot, Provenance, attach_snapshot
from mindforge.hcp import derive, load_contract
from mindforge.payloads.training import GuideRef, TrainerConfig
from mindforge.search import Edit, materialize
from mindforge.trainer import lora
from mindforge.trainer.curriculum import TaskRate, has_signal, pick_tasks
from mindforge.trainer.errors import SampleDropped
from mindforge.trainer.grpo import collate, grpo_loss
from mindforge.trainer.guidance import (
    GUIDE_AGENT,
    build_guide_samples,
    check_guide_sample,
    guide_blocker,
    guide_entries,
    guide_trajectory,
    is_guide,
    reply_spans,
)
from mindforge.trainer.samples import _messages_and_calls
from mindforge.trainer.selection import select_groups
from tests.conftest import REPO
from tests.unit.experience.helpers import LIBRARY, entry
from tests.unit.trainer.test_selection import trial

BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
TWO_STEP = entry(
    "rivers", "Write the number of lines in rivers.txt to river_count.txt, then show it.",
    ["wc -l < rivers.txt > river_count.txt", "cat river_count.txt"],
)
RIVERS_MODEL = entry(
    "rivers", "Write the number of lines in rivers.txt to river_count.txt, then show it.",
    ["wc -l < rivers.txt > river_count.txt", "cat river_count.txt"], provenance=Provenance.MODEL, trial="t-riv",
)
MULTI_LINE = entry("script", "Write hello.sh that prints hello.", ["cat > hello.sh <<'EOF'\necho hello\nEOF"])
SNAPSHOT = ExperienceSnapshot(entries=(*LIBRARY, TWO_STEP, MULTI_LINE))


def _with_library(contract, snapshot=SNAPSHOT, k=2):
    return attach_snapshot(contract, snapshot, revision=f"{contract.mindforge.revision}-lib", k=k)


def test_each_task_is_guided_by_its_own_entry_and_the_pairs_own_success_comes_first():
    contract = _with_library(BASELINE)
    guides = guide_entries(contract)
    assert set(guides) == {e.task_hash for e in SNAPSHOT.entries}
    assert guides["h-rivers"].entry_id == TWO_STEP.entry_id
    both = _with_library(BASELINE, ExperienceSnapshot(entries=(*SNAPSHOT.entries, RIVERS_MODEL)))
    assert guide_entries(both)["h-rivers"].entry_id == RIVERS_MODEL.entry_id
    assert guide_entries(BASELINE) == {}  # no snapshot, no guides


def test_an_entry_the_policy_could_not_have_written_under_the_contract_does_not_guide():
    command = materialize(BASELINE, [Edit(op="action_format", value="command")])
    assert guide_blocker(command, MULTI_LINE) == "multi_line"
    one_turn = derive(BASELINE, revision="1.0.1", edit="one turn", changes={"workspace.max_turns": 1})
    assert guide_blocker(one_turn, TWO_STEP) == "too_many_turns"
    planning = derive(BASELINE, revision="1.0.2", edit="plan", changes={"hooks.plan_first": True})
    assert guide_blocker(planning, LIBRARY[0]) == "hooks"
    assert "h-script" not in guide_entries(_with_library(command))
    with pytest.raises(ValueError, match="too_many_turns"):
        guide_trajectory(
            _with_library(one_turn), task_id="rivers", task_hash="h-rivers", instruction=TWO_STEP.instruction,
            entry=TWO_STEP, ts="2026-12-02T00:00:00+00:00",
        )
    with pytest.raises(ValueError, match="not h-count-word"):
        guide_trajectory(
            _with_library(BASELINE), task_id="count-words", task_hash="h-count-words", instruction="x",
            entry=TWO_STEP, ts="2026-12-02T00:00:00+00:00",
        )


@pytest.mark.parametrize("action_format", ["json", "command", "fenced_bash", "tool_calls"])
def test_the_guide_rebuilds_the_chat_a_live_trial_would_hold(action_format):
    edits = [] if action_format == BASELINE.tools.action_format else [Edit(op="action_format", value=action_format)]
    contract = _with_library(materialize(BASELINE, edits))
    traj = guide_trajectory(
        contract, task_id="rivers", task_hash="h-rivers", instruction=TWO_STEP.instruction, entry=TWO_STEP,
        ts="2026-12-02T00:00:00+00:00", timeout_sec=90.0,
    )
    assert is_guide(traj) and traj.agent.name == GUIDE_AGENT
    assert traj.extra["mindforge"]["guide"]["entry_id"] == TWO_STEP.entry_id
    messages, calls = _messages_and_calls(traj.steps)
    # the context is what the live loop sends: system prompt, retrieved examples (never the task's own), instruction
    shown = traj.extra["mindforge"]["experience_entries"]
    assert TWO_STEP.entry_id not in shown and len(shown) == 2
    first = calls[0]
    assert messages[0]["content"] == prompts.render_system_prompt(contract, [])
    instruction = prompts.render_instruction(contract, TWO_STEP.instruction)
    assert messages[first - 1] == {"role": "user", "content": instruction}
    # then the entry's commands as replies in the contract's own format, each observed, then the finish reply
    replies = [messages[i] for i in calls]
    if contract.workspace.mode == "single_command":  # the search couples `command` with one-command mode
        joined = " && ".join(TWO_STEP.commands)
        assert [r["content"] for r in replies] == [prompts.render_action(contract, "bash", {"command": joined}, "")[
            "content"]]
    else:
        rendered = prompts.render_action(contract, "bash", {"command": TWO_STEP.commands[0]}, "guide_1")
        assert replies[0]["content"] == rendered["content"]
        finish = prompts.render_action(contract, "finish", {}, "x")["content"]
        assert len(replies) == 3 and replies[-1]["content"] == finish
    observation = messages[calls[0] + 1]
    if action_format == "tool_calls":
        assert observation["role"] == "tool" and replies[0]["tool_calls"][0]["function"]["name"] == "bash"
    else:  # text formats: the model's turn is text and its observation a user message, as the loop sends them
        assert observation["role"] == "user" and "tool_calls" not in replies[0]
        assert observation["content"].startswith({"json": "Observation from bash:", "fenced_bash": "Output:"}.get(
            action_format, ""))
        assert "[turn 1/" in observation["content"]


def test_a_guide_sample_is_off_policy_and_a_reply_over_max_tokens_is_dropped(tokenizer):
    contract = _with_library(BASELINE)
    traj = guide_trajectory(
        contract, task_id="rivers", task_hash="h-rivers", instruction=TWO_STEP.instruction, entry=TWO_STEP,
        ts="2026-12-02T00:00:00+00:00",
    )
    built = build_guide_samples([(traj, 1.0, "g")], tokenizer=tokenizer)
    assert not built.dropped
    sample = built.samples[0]
    assert sample.off_policy and sample.has_rollout_logprobs and set(sample.rollout_logprobs) == {0.0}
    assert len(reply_spans(sample.loss_mask)) == 3  # two commands and the finish reply
    short = traj.model_copy(deep=True)
    short.extra["mindforge"]["guide"]["max_tokens"] = min(reply_spans(sample.loss_mask)) - 1
    with pytest.raises(SampleDropped, match="model.max_tokens"):
        check_guide_sample(sample, short)
    assert build_guide_samples([(short, 1.0, "g")], tokenizer=tokenizer).dropped == {"guide_reply_too_long": 1}


def test_reply_spans_counts_runs_of_model_tokens():
    assert reply_spans([0, 1, 1, 0, 0, 1, 0, 1, 1, 1]) == [2, 1, 3]
    assert reply_spans([0, 0]) == []


GUIDE = GuideRef(entry_id="exp-" + "a" * 16, task_hash="h-b", provenance="oracle", source_trial_id="oracle",
                 snapshot_id="s" * 64)


def test_a_guide_joins_a_failed_group_and_nothing_else():
    records = [trial("a", i, float(i % 2)) for i in range(4)]  # a: 0, 1, 0, 1 (has contrast of its own)
    records += [trial("b", i, 0.0) for i in range(5)]  # b: every rollout failed
    records += [trial("c", i, 1.0) for i in range(3)]  # c: every rollout passed
    others = {h: GUIDE.model_copy(update={"task_hash": h}) for h in ("h-a", "h-c")}
    report = select_groups(records, set(), guides={"h-b": GUIDE, **others}, max_trials_per_group=4)
    by_task = {g.task_hash: g for g in report.groups}
    assert set(by_task) == {"h-a", "h-b"}  # c passed every time: a guide adds no contrast
    assert by_task["h-a"].guide is None  # a group with contrast trains on its own rollouts
    b = by_task["h-b"]
    assert b.guide == GUIDE and len(b.trial_ids) == 3 and b.rewards == [0.0] * 3  # capped to leave room for the guide
    assert report.guided_groups == 1 and report.dropped_no_signal == 1 and report.capped_trials == 2
    assert b.reward_std == pytest.approx(math.sqrt(0.75 * 0.25))
    without = select_groups(records, set())
    assert {g.task_hash for g in without.groups} == {"h-a"} and without.guided_groups == 0
    # a group of a selection or sealed task is set aside before anything else, guide or not
    assert "h-b" not in {g.task_hash for g in select_groups(records, {"h-b"}, guides={"h-b": GUIDE}).groups}


def test_the_curriculum_draws_guided_never_passed_tasks_after_the_others():
    rates = {
        "mixed": TaskRate(task_hash="mixed", passes=1, trials=4),
        "zero-guided": TaskRate(task_hash="zero-guided", passes=0, trials=4),
        "zero": TaskRate(task_hash="zero", passes=0, trials=4),
        "unseen": TaskRate(task_hash="unseen"),
        "always": TaskRate(task_hash="always", passes=4, trials=4),
    }
    pick = pick_tasks(rates, 8, guided={"zero-guided", "always"})
    assert pick.tasks == ["mixed", "unseen", "zero-guided"]
    assert (pick.guided, pick.never_passed, pick.always_passed) == (1, 1, 1)
    assert pick_tasks(rates, 8).tasks == ["mixed", "unseen"]
    assert has_signal([0.0, 0.0], 1.0) and not has_signal([0.0, 0.0]) and not has_signal([1.0, 1.0], 1.0)
    assert not has_signal([0.0], 1.0) and has_signal([0.0, 1.0])


@pytest.mark.parametrize("guide_loss", ["weighted_nll", "luffy_shaping"])
def test_guide_tokens_get_their_unclipped_loss(tokenizer, tiny_model_dir, guide_loss):
    """Per token, the guide's loss is ``-A log p`` (or LUFFY's ``-A p / (p + gamma)``): no PPO clip, no IcePop."""
    contract = _with_library(BASELINE)
    traj = guide_trajectory(
        contract, task_id="rivers", task_hash="h-rivers", instruction=TWO_STEP.instruction, entry=TWO_STEP,
        ts="2026-12-02T00:00:00+00:00",
    )
    sample = build_guide_samples([(traj, 1.0, "g")], tokenizer=tokenizer).samples[0]
    config = TrainerConfig(lora_rank=4, lora_alpha=8, guide_gamma=0.1, guide_loss=guide_loss)
    model = lora.wrap_lora(lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32), config)
    batch = collate([sample], [2.0], tokenizer.pad_token_id, torch.device("cpu"))
    parts = grpo_loss(model, batch, config)
    logp = lora.per_token_logps(model, batch.input_ids, batch.attention_mask, batch.first).detach()
    token_logp = logp[batch.loss_mask > 0]
    prob = torch.exp(token_logp)
    expected = -2.0 * token_logp if guide_loss == "weighted_nll" else -2.0 * prob / (prob + 0.1)
    assert parts.tokens == sample.num_model_tokens and parts.icepop_masked == 0 and parts.clipped == 0
    assert float(parts.loss_sum.detach()) == pytest.approx(float(expected.sum()), rel=1e-5)
    # the same tokens as an on-policy rollout with those log-probs: ratio 0 would be IcePop-masked entirely
    rollout = sample.model_copy(update={"off_policy": False})
    on = grpo_loss(model, collate([rollout], [2.0], tokenizer.pad_token_id, torch.device("cpu")), config)
    assert on.icepop_masked > 0 and on.tokens < parts.tokens
    parts.loss_sum.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora.lora_parameters(model).values())
