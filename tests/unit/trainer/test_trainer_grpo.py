"""GRPO on LoRA with the tiny model: advantages, masking, IcePop, learning, determinism."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest
import torch
from peft import PeftModel

from mindforge.payloads.training import TrainerConfig
from mindforge.trainer import lora
from mindforge.trainer.errors import NoTrainingSignalError
from mindforge.trainer.grpo import (
    collate,
    group_advantages,
    grpo_loss,
    train_grpo,
    train_steps,
)
from mindforge.trainer.samples import TrainingSample, trajectory_to_sample

CONFIG = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=4, epochs=3, seed=0)


def test_group_advantages() -> None:
    adv = group_advantages([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 1.0], ["a", "a", "a", "a", "b", "b", "c"])
    std = math.sqrt(0.25 * 0.75)  # population std of [1, 0, 0, 0]
    assert adv[0] == pytest.approx(0.75 / (std + 1e-6))
    assert adv[1:4] == [pytest.approx(-0.25 / (std + 1e-6))] * 3
    assert adv[4:] == [0.0, 0.0, 0.0]  # flat group and singleton: exactly zero
    assert group_advantages([0.3] * 4, ["g"] * 4) == [0.0] * 4


def _wrapped(tiny_model_dir: Path, seed: int = 0, random_b: bool = True):
    base = lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32)
    model = lora.wrap_lora(base, CONFIG.model_copy(update={"seed": seed}))
    if random_b:  # a trained-looking adapter, so that gradients reach both A and B
        gen = torch.Generator().manual_seed(seed + 1)
        for name, p in lora.lora_parameters(model).items():
            if "lora_B" in name:
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return model


def _grads(model, sample: TrainingSample, advantage: float, pad_id: int, config=CONFIG) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    parts = grpo_loss(model, collate([sample], [advantage], pad_id, torch.device("cpu")), config)
    parts.loss_sum.backward()
    return {n: p.grad.clone() for n, p in lora.lora_parameters(model).items()}


def _same(a: dict, b: dict) -> bool:
    return all(torch.allclose(a[k], b[k], rtol=0, atol=1e-7) for k in a)


def test_tokens_outside_the_loss_mask_do_not_change_the_gradient(make_trajectory, tokenizer, tiny_model_dir) -> None:
    traj = make_trajectory(
        [{"text": "Let me look.", "tool": ("bash", {"command": "ls"}), "obs": "a.txt"}, {"text": "Done."}]
    )
    sample = trajectory_to_sample(traj, 1.0, "g", tokenizer=tokenizer)
    # an observation appended after the last model token, as a sample that ends in a tool result would have
    tail = tokenizer("<|im_start|>user\n<tool_response>\nexit 0\n</tool_response><|im_end|>\n")["input_ids"]
    base = sample.model_copy(
        update={
            "input_ids": sample.input_ids + tail,
            "loss_mask": sample.loss_mask + [0] * len(tail),
            "rollout_logprobs": sample.rollout_logprobs + [0.0] * len(tail),
        }
    )
    model = _wrapped(tiny_model_dir)
    pad = tokenizer.pad_token_id
    reference = _grads(model, base, 1.3, pad)
    assert any(g.abs().sum() > 0 for g in reference.values())

    other_tail = [(t * 7 + 3) % len(tokenizer) for t in tail]
    changed_obs = base.model_copy(update={"input_ids": sample.input_ids + other_tail})
    assert _same(reference, _grads(model, changed_obs, 1.3, pad))

    pairs = enumerate(zip(base.rollout_logprobs, base.loss_mask, strict=True))
    noisy = [lp if m else -123.0 + i for i, (lp, m) in pairs]
    changed_lp = base.model_copy(update={"rollout_logprobs": noisy})
    assert _same(reference, _grads(model, changed_lp, 1.3, pad))

    # control: the same kind of change on a model token does move the gradient
    first = base.loss_mask.index(1)
    moved = list(base.rollout_logprobs)
    moved[first] -= 0.3
    assert not _same(reference, _grads(model, base.model_copy(update={"rollout_logprobs": moved}), 1.3, pad))


def test_icepop_masks_and_counts_a_far_off_token(yes_no_samples, tokenizer, tiny_model_dir) -> None:
    sample = yes_no_samples[0]
    model = _wrapped(tiny_model_dir, random_b=False)  # fresh adapter == rollout policy: ratios are 1
    pad = tokenizer.pad_token_id
    batch = collate([sample], [1.0], pad, torch.device("cpu"))
    clean = grpo_loss(model, batch, CONFIG)
    assert (clean.tokens, clean.icepop_masked) == (sample.num_model_tokens, 0)

    target = sample.loss_mask.index(1) + 1
    off = list(sample.rollout_logprobs)
    off[target] -= 4.0  # train/rollout probability ratio e^4 ~ 55 > icepop_high 5
    far = sample.model_copy(update={"rollout_logprobs": off})
    parts = grpo_loss(model, collate([far], [1.0], pad, torch.device("cpu")), CONFIG)
    assert (parts.tokens, parts.icepop_masked) == (sample.num_model_tokens - 1, 1)
    # and the masked token contributes exactly nothing: same gradient as leaving it out of the mask
    mask = list(sample.loss_mask)
    mask[target] = 0
    without = sample.model_copy(update={"loss_mask": mask})
    assert _same(_grads(model, far, 1.0, pad), _grads(model, without, 1.0, pad))


@torch.no_grad()
def _completion_logp(model, sample: TrainingSample) -> float:
    ids = torch.tensor([sample.input_ids])
    logp = lora.per_token_logps(model, ids, torch.ones_like(ids), sample.loss_mask.index(1))
    return float((logp[0] * torch.tensor(sample.loss_mask, dtype=torch.float32)).sum())


def test_rewarded_completion_becomes_more_likely(trained_adapter, yes_no_samples, tiny_model_dir) -> None:
    result = trained_adapter
    yes = next(s for s in yes_no_samples if s.reward == 1.0)
    no = next(s for s in yes_no_samples if s.reward == 0.0)
    base = lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32).eval()
    before_yes, before_no = _completion_logp(base, yes), _completion_logp(base, no)
    tuned = PeftModel.from_pretrained(base, str(result.adapter_dir)).eval()
    after_yes, after_no = _completion_logp(tuned, yes), _completion_logp(tuned, no)
    assert after_yes > before_yes + 0.1
    assert after_no < before_no - 0.1
    assert result.steps == 6 and len(result.losses) == 6
    assert result.samples_used == 8 and result.zero_advantage_samples == 0
    assert result.tokens_trained > 0 and result.reward.mean == 0.5 and result.reward.num_groups == 2
    assert result.device == "cpu" and result.dtype == "float32"


def test_base_weights_frozen_and_adapter_weights_move(yes_no_samples, tokenizer, tiny_model_dir) -> None:
    model = _wrapped(tiny_model_dir, random_b=False)
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    lora_before = {n: p.detach().clone() for n, p in lora.lora_parameters(model).items()}
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    adv = group_advantages([s.reward for s in yes_no_samples], [s.group_id for s in yes_no_samples])
    train_steps(
        model,
        yes_no_samples,
        adv,
        CONFIG.model_copy(update={"max_steps": 2}),
        pad_id=tokenizer.pad_token_id,
        device=torch.device("cpu"),
    )
    for name, p in model.named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, base_before[name]), name
    changed = [n for n, p in lora.lora_parameters(model).items() if not torch.equal(p, lora_before[n])]
    assert any("lora_B" in n for n in changed) and any("lora_A" in n for n in changed)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_deterministic_on_cpu_and_base_files_untouched(yes_no_samples, tiny_model_dir, tmp_path) -> None:
    base_sha = _sha(tiny_model_dir / "model.safetensors")
    config = CONFIG.model_copy(update={"max_steps": 2, "kl_coef": 0.1, "lora_dropout": 0.1})
    seen: list[tuple[int, float, dict]] = []
    first = train_grpo(
        tiny_model_dir,
        yes_no_samples,
        config,
        tmp_path / "a",
        progress_cb=lambda step, loss, stats: seen.append((step, loss, stats)),
    )
    second = train_grpo(tiny_model_dir, yes_no_samples, config, tmp_path / "b")
    assert first.losses == second.losses
    assert _sha(tmp_path / "a" / "adapter_model.safetensors") == _sha(tmp_path / "b" / "adapter_model.safetensors")
    assert _sha(tiny_model_dir / "model.safetensors") == base_sha
    assert [s for s, _, _ in seen] == [1, 2] and [loss for _, loss, _ in seen] == first.losses
    assert seen[0][2]["kl"] == 0.0 < seen[1][2]["kl"]  # a fresh adapter is the base; after one update it is not
    third = train_grpo(tiny_model_dir, yes_no_samples, config.model_copy(update={"seed": 1}), tmp_path / "c")
    assert third.losses != first.losses


def test_flat_groups_give_no_signal(yes_no_samples, tiny_model_dir, tmp_path) -> None:
    flat = [s.model_copy(update={"reward": 1.0}) for s in yes_no_samples]
    with pytest.raises(NoTrainingSignalError):
        train_grpo(tiny_model_dir, flat, CONFIG, tmp_path / "x")
    mixed = flat[:4] + yes_no_samples[4:]
    result = train_grpo(tiny_model_dir, mixed, CONFIG.model_copy(update={"max_steps": 1}), tmp_path / "y")
    assert (result.samples_used, result.zero_advantage_samples, result.reward.flat_groups) == (4, 4, 1)


def test_parent_adapter_continues_training(trained_adapter, yes_no_samples, tiny_model_dir, tmp_path) -> None:
    child = train_grpo(
        tiny_model_dir,
        yes_no_samples,
        CONFIG.model_copy(update={"max_steps": 1, "lora_rank": 8}),
        tmp_path / "child",
        parent_adapter=trained_adapter.adapter_dir,
    )
    assert child.lora_rank == 4  # the parent's shape wins
    assert child.parent_adapter == trained_adapter.adapter_dir


def test_gradient_checkpointing_gives_the_same_update(yes_no_samples, tiny_model_dir, tmp_path) -> None:
    from safetensors.torch import load_file

    config = CONFIG.model_copy(update={"max_steps": 1})
    plain = train_grpo(tiny_model_dir, yes_no_samples, config, tmp_path / "plain")
    ckpt = train_grpo(
        tiny_model_dir, yes_no_samples, config.model_copy(update={"gradient_checkpointing": True}), tmp_path / "ckpt"
    )
    assert ckpt.losses == pytest.approx(plain.losses)
    a = load_file(str(tmp_path / "plain" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "ckpt" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(bool(t.any()) for k, t in b.items() if "lora_B" in k)
    base = lora.load_base(tiny_model_dir, torch.device("cpu"), torch.float32)
    wrapped = lora.wrap_lora(base, config.model_copy(update={"gradient_checkpointing": True}))
    assert wrapped.get_base_model().model.gradient_checkpointing
    lora.set_checkpointing(wrapped, False)
    assert not wrapped.get_base_model().model.gradient_checkpointing
    # long micro-batches (here: every one) checkpoint on their own, one row at a time: the same update
    auto = train_grpo(
        tiny_model_dir, yes_no_samples,
        config.model_copy(update={"checkpoint_above_tokens": 1, "micro_batch_positions": 1}), tmp_path / "auto",
    )
    assert auto.losses == pytest.approx(plain.losses)
    c = load_file(str(tmp_path / "auto" / "adapter_model.safetensors"))
    assert max(float((a[k] - c[k]).abs().max()) for k in a) < 1e-4  # summed in another order


@pytest.mark.parametrize("checkpointing", [False, True])
def test_a_shared_prompt_runs_once_with_the_same_log_probs_and_gradients(tiny_model_dir, checkpointing) -> None:
    """Rows that share a prompt get their prefix's KV cache from one pass: logits and gradients are unchanged.

    Under activation checkpointing too, whose replay of each layer in the backward pass
    must see the cache the first pass saw. The embedding's inputs show which forwards ran.
    """
    from mindforge.trainer.lora import MIN_SHARED_PREFIX, per_token_logps, shared_prefix_len

    model = _wrapped(tiny_model_dir)
    model.train()
    lora.set_checkpointing(model, checkpointing)
    gen = torch.Generator().manual_seed(3)
    prefix = torch.randint(0, 1500, (1, MIN_SHARED_PREFIX + 20), generator=gen)
    ids = torch.cat([prefix.expand(3, -1), torch.randint(0, 1500, (3, 12), generator=gen)], dim=1)
    mask = torch.ones_like(ids)
    mask[2, -4:] = 0  # a shorter row, right-padded
    first = prefix.shape[1] + 2
    assert shared_prefix_len(ids, mask, first) == prefix.shape[1]  # capped below the first scored position
    assert shared_prefix_len(ids, mask, 10) == 9 and shared_prefix_len(ids[:1], mask[:1], first) == 0
    keep = mask[:, first:].float()
    shapes: list[tuple[int, ...]] = []
    embed = model.get_base_model().get_input_embeddings()
    hook = embed.register_forward_hook(lambda _m, args, _out: shapes.append(tuple(args[0].shape)))

    def run(shared: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad(set_to_none=True)
        shapes.clear()
        logps = per_token_logps(model, ids, mask, first, share_prefix=shared)
        (logps[:, first:] * keep).sum().backward()
        return logps[:, first:] * keep, {n: p.grad.clone() for n, p in lora.lora_parameters(model).items()}

    once, grads_once = run(True)
    assert shapes == [(1, prefix.shape[1]), (3, 12)]  # the prefix once, then the suffixes against its cache
    apart, grads_apart = run(False)
    assert shapes == [tuple(ids.shape)]
    hook.remove()
    assert torch.allclose(once, apart, atol=1e-5)
    assert all(torch.allclose(grads_once[n], grads_apart[n], rtol=1e-4, atol=1e-7) for n in grads_once)


def test_micro_batches_close_before_their_logits_pass_the_position_cap() -> None:
    from mindforge.trainer.grpo import micro_batches

    ids = ["a"] * 4 + ["b"] * 2
    # four 1000-token samples whose model tokens start at 200: 801 positions each
    extents = [(1000, 200)] * 4 + [(3000, 100), (500, 100)]
    assert micro_batches(ids, 8, extents, None) == [(0, 4), (4, 6)]  # no cap: one span per group
    assert micro_batches(ids, 8, extents, 1700) == [(0, 2), (2, 4), (4, 5), (5, 6)]  # 2 x 801 fits, 3 x 801 not
    # a sample over the cap runs alone; the padded length of a span is its longest sample's
    assert micro_batches(["c", "c"], 8, [(3000, 100), (500, 100)], 2000) == [(0, 1), (1, 2)]
    assert micro_batches(["c", "c"], 8, [(500, 100), (3000, 100)], 2000) == [(0, 1), (1, 2)]


def test_micro_batches_end_with_their_group_and_steps_keep_groups_together() -> None:
    from mindforge.trainer.grpo import group_order, micro_batches

    assert micro_batches(["a", "a", "a", "b", "b", "c"], 2) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    assert micro_batches([], 4) == []
    ids = ["g1"] * 3 + ["g2"] * 4 + ["g3"] * 2
    order = group_order(ids, torch.Generator().manual_seed(0))
    assert sorted(order) == list(range(9))
    runs = [ids[i] for i in order]
    assert [g for k, g in enumerate(runs) if k == 0 or runs[k - 1] != g] == list(dict.fromkeys(runs))  # contiguous
    assert order == group_order(ids, torch.Generator().manual_seed(0))  # seeded
