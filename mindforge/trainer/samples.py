"""From ATIF trajectories to token-level GRPO training samples.

A sample is one trajectory as a single causal-LM sequence: ``input_ids``, a
``loss_mask`` that is 1 exactly on the tokens the model itself sampled (system prompt,
user instruction, chat-template tokens, tool calls' results and other observations are
0), and ``rollout_logprobs``, the sampling policy's log-probability of each model token
(0 where the mask is 0).

Two ways to get there:

1. **Recorded ids** (preferred, what the agent loop writes): every agent step's
   ``metrics`` holds the call's ``prompt_token_ids``, ``completion_token_ids`` and
   ``logprobs`` (ATIF v1.3/v1.4). An agent's calls are cumulative chat prompts, so the
   prompt of call k+1 starts with prompt_k + completion_k (then template and observation
   tokens). The sample is the LAST call's prompt + completion; each earlier call's
   completion is located at offset ``len(prompt_k)`` and checked token for token.
   When a tokenizer is given, the first call's prompt is also re-rendered with the
   tokenizer's chat template (with the tools of ``agent.tool_definitions``, or without
   tools, as a text action format sends none) and must equal the recorded ids, which
   catches a policy served with a different tokenizer or template.
2. **Re-tokenised** (no ids recorded at all): the messages are rendered with the chat
   template call by call; the model's span of each assistant turn is the template's
   delta up to and including its end-of-turn token. No rollout log-probs exist then
   (``has_rollout_logprobs`` False): the trainer takes the start-of-training policy's.

Any disagreement drops the trajectory with a named reason (:class:`SampleDropped`);
nothing is ever silently realigned, because a mask shifted by one token trains the model
on the environment's words.

Needs only a tokenizer object (duck-typed ``apply_chat_template``), no torch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, model_validator

from mindforge.atif import Content, Step, Trajectory
from mindforge.trainer.errors import SampleDropped


class TrainingSample(BaseModel):
    """One trajectory as a causal-LM training sequence.

    Attributes:
        sample_id: the trajectory's ``session_id``.
        group_id: the GRPO group (attempts at one task under one pair).
        reward: verifier reward in [0, 1].
        input_ids: token ids, length L.
        loss_mask: length L; 1 on the model's own sampled tokens, else 0.
        rollout_logprobs: length L; sampling-policy log-prob of each model token,
            0.0 where ``loss_mask`` is 0 (and everywhere when not recorded).
        has_rollout_logprobs: whether ``rollout_logprobs`` were recorded.
        source: ``recorded`` (ids from the trajectory) or ``retokenized``.
        off_policy: a guide (:mod:`mindforge.trainer.guidance`), not a rollout of the
            policy: the objective gives its tokens the unclipped ``guide_loss``
            (:mod:`mindforge.trainer.objective`).
    """

    sample_id: str
    group_id: str
    reward: float
    input_ids: list[int]
    loss_mask: list[int]
    rollout_logprobs: list[float]
    has_rollout_logprobs: bool
    source: Literal["recorded", "retokenized"]
    off_policy: bool = False

    @model_validator(mode="after")
    def _check(self) -> TrainingSample:
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.rollout_logprobs) != n:
            raise ValueError("input_ids, loss_mask and rollout_logprobs must have the same length")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask holds only 0 and 1")
        if n and self.loss_mask[0]:
            raise ValueError("the first token cannot be a model token (nothing predicts it)")
        return self

    @property
    def num_model_tokens(self) -> int:
        """Tokens under the loss mask."""
        return sum(self.loss_mask)


class SampleSet(BaseModel):
    """Samples built from a batch of trajectories, with what was dropped and why.

    Attributes:
        samples: the kept samples.
        dropped: reason -> count of trajectories dropped for it.
    """

    samples: list[TrainingSample]
    dropped: dict[str, int]


def _text(content: Content | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if any(part.type != "text" for part in content):
        raise SampleDropped("multimodal_unsupported", "image/audio content parts cannot be tokenised here")
    return "".join(part.text or "" for part in content)


def _render(tokenizer: Any, messages: list[dict], *, generation_prompt: bool, tools: list | None) -> list[int]:
    try:
        ids = tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=generation_prompt,
            tokenize=True,
            return_dict=False,
        )
    except Exception as exc:  # jinja errors from arbitrary templates
        raise SampleDropped("template_error", f"{type(exc).__name__}: {exc}") from exc
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def _is_llm_call(step: Step) -> bool:
    return step.source == "agent" and not step.is_copied_context and step.llm_call_count != 0


class _RecordedCall(NamedTuple):
    """One agent call's recorded ids: ``prompt`` and ``completion`` token ids, ``logprobs`` per completion token."""

    step_id: int
    prompt: list[int]
    completion: list[int]
    logprobs: list[float] | None


def _recorded_calls(calls: list[Step]) -> list[_RecordedCall]:
    out = []
    for step in calls:
        m = step.metrics
        if m is None or m.prompt_token_ids is None or m.completion_token_ids is None:
            raise SampleDropped("partial_token_ids", f"agent step {step.step_id} has no recorded token ids")
        if m.logprobs is not None and len(m.logprobs) != len(m.completion_token_ids):
            raise SampleDropped(
                "logprobs_length_mismatch",
                f"step {step.step_id}: {len(m.logprobs)} logprobs for {len(m.completion_token_ids)} tokens",
            )
        out.append(_RecordedCall(step.step_id, m.prompt_token_ids, m.completion_token_ids, m.logprobs))
    return out


def _from_recorded(
    trajectory: Trajectory, calls: list[Step], tokenizer: Any | None, check_prompt: bool
) -> tuple[list[int], list[int], list[float], bool]:
    recorded = _recorded_calls(calls)
    with_lp = [c.logprobs is not None for c in recorded]
    if any(with_lp) and not all(with_lp):
        raise SampleDropped("partial_logprobs", "some agent calls recorded logprobs and some did not")
    last = recorded[-1]
    ids = list(last.prompt) + list(last.completion)
    mask = [0] * len(ids)
    logprobs = [0.0] * len(ids)
    # prompt_{k+1} must start with prompt_k + completion_k; the sequence itself closes the chain
    prompts = [c.prompt for c in recorded[1:]] + [ids]
    for c, next_prompt in zip(recorded, prompts, strict=True):
        start, end = len(c.prompt), len(c.prompt) + len(c.completion)
        if next_prompt[:end] != list(c.prompt) + list(c.completion):
            raise SampleDropped(
                "token_mismatch", f"agent step {c.step_id}: prompt + completion is not a prefix of the next prompt"
            )
        mask[start:end] = [1] * (end - start)
        if c.logprobs is not None:
            logprobs[start:end] = [float(x) for x in c.logprobs]
    if tokenizer is not None:
        if ids and (min(ids) < 0 or max(ids) >= len(tokenizer)):
            raise SampleDropped("token_mismatch", "token id outside the tokenizer's vocabulary")
        if check_prompt:
            first = trajectory.steps.index(calls[0])
            messages, _ = _messages_and_calls(trajectory.steps[:first])
            # ATIF lists the agent's tools whether or not they went into the template (a
            # text action format does not send them), so either rendering may be the one
            tool_sets = [trajectory.agent.tool_definitions, None] if trajectory.agent.tool_definitions else [None]
            recorded_prompt = list(recorded[0].prompt)
            if not any(
                _render(tokenizer, messages, generation_prompt=True, tools=tools) == recorded_prompt
                for tools in tool_sets
            ):
                raise SampleDropped(
                    "retokenize_mismatch", "the chat template does not reproduce the first recorded prompt"
                )
    return ids, mask, logprobs, all(with_lp)


def _messages_and_calls(steps: list[Step]) -> tuple[list[dict], list[int]]:
    """Chat messages of ``steps``, and the message index of each LLM call among them."""
    messages: list[dict] = []
    call_positions: list[int] = []
    for step in steps:
        if step.source in ("system", "user"):
            messages.append({"role": step.source, "content": _text(step.message)})
            continue
        if _is_llm_call(step):
            call_positions.append(len(messages))
        message: dict[str, Any] = {"role": "assistant", "content": _text(step.message)}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.tool_call_id,
                    "type": "function",
                    "function": {"name": c.function_name, "arguments": c.arguments},
                }
                for c in step.tool_calls
            ]
        messages.append(message)
        for result in step.observation.results if step.observation else []:
            if result.source_call_id is not None:
                messages.append(
                    {"role": "tool", "tool_call_id": result.source_call_id, "content": _text(result.content)}
                )
            else:
                messages.append({"role": "user", "content": _text(result.content)})
    return messages, call_positions


def _from_template(trajectory: Trajectory, tokenizer: Any):
    messages, positions = _messages_and_calls(trajectory.steps)
    tools = trajectory.agent.tool_definitions
    eos = getattr(tokenizer, "eos_token_id", None)
    final = _render(tokenizer, messages[: positions[-1] + 1], generation_prompt=False, tools=tools)
    mask = [0] * len(final)
    end_of_last = 0
    for pos in positions:
        before = _render(tokenizer, messages[:pos], generation_prompt=True, tools=tools)
        after = _render(tokenizer, messages[: pos + 1], generation_prompt=False, tools=tools)
        if after[: len(before)] != before or final[: len(after)] != after:
            raise SampleDropped("template_not_prefix", "the chat template re-renders earlier turns differently")
        delta = after[len(before) :]
        if eos is not None and eos in delta:  # the model stops at its end-of-turn token; the rest is template
            delta = delta[: len(delta) - delta[::-1].index(eos)]
        mask[len(before) : len(before) + len(delta)] = [1] * len(delta)
        end_of_last = len(before) + len(delta)
    return final[:end_of_last], mask[:end_of_last], [0.0] * end_of_last


def trajectory_to_sample(
    trajectory: Trajectory,
    reward: float,
    group_id: str,
    *,
    tokenizer: Any | None = None,
    max_seq_len: int | None = None,
    check_prompt: bool = True,
) -> TrainingSample:
    """Turn one trajectory into a training sample.

    Args:
        trajectory: a validated ATIF trajectory.
        reward: the trial's verifier reward in [0, 1].
        group_id: the GRPO group it belongs to.
        tokenizer: the policy's tokenizer (a transformers tokenizer with a chat
            template). Required when no token ids were recorded; with recorded ids it
            checks vocabulary bounds and (``check_prompt``) the first prompt.
        max_seq_len: drop samples longer than this (tokens).
        check_prompt: re-render the first prompt and require it to equal the recorded one.

    Returns:
        the sample.

    Raises:
        SampleDropped: with a stable ``reason``: ``bad_reward``, ``no_agent_steps``,
            ``partial_token_ids``, ``partial_logprobs``, ``logprobs_length_mismatch``,
            ``token_mismatch``, ``retokenize_mismatch``, ``no_token_ids``,
            ``template_error``, ``template_not_prefix``, ``multimodal_unsupported``,
            ``too_long``, ``no_model_tokens``.
    """
    if not (math.isfinite(reward) and 0.0 <= reward <= 1.0):
        raise SampleDropped("bad_reward", f"reward {reward!r} is not in [0, 1]")
    calls = [s for s in trajectory.steps if _is_llm_call(s)]
    if not calls:
        raise SampleDropped("no_agent_steps", "the trajectory has no model call")
    recorded = any(s.metrics is not None and s.metrics.completion_token_ids is not None for s in calls)
    if recorded:
        ids, mask, logprobs, has_lp = _from_recorded(trajectory, calls, tokenizer, check_prompt)
        source = "recorded"
    elif tokenizer is None:
        raise SampleDropped("no_token_ids", "no token ids recorded and no tokenizer to re-tokenise with")
    else:
        ids, mask, logprobs = _from_template(trajectory, tokenizer)
        has_lp, source = False, "retokenized"
    if max_seq_len is not None and len(ids) > max_seq_len:
        raise SampleDropped("too_long", f"{len(ids)} tokens > max_seq_len {max_seq_len}")
    if not any(mask) or mask[0]:
        raise SampleDropped("no_model_tokens", "no model token after a non-empty prompt")
    return TrainingSample(
        sample_id=trajectory.session_id,
        group_id=group_id,
        reward=float(reward),
        input_ids=ids,
        loss_mask=mask,
        rollout_logprobs=logprobs,
        has_rollout_logprobs=has_lp,
        source=source,
    )


def build_samples(
    items: Iterable[tuple[Trajectory, float, str]],
    *,
    tokenizer: Any | None = None,
    max_seq_len: int | None = None,
    check_prompt: bool = True,
) -> SampleSet:
    """Build samples from ``(trajectory, reward, group_id)`` triples, counting drops by reason.

    Args:
        items: the trajectories with their rewards and group ids.
        tokenizer / max_seq_len / check_prompt: as for :func:`trajectory_to_sample`.

    Returns:
        the kept samples (in input order) and ``dropped`` counts by reason.
    """
    samples: list[TrainingSample] = []
    dropped: Counter[str] = Counter()
    for trajectory, reward, group_id in items:
        try:
            samples.append(
                trajectory_to_sample(
                    trajectory,
                    reward,
                    group_id,
                    tokenizer=tokenizer,
                    max_seq_len=max_seq_len,
                    check_prompt=check_prompt,
                )
            )
        except SampleDropped as exc:
            dropped[exc.reason] += 1
    return SampleSet(samples=samples, dropped=dict(dropped))
