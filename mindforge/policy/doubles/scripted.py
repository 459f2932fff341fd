"""A scripted policy server — FOR TESTS ONLY, never for product runs.

The only test double MindForge allows (docs/design.md, "Components"): a policy behind the real
OpenAI-compatible HTTP API (``/v1/models``, ``/v1/chat/completions``,
``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter``) whose replies follow a script,
so that a test can make "the model" behave in a known way.

A script is a list of rules tried in order; the first rule whose ``match`` fits the
request answers with its ``reply``. A rule may succeed only with a probability, drawn
from a seeded RNG (for noisy benchmarks); when the draw fails the rule answers with its
``on_failure`` reply, or, without one, the next rules are tried. Replies are text or a
native tool call, and knobs make them empty, cut (``finish_reason: "length"``), an HTTP
error, or slow.

Token ids and logprobs are fake but well formed: the token ids are the UTF-8 bytes of the
text (tool calls as their ``<tool_call>{json}</tool_call>`` text), each logprob is -0.1.

Example script (JSON)::

    {"rules": [{"match": {"system_contains": "HINT_X"},
                "reply": {"content": "{\\"action\\": \\"finish\\"}"}}],
     "default": {"content": "I do not know."}}

Run it in-process with :func:`start_scripted_policy`, or in another process with
``python -m mindforge.policy.doubles.scripted --script FILE --port N``.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field, SecretStr, ValidationError

from mindforge.errors import InputError, MindForgeError
from mindforge.policy.server.auth import as_secret, settings_key
from mindforge.policy.server.protocol import (
    AdapterRegistry,
    ChatCompletionRequest,
    LoadLoRAAdapterRequest,
    UnloadLoRAAdapterRequest,
    adapter_sha256,
    completion_body,
    error_response,
    install_error_handlers,
    logprob_entry,
    message_text,
    model_card,
    model_not_found,
    tool_names,
)
from mindforge.policy.server.runner import ServerHandle, serve_app


class ScriptedToolCall(BaseModel):
    """A native tool call to reply with."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptReply(BaseModel):
    """What to answer.

    Attributes:
        content: assistant text ("" with no tool call = an empty reply).
        tool_call: reply with this native tool call (``content`` then goes beside it,
            or is None when empty).
        finish_reason: override; ``length`` simulates a reply cut by ``max_tokens``.
        http_status: answer with this HTTP error status instead (e.g. 500).
        delay_sec: sleep this many seconds before answering.
    """

    content: str = ""
    tool_call: ScriptedToolCall | None = None
    finish_reason: Literal["stop", "length", "tool_calls"] | None = None
    http_status: int | None = Field(default=None, ge=400, le=599)
    delay_sec: float = Field(default=0.0, ge=0.0)


class ScriptMatch(BaseModel):
    """Conditions on the request; all given ones must hold (none given = always).

    Attributes:
        system_contains: substring of the system prompt (all system messages).
        last_message_contains: substring of the last user or tool message.
        tool_available: a function name present in ``tools`` or named in the system prompt.
        model: the requested model or adapter name.
        turn: the number of assistant messages already in the conversation (0 = first call).
        conversation_contains: substrings that must each appear in some message of the
            conversation (system, user, assistant or tool).
    """

    system_contains: str | None = None
    last_message_contains: str | None = None
    tool_available: str | None = None
    model: str | None = None
    turn: int | None = Field(default=None, ge=0)
    conversation_contains: list[str] = Field(default_factory=list)


class ScriptRule(BaseModel):
    """One rule: when ``match`` fits, reply (with probability ``success_probability``).

    Attributes:
        match: the conditions.
        reply: the answer on success.
        success_probability: chance of success per matching request (seeded RNG).
        on_failure: the answer when the draw fails (None: try the next rules).
        alternate: succeed on the rule's 1st, 3rd, 5th ... matching request and fail on
            the others, in arrival order, instead of drawing: any run of two or more
            consecutive matching requests (one group of attempts) then holds both a
            success and a failure, whatever the order of its requests.
    """

    match: ScriptMatch = Field(default_factory=ScriptMatch)
    reply: ScriptReply
    success_probability: float = Field(default=1.0, ge=0.0, le=1.0)
    on_failure: ScriptReply | None = None
    alternate: bool = False


class PolicyScript(BaseModel):
    """A whole script.

    Attributes:
        rules: tried in order.
        default: the reply when no rule answers.
        seed: seed of the RNG behind ``success_probability``. With a request ``seed``
            the draw depends only on (seed, request seed, rule, turn), whatever the
            order of requests; without one, a shared RNG is drawn in arrival order.
        base_models: names served as base models (``/v1/models``).
        return_token_ids: answer ``return_token_ids`` / ``logprobs`` requests with the
            fake ids and logprobs (default). False answers as an endpoint that exposes
            neither: the trainer then re-tokenises the trajectory with its own tokenizer
            (``mindforge.trainer.samples``) instead of dropping it for ids that no real
            tokenizer produced.
    """

    rules: list[ScriptRule] = Field(default_factory=list)
    default: ScriptReply = Field(default_factory=ScriptReply)
    seed: int = 0
    base_models: list[str] = Field(default_factory=lambda: ["scripted"])
    return_token_ids: bool = True

    @classmethod
    def from_file(cls, path: Path) -> PolicyScript:
        """Load a JSON script.

        Raises:
            InputError: unreadable file, bad JSON, or a field that fails validation.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(path, "", f"cannot read script: {exc}") from exc
        except ValueError as exc:
            raise InputError(path, "", f"not valid JSON: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(path, ".".join(str(p) for p in err["loc"]), err["msg"]) from exc


def _system_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "system")


def _last_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") in ("user", "tool"):
            return message_text(msg.get("content"))
    return ""


def _matches(match: ScriptMatch, req: ChatCompletionRequest, turn: int) -> bool:
    system = _system_text(req.messages)
    if match.system_contains is not None and match.system_contains not in system:
        return False
    if match.last_message_contains is not None and match.last_message_contains not in _last_text(req.messages):
        return False
    if match.tool_available is not None:
        if match.tool_available not in tool_names(req.tools) and match.tool_available not in system:
            return False
    if match.model is not None and match.model != req.model:
        return False
    if match.conversation_contains:
        texts = [message_text(m.get("content")) for m in req.messages]
        if not all(any(needle in t for t in texts) for needle in match.conversation_contains):
            return False
    return match.turn is None or match.turn == turn


class ScriptedPolicy:
    """Chooses replies for requests according to a :class:`PolicyScript` (thread-safe)."""

    def __init__(self, script: PolicyScript) -> None:
        self.script = script
        self._rng = random.Random(script.seed)
        self._lock = threading.Lock()
        self._calls: dict[int, int] = {}
        self.requests: list[dict[str, Any]] = []

    def _succeeds(self, req: ChatCompletionRequest, rule: ScriptRule, index: int, turn: int) -> bool:
        if rule.alternate:
            with self._lock:
                calls = self._calls.get(index, 0)
                self._calls[index] = calls + 1
            return calls % 2 == 0
        return rule.success_probability >= 1.0 or self._draw(req, index, turn) < rule.success_probability

    def _draw(self, req: ChatCompletionRequest, rule_index: int, turn: int) -> float:
        if req.seed is not None:
            key = f"{self.script.seed}:{req.seed}:{rule_index}:{turn}".encode()
            return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")).random()
        with self._lock:
            return self._rng.random()

    def choose(self, req: ChatCompletionRequest) -> ScriptReply:
        """The reply for ``req`` (also logs the request in :attr:`requests`)."""
        with self._lock:
            self.requests.append(req.model_dump(mode="json"))
        turn = sum(1 for m in req.messages if m.get("role") == "assistant")
        for index, rule in enumerate(self.script.rules):
            if not _matches(rule.match, req, turn):
                continue
            if self._succeeds(req, rule, index, turn):
                return rule.reply
            if rule.on_failure is not None:
                return rule.on_failure
        return self.script.default


def _fake_logprobs(token_ids: list[int], k: int) -> list[dict[str, Any]]:
    entries = []
    for tid in token_ids:
        tok = bytes([tid]).decode("utf-8", errors="replace")
        entries.append(logprob_entry(tok, -0.1, [(tok, -0.1)] * min(k, 1)))
    return entries


def reply_body(reply: ScriptReply, req: ChatCompletionRequest, *, token_ids: bool = True) -> dict[str, Any]:
    """The ``chat.completion`` body for ``reply`` (fake token ids: UTF-8 bytes).

    With ``token_ids`` False the body carries neither token ids nor logprobs, whatever
    the request asked.
    """
    content: str | None = reply.content
    calls: list[dict[str, Any]] = []
    text = reply.content
    if reply.tool_call is not None:
        args = json.dumps(reply.tool_call.arguments)
        call_text = f'<tool_call>\n{{"name": "{reply.tool_call.name}", "arguments": {args}}}\n</tool_call>'
        text = f"{text}\n{call_text}" if text else call_text
        content = reply.content or None
        digest = hashlib.sha256(f"{req.messages!r}{args}".encode()).hexdigest()[:24]
        calls = [
            {"id": f"call_{digest}", "type": "function", "function": {"name": reply.tool_call.name, "arguments": args}}
        ]
    finish = reply.finish_reason or ("tool_calls" if calls else "stop")
    prompt_ids = list(json.dumps(req.messages).encode("utf-8"))
    completion_ids = list(text.encode("utf-8"))
    return completion_body(
        model=req.model,
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        logprobs=_fake_logprobs(completion_ids, req.top_logprobs or 0) if req.logprobs and token_ids else None,
        return_token_ids=req.return_token_ids and token_ids,
    )


def create_scripted_app(script: PolicyScript) -> FastAPI:
    """The scripted policy as a FastAPI app; ``app.state.policy`` is the :class:`ScriptedPolicy`."""
    policy = ScriptedPolicy(script)
    adapters = AdapterRegistry()
    lock = threading.Lock()
    app = FastAPI(title="MindForge scripted policy (tests only)")
    app.state.policy = policy
    app.state.adapters = adapters
    install_error_handlers(app)

    @app.get("/v1/models")
    def list_models() -> dict:
        cards = [model_card(name, root=name) for name in script.base_models]
        cards += [model_card(n, root=p, parent=script.base_models[0]) for n, (p, _s) in list(adapters.loaded.items())]
        return {"object": "list", "data": cards}

    @app.get("/v1/scripted/requests")
    def logged_requests() -> list[dict[str, Any]]:
        return list(policy.requests)

    @app.post("/v1/chat/completions")
    def chat_completions(req: ChatCompletionRequest):
        if req.model not in script.base_models and req.model not in adapters.loaded:
            return model_not_found(req.model)
        reply = policy.choose(req)
        if reply.delay_sec:
            time.sleep(reply.delay_sec)
        if reply.http_status is not None:
            return error_response(reply.http_status, "scripted failure", "InternalServerError")
        return reply_body(reply, req, token_ids=script.return_token_ids)

    @app.post("/v1/load_lora_adapter", response_class=PlainTextResponse)
    def load_lora_adapter(req: LoadLoRAAdapterRequest):
        path = Path(req.lora_path)
        sha = adapter_sha256(path) if path.exists() else hashlib.sha256(req.lora_path.encode()).hexdigest()
        with lock:
            try:
                adapters.check_load(req.lora_name, sha)
            except ValueError as exc:
                return error_response(400, str(exc), "InvalidUserInput")
            adapters.add(req.lora_name, req.lora_path, sha)
        return f"Success: LoRA adapter '{req.lora_name}' added successfully."

    @app.post("/v1/unload_lora_adapter", response_class=PlainTextResponse)
    def unload_lora_adapter(req: UnloadLoRAAdapterRequest):
        with lock:
            if req.lora_name not in adapters.loaded:
                return error_response(404, f"The lora adapter '{req.lora_name}' cannot be found.", "NotFoundError")
            adapters.remove(req.lora_name)
        return f"Success: LoRA adapter '{req.lora_name}' removed successfully."

    return app


def start_scripted_policy(
    script: PolicyScript | dict | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    api_key: SecretStr | str | None = None,
) -> ServerHandle:
    """Serve a script from a background thread of this process.

    It listens under the embedded server's rules (:mod:`mindforge.policy.server.auth`):
    beyond loopback only with an API key, and with a key every request must carry it.

    Args:
        script: the script, its dict form, or a JSON file.
        host: address to listen on.
        port: TCP port; 0 picks a free one.
        api_key: the key clients must send (``Authorization: Bearer``); None: settings'
            ``policy_api_key``.

    Returns:
        a handle with ``.base_url`` (``http://host:port/v1``), ``.stop()``, and
        ``.app.state.policy.requests`` (the requests received, in order).

    Raises:
        InputError: a script file that cannot be read or validated.
        UnprotectedBindError: ``host`` is beyond loopback and there is no key.
    """
    if isinstance(script, Path):
        script = PolicyScript.from_file(script)
    elif isinstance(script, dict):
        script = PolicyScript.model_validate(script)
    key = as_secret(api_key) if api_key is not None else settings_key()
    return ServerHandle(create_scripted_app(script), host, port, api_key=key)


def main(argv: list[str] | None = None) -> int:
    """``python -m mindforge.policy.doubles.scripted --script FILE [--host H] --port N``.

    The API key comes from settings (``MINDFORGE_POLICY_API_KEY``), as for the embedded server.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m mindforge.policy.doubles.scripted")
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    ns = parser.parse_args(argv)
    try:
        app = create_scripted_app(PolicyScript.from_file(ns.script))
        serve_app(app, ns.host, ns.port, settings_key(), log_level="warning")
    except MindForgeError as exc:  # InputError, UnprotectedBindError
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
