"""What both policy engines do around generation: templating, the context check, the reply.

Pure (no torch): the transformers engine and the llama.cpp engine share these so that the
same request gets the same prompt token ids, the same errors and a reply of the same
shape from either engine.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from mindforge.agent.actions import action_end
from mindforge.policy.server.protocol import (
    ChatCompletionRequest,
    completion_body,
    logprob_entry,
    message_text,
    parse_tool_calls,
    tool_call_end,
)


class PolicyRequestError(Exception):
    """A request the engine refuses; carries the HTTP status and OpenAI error type."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.param = param


def unknown_model(name: str) -> PolicyRequestError:
    """404 for a ``model`` that is neither the base model nor a loaded adapter (vLLM's wording)."""
    return PolicyRequestError(404, f"The model `{name}` does not exist.", "NotFoundError", "model")


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: text content, tool-call arguments as dicts."""
    out = []
    for msg in messages:
        msg = dict(msg)
        msg["content"] = message_text(msg.get("content"))
        calls = []
        for call in msg.get("tool_calls") or []:
            call = copy.deepcopy(call)
            fn = call.get("function", {})
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass  # keep the raw string; templates print it as is or quoted
            calls.append(call)
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def prompt_token_ids(tokenizer: Any, req: ChatCompletionRequest) -> list[int]:
    """The request's messages (and tools) through the tokenizer's chat template, as token ids.

    Args:
        tokenizer: a transformers tokenizer with a chat template.
        req: the request.

    Returns:
        the prompt, shape (prompt_tokens,), ending with the assistant header.

    Raises:
        PolicyRequestError: 400 when the template fails.
    """
    try:
        text = tokenizer.apply_chat_template(
            template_messages(req.messages), tools=req.tools or None, add_generation_prompt=True, tokenize=False
        )
    except Exception as exc:  # jinja2 TemplateError and friends
        raise PolicyRequestError(400, f"chat template failed: {exc}", param="messages") from exc
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def completion_budget(req: ChatCompletionRequest, prompt_tokens: int, max_model_len: int) -> int:
    """Tokens the reply may have: ``max_tokens`` capped by the room left in the context window.

    Raises:
        PolicyRequestError: 400 (vLLM's wording) when the prompt leaves no room.
    """
    room = max_model_len - prompt_tokens
    if room < 1:
        raise PolicyRequestError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your messages "
            f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages.",
            param="messages",
        )
    return min(req.token_limit or room, room)


def action_complete(action_format: str | None, text: str) -> bool:
    """Whether ``text`` holds the whole first action of ``action_format`` (the request's ``stop_at_action``).

    The agent acts on a reply's first action only, so an engine stops decoding once this
    is true: :func:`mindforge.agent.actions.action_end` for the text formats,
    :func:`mindforge.policy.server.protocol.tool_call_end` for ``tool_calls``. None: never.
    """
    if action_format is None:
        return False
    if action_format == "tool_calls":
        return tool_call_end(text) is not None
    return action_end(action_format, text) is not None


#: per generated token: (logprob of the chosen token, [(alternative token id, logprob), ...] best first)
TokenLogprobs = tuple[float, list[tuple[int, float]]]


def reply_body(
    req: ChatCompletionRequest,
    *,
    prompt: Sequence[int],
    completion: Sequence[int],
    tokenizer: Any,
    eos_ids: Sequence[int],
    max_new: int,
    logprobs: Sequence[TokenLogprobs] | None,
    cached_tokens: int | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The ``chat.completion`` body for a finished generation.

    Stop strings cut the text before the first one (``finish_reason`` ``stop``); a reply
    that neither ended with EOS nor hit a stop string nor completed its first action
    (``stop_at_action``) and used all ``max_new`` tokens finished by ``length``; parsed
    tool calls turn ``stop`` into ``tool_calls``.

    Args:
        req: the request (stop strings, logprobs flags, model name, token-id flag).
        prompt: prompt token ids, shape (prompt_tokens,).
        completion: generated token ids incl. the EOS token when one ended the reply,
            shape (completion_tokens,).
        tokenizer: a transformers tokenizer (``decode``): the message text skips special
            tokens, a logprobs entry's token text keeps them (``<|im_end|>`` shows as such).
        eos_ids: token ids that end a reply.
        max_new: the completion budget the generation ran with (tokens).
        logprobs: one entry per completion token when the request asked for logprobs.
        cached_tokens, timings: the engine's prefix-cache reuse and timings, passed to
            :func:`mindforge.policy.server.protocol.completion_body` as they are.

    Returns:
        the body built by :func:`mindforge.policy.server.protocol.completion_body`.
    """
    text = tokenizer.decode(list(completion), skip_special_tokens=True)
    finish = "stop"
    cut = [text.find(s) for s in req.stop_list if s in text]
    if cut:
        text = text[: min(cut)]
    elif (
        not (completion and completion[-1] in eos_ids)
        and len(completion) >= max_new
        and not action_complete(req.stop_at_action, text)
    ):
        finish = "length"
    content, calls = parse_tool_calls(text)
    if calls and finish == "stop":
        finish = "tool_calls"
    entries = None
    if req.logprobs:
        if logprobs is None or len(logprobs) != len(completion):
            raise RuntimeError("engine returned no logprobs for every completion token")
        k = req.top_logprobs or 0
        entries = []
        for token_id, (lp, top) in zip(completion, logprobs, strict=True):
            alts = [(tokenizer.decode([i]), v) for i, v in top[:k]]
            entries.append(logprob_entry(tokenizer.decode([token_id]), lp, alts))
    return completion_body(
        model=req.model,
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        prompt_token_ids=list(prompt),
        completion_token_ids=list(completion),
        logprobs=entries,
        return_token_ids=req.return_token_ids,
        cached_tokens=cached_tokens,
        timings=timings,
    )
