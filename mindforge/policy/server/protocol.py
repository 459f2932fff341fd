"""Wire shapes shared by the embedded policy server and the scripted test policy.

Requests and responses follow the OpenAI Chat Completions API, with vLLM's extensions
where the OpenAI API has no field for what RL training needs:

- ``return_token_ids: true`` in the request adds ``prompt_token_ids`` at the top level of
  the response and ``token_ids`` on each choice (vLLM ``ChatCompletionResponse`` /
  ``ChatCompletionResponseChoice``);
- ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}`` and
  ``POST /v1/unload_lora_adapter`` ``{"lora_name"}`` answer 200 with a plain-text
  ``Success: ...`` line, 400 for a bad or conflicting load, 404 for an unknown name
  (vLLM ``OpenAIServingModels``).

Errors use the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``. This
module is pure (no torch), so the CLI and tests can import it cheaply.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field


class ChatCompletionRequest(BaseModel):
    """The subset of the Chat Completions request both servers honour (others are ignored).

    Attributes:
        model: base model id or a loaded adapter name.
        messages: OpenAI messages (system, user, assistant with ``tool_calls``, tool).
        tools: OpenAI tool definitions, passed to the chat template when given.
        temperature: sampling temperature; 0 means greedy.
        top_p: nucleus sampling mass in (0, 1].
        max_tokens / max_completion_tokens: cap on generated tokens.
        seed: seed of the sampler for this request.
        stop: stop string(s); the text is cut before the first one.
        n: number of choices; only 1 is supported.
        logprobs / top_logprobs: return per-token logprobs (and the top-k alternatives).
        return_token_ids: vLLM extension, see the module docstring.
        response_format: OpenAI structured output: ``{"type": "json_schema", "json_schema":
            {"name", "schema"}}`` constrains the reply to the schema where the engine can
            (llama.cpp: a grammar); ``{"type": "text"}`` or None: free text.
        stop_at_action: MindForge extension: the agent's action format; the engine ends the
            reply where its first complete action ends (the agent acts on that action only,
            :func:`mindforge.agent.actions.action_end`, :func:`tool_call_end`), with
            ``finish_reason`` ``stop``. None: replies end at EOS, a stop string or the cap.
            Servers that do not know the field (vLLM) ignore it.
    """

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    n: Literal[1] = 1
    stream: Literal[False] = False
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    return_token_ids: bool = False
    response_format: dict[str, Any] | None = None
    stop_at_action: Literal["json", "tool_calls", "fenced_bash", "command"] | None = None

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of a ``json_schema`` response format, else None."""
        fmt = self.response_format or {}
        if fmt.get("type") != "json_schema":
            return None
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None

    @property
    def token_limit(self) -> int | None:
        """``max_completion_tokens`` or else ``max_tokens`` (tokens), or None."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def stop_list(self) -> list[str]:
        """Stop strings as a list (empty strings dropped)."""
        if self.stop is None:
            return []
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return [s for s in stops if s]


class LoadLoRAAdapterRequest(BaseModel):
    """Body of ``POST /v1/load_lora_adapter`` (vLLM's shape)."""

    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadLoRAAdapterRequest(BaseModel):
    """Body of ``POST /v1/unload_lora_adapter`` (vLLM's shape)."""

    lora_name: str = Field(min_length=1)


def error_response(status: int, message: str, err_type: str, param: str | None = None) -> JSONResponse:
    """An OpenAI-shaped error body with HTTP status ``status``."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return JSONResponse(status_code=status, content=body)


def model_not_found(name: str) -> JSONResponse:
    """404 for a ``model`` that is neither the base model nor a loaded adapter."""
    return error_response(404, f"The model `{name}` does not exist.", "NotFoundError", "model")


def install_error_handlers(app: FastAPI) -> None:
    """Answer request validation errors with 400 in the OpenAI error shape (as vLLM does)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg")))
        return error_response(400, "; ".join(parts) or "invalid request", "BadRequestError")


def message_text(content: Any) -> str:
    """Flatten a message ``content`` (string, None or a list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split Qwen/Hermes-style ``<tool_call>{json}</tool_call>`` blocks out of model text.

    A block whose body is not a JSON object with a string ``name`` is left in the text.

    Args:
        text: the decoded completion.

    Returns:
        ``(content, tool_calls)``: the remaining text (None when nothing but tool calls
        was said) and OpenAI ``tool_calls`` entries (``arguments`` as a JSON string).
    """
    calls: list[dict[str, Any]] = []

    def _take(match: re.Match[str]) -> str:
        try:
            body = json.loads(match.group(1))
        except ValueError:
            return match.group(0)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return match.group(0)
        args = body.get("arguments", {})
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": body["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
        )
        return ""

    rest = _TOOL_CALL_RE.sub(_take, text)
    if not calls:
        return text, []
    rest = rest.strip()
    return (rest or None), calls


def tool_call_end(text: str) -> int | None:
    """Index just past the first ``<tool_call>...</tool_call>`` block :func:`parse_tool_calls` takes, or None.

    The agent uses the first tool call of a reply only (``tools.action_format`` =
    ``tool_calls``), so an engine may stop decoding here; until a block with a JSON object
    naming a string ``name`` has closed, None.
    """
    for match in _TOOL_CALL_RE.finditer(text):
        try:
            body = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            return match.end()
    return None


def tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    """Function names declared in an OpenAI ``tools`` list."""
    names = []
    for tool in tools or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def logprob_entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    """One ``choice.logprobs.content`` entry in the OpenAI shape.

    Args:
        token: the sampled token's text.
        logprob: its log-probability (natural log).
        top: ``(token_text, logprob)`` alternatives, most likely first.
    """
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode("utf-8")),
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in top],
    }


def completion_body(
    *,
    model: str,
    content: str | None,
    tool_calls: list[dict[str, Any]],
    finish_reason: str,
    prompt_token_ids: list[int],
    completion_token_ids: list[int],
    logprobs: list[dict[str, Any]] | None,
    return_token_ids: bool,
    cached_tokens: int | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` response body with one choice.

    Args:
        model: the name the request asked for (base id or adapter name).
        content: assistant text (None when only tool calls were made).
        tool_calls: OpenAI ``tool_calls`` entries (may be empty).
        finish_reason: ``stop``, ``length`` or ``tool_calls``.
        prompt_token_ids: the prompt as tokens, shape (prompt_tokens,).
        completion_token_ids: generated tokens, shape (completion_tokens,).
        logprobs: ``choice.logprobs.content`` entries, or None when not requested.
        return_token_ids: include vLLM's ``prompt_token_ids`` and ``token_ids``.
        cached_tokens: prompt tokens whose KV cache the engine reused, reported as OpenAI's
            ``usage.prompt_tokens_details.cached_tokens`` (None: the engine does not say).
        timings: the engine's per-request timings in llama.cpp server's ``timings`` shape
            (``cache_n``, ``prompt_n``, ``prompt_ms``, ``predicted_n``, ``predicted_ms``,
            plus MindForge's ``queue_ms``, time waiting for a free slot or another slot's
            prefill, ``host_ms``, per-token Python, and ``shared_n``, prompt tokens copied
            from another slot's prefill); None leaves it out.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "logprobs": {"content": logprobs} if logprobs is not None else None,
        "finish_reason": finish_reason,
    }
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt_token_ids),
            "completion_tokens": len(completion_token_ids),
            "total_tokens": len(prompt_token_ids) + len(completion_token_ids),
        },
    }
    if cached_tokens is not None:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if timings is not None:
        body["timings"] = dict(timings)
    if return_token_ids:
        choice["token_ids"] = list(completion_token_ids)
        body["prompt_token_ids"] = list(prompt_token_ids)
    return body


def model_card(model_id: str, *, root: str, parent: str | None = None, max_model_len: int | None = None) -> dict:
    """One ``/v1/models`` entry (vLLM adds ``root``, ``parent`` and ``max_model_len``)."""
    return {
        "id": model_id,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "mindforge",
        "root": root,
        "parent": parent,
        "max_model_len": max_model_len,
    }


def adapter_sha256(path: Path) -> str:
    """sha256 over an adapter directory's files (relative names and bytes), or over a file.

    Raises:
        OSError: when ``path`` cannot be read.
    """
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"{path}: no files")
    for f in files:
        rel = f.relative_to(path).as_posix() if path.is_dir() else f.name
        digest.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


class AdapterRegistry:
    """Adapter names a server has loaded, and the weights (sha256) each name stands for.

    A name is bound to its weights for the server's whole life, unloads included:
    reloading a name with the same weights is a no-op, with different weights an error.
    Callers hold their own lock.
    """

    def __init__(self) -> None:
        self.loaded: dict[str, tuple[str, str]] = {}  # name -> (path, sha256)
        self._seen: dict[str, str] = {}  # name -> sha256, kept after unload

    def check_load(self, name: str, sha256: str) -> Literal["new", "same"]:
        """Whether ``name`` with ``sha256`` is a new load or a repeat of a loaded one.

        Raises:
            ValueError: the name was used before for different weights.
        """
        known = self._seen.get(name)
        if known is not None and known != sha256:
            raise ValueError(
                f"adapter name '{name}' was already used for different weights "
                f"(sha256 {known[:12]} != {sha256[:12]}); never reuse a name, register a new revision"
            )
        return "same" if name in self.loaded else "new"

    def add(self, name: str, path: str, sha256: str) -> None:
        """Record a successful load."""
        self.loaded[name] = (path, sha256)
        self._seen[name] = sha256

    def remove(self, name: str) -> None:
        """Forget a loaded adapter (its name stays bound to its weights)."""
        self.loaded.pop(name, None)
