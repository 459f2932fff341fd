"""Fixtures for the trainer tests: the tiny local model and ATIF trajectories built on it.

Trajectories are produced the way the agent loop records them: each model call's prompt
is the chat template rendered over the conversation so far, the completion is the
template's assistant turn up to its end-of-turn token, and the log-probs are the tiny
model's own (teacher-forced), so the rollout policy is the base model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mindforge.atif import (
    Agent,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)

SYSTEM = "You are operating a Linux terminal."
USER = "Say yes or no."


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mindforge.policy.doubles.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="session")
def base_model(tiny_model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()


def render(tokenizer, messages: list[dict], generation_prompt: bool) -> list[int]:
    return list(
        tokenizer.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False
        )
    )


def teacher_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(completion token | everything before it) under ``model``."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    picked = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked[len(prompt) - 1 :].tolist()


TrajectoryBuilder = Callable[..., Trajectory]


@pytest.fixture(scope="session")
def make_trajectory(tokenizer, base_model) -> TrajectoryBuilder:
    """Build a recorded ATIF trajectory.

    ``turns`` is a list of dicts ``{"text": str, "tool": (name, args) | None, "obs": str | None}``.
    With ``record=False`` no token ids or logprobs are stored (re-tokenisation path).
    """
    eos = tokenizer.eos_token_id

    def build(
        turns: list[dict], *, session_id: str = "s1", record: bool = True, system: str = SYSTEM, user: str = USER
    ) -> Trajectory:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        steps = [Step(step_id=1, source="system", message=system), Step(step_id=2, source="user", message=user)]
        for n, turn in enumerate(turns):
            assistant: dict = {"role": "assistant", "content": turn["text"]}
            tool_calls = None
            if turn.get("tool"):
                name, args = turn["tool"]
                call_id = f"call_{n}"
                assistant["tool_calls"] = [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                ]
                tool_calls = [ToolCall(tool_call_id=call_id, function_name=name, arguments=args)]
            prompt = render(tokenizer, messages, True)
            full = render(tokenizer, messages + [assistant], False)
            assert full[: len(prompt)] == prompt
            delta = full[len(prompt) :]
            completion = delta[: delta.index(eos) + 1]
            metrics = None
            if record:
                metrics = Metrics(
                    prompt_tokens=len(prompt),
                    completion_tokens=len(completion),
                    prompt_token_ids=prompt,
                    completion_token_ids=completion,
                    logprobs=teacher_logprobs(base_model, prompt, completion),
                )
            observation = None
            messages.append(assistant)
            if turn.get("obs") is not None:
                source = tool_calls[0].tool_call_id if tool_calls else None
                observation = Observation(results=[ObservationResult(source_call_id=source, content=turn["obs"])])
                messages.append(
                    {"role": "tool", "tool_call_id": source, "content": turn["obs"]}
                    if source
                    else {"role": "user", "content": turn["obs"]}
                )
            steps.append(
                Step(
                    step_id=len(steps) + 1,
                    source="agent",
                    message=turn["text"],
                    tool_calls=tool_calls,
                    observation=observation,
                    metrics=metrics,
                )
            )
        return Trajectory(session_id=session_id, agent=Agent(name="mindforge-test", version="0"), steps=steps)

    return build


@pytest.fixture(scope="session")
def yes_no_samples(make_trajectory, tokenizer):
    """Two groups of four attempts at one prompt: " yes" (reward 1) twice, " no" (reward 0) twice."""
    from mindforge.trainer.samples import build_samples

    items = []
    for group in ("g0", "g1"):
        for k, (text, reward) in enumerate([(" yes", 1.0), (" no", 0.0), (" yes", 1.0), (" no", 0.0)]):
            items.append((make_trajectory([{"text": text}], session_id=f"{group}-{k}"), reward, group))
    result = build_samples(items, tokenizer=tokenizer)
    assert result.dropped == {}
    return result.samples


@pytest.fixture(scope="session")
def trained_adapter(tiny_model_dir: Path, yes_no_samples, tmp_path_factory: pytest.TempPathFactory):
    """A GRPO-trained adapter on the yes/no groups (and its TrainResult)."""
    from mindforge.payloads.training import TrainerConfig
    from mindforge.trainer.grpo import train_grpo

    config = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=4, epochs=3, seed=0)
    out = tmp_path_factory.mktemp("adapter")
    return train_grpo(tiny_model_dir, yes_no_samples, config, out)
