"""Hand-off of an adapter revision to an OpenAI-compatible policy endpoint.

The endpoint loads LoRA adapters at run time with vLLM's API, which the embedded server
(:mod:`mindforge.policy.server.server`) implements too: ``POST /v1/load_lora_adapter``
``{"lora_name", "lora_path"}``, and ``GET /v1/models`` lists each loaded adapter with its
path as ``root``. A vLLM started with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` takes the same calls (``docs/vllm.md``).

Rules:

- an adapter revision is served under a **versioned name**
  (:func:`versioned_adapter_name`, ``<lineage>-g<gen>-r<rev>``), and a name is never
  reused for other weights: a name the endpoint already serves from another path, or
  (embedded server) once served with other weights, is refused with
  :class:`AdapterNameConflictError`;
- handing off the same revision again (a retried activity) is a no-op;
- after loading, a chat completion under the new name must answer (:func:`probe_adapter`);
- with an ``api_key`` every call sends ``Authorization: Bearer <key>`` (the policy
  server's ``MINDFORGE_POLICY_API_KEY``, vLLM's ``--api-key``).

Pure HTTP (``httpx``), no torch.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Literal

import httpx

from mindforge.errors import MindForgeError
from mindforge.payloads.update import HandoffRecord

PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]


class ServingError(MindForgeError):
    """Base class of hand-off failures."""


class EndpointUnavailableError(ServingError):
    """The endpoint did not answer or answered 5xx; retrying may help."""


class AdapterNameConflictError(ServingError):
    """The name is already bound to other weights on the endpoint; register a new versioned name."""


class AdapterLoadError(ServingError):
    """The endpoint refused to load the adapter (no adapter at the path, unloadable weights)."""


class ProbeError(ServingError):
    """A chat completion under the adapter's name did not answer properly."""


_SLUG_RE = re.compile(r"[^a-z0-9._-]+")


def versioned_adapter_name(lineage_id: str, generation: int, revision: int) -> str:
    """The serving name of a lineage's adapter revision: ``<lineage>-g<gen>-r<rev>``.

    The lineage part is lower-cased and every run of characters outside ``[a-z0-9._-]``
    becomes ``-``, so the name is a valid model id, URL segment and contract revision
    suffix.

    Raises:
        ValueError: negative generation or revision, or an empty lineage slug.
    """
    if generation < 0 or revision < 0:
        raise ValueError(f"generation and revision must be >= 0, got {generation} and {revision}")
    slug = _SLUG_RE.sub("-", lineage_id.lower()).strip("-._")
    if not slug:
        raise ValueError(f"lineage id {lineage_id!r} has no character usable in an adapter name")
    return f"{slug}-g{generation}-r{revision}"


def _client(timeout_sec: float, api_key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout_sec, headers=headers)


def _url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path


def _error_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", body))[:500]
    return str(body)[:500]


def _request(client: httpx.Client, method: str, url: str, **kw) -> httpx.Response:
    try:
        resp = client.request(method, url, **kw)
    except httpx.HTTPError as exc:
        raise EndpointUnavailableError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code >= 500:
        raise EndpointUnavailableError(f"{method} {url}: HTTP {resp.status_code}: {_error_text(resp)}")
    return resp


def served_adapters(base_url: str, *, timeout_sec: float = 30.0, api_key: str | None = None) -> dict[str, str]:
    """Adapters the endpoint lists in ``/v1/models``: name -> path (``root``).

    Entries with a ``parent`` (vLLM's and the embedded server's LoRA cards) are adapters.

    Raises:
        EndpointUnavailableError: no answer or 5xx.
        ServingError: an answer that is not a model list.
    """
    with _client(timeout_sec, api_key) as http:
        resp = _request(http, "GET", _url(base_url, "/models"))
    if resp.status_code != 200:
        raise ServingError(f"GET {base_url}/models: HTTP {resp.status_code}: {_error_text(resp)}")
    try:
        cards = resp.json()["data"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ServingError(f"GET {base_url}/models: not a model list") from exc
    return {c["id"]: str(c.get("root") or "") for c in cards if c.get("parent")}


def load_adapter(
    base_url: str, name: str, path: Path | str, *, timeout_sec: float = 300.0, api_key: str | None = None
) -> Literal["loaded", "already_loaded"]:
    """Load the adapter at ``path`` under ``name``, refusing to rebind a name.

    Args:
        base_url: the endpoint's OpenAI base URL (``http://host:port/v1``).
        name: the versioned serving name.
        path: the PEFT adapter directory, as the endpoint's host sees it.
        timeout_sec: HTTP timeout of each call, seconds.
        api_key: the endpoint's API key (``Authorization: Bearer``); None sends none.

    Returns:
        ``loaded``, or ``already_loaded`` when the endpoint serves ``name`` from ``path``.

    Raises:
        AdapterNameConflictError: ``name`` is served from another path, or the endpoint
            says the name is bound to other weights.
        AdapterLoadError: the endpoint refused the adapter (4xx for another reason).
        EndpointUnavailableError: no answer or 5xx (retryable).
    """
    path = str(path)
    served = served_adapters(base_url, timeout_sec=timeout_sec, api_key=api_key)
    if name in served:
        if served[name] == path:
            return "already_loaded"
        raise AdapterNameConflictError(
            f"{base_url}: adapter name {name!r} is already served from {served[name]!r}, not {path!r}; "
            "a name is never reused for other weights"
        )
    with _client(timeout_sec, api_key) as http:
        resp = _request(http, "POST", _url(base_url, "/load_lora_adapter"), json={"lora_name": name, "lora_path": path})
    if resp.status_code == 200:
        return "loaded"
    text = _error_text(resp)
    if resp.status_code == 400 and ("different weights" in text or "already" in text):
        raise AdapterNameConflictError(f"{base_url}: cannot load {name!r}: {text}")
    raise AdapterLoadError(f"{base_url}: cannot load {name!r} from {path!r}: HTTP {resp.status_code}: {text}")


def probe_adapter(
    base_url: str, name: str, *, max_tokens: int = 8, timeout_sec: float = 300.0, api_key: str | None = None
) -> dict:
    """One greedy chat completion under ``name``; it must answer as that model.

    Args:
        base_url: the endpoint's OpenAI base URL.
        name: the model (adapter) name to ask.
        max_tokens: completion cap, tokens.
        timeout_sec: HTTP timeout, seconds.
        api_key: the endpoint's API key; None sends none.

    Returns:
        the ``chat.completion`` body.

    Raises:
        ProbeError: a 4xx, a body without a choice, or one reporting another model.
        EndpointUnavailableError: no answer or 5xx (retryable).
    """
    body = {"model": name, "messages": PROBE_MESSAGES, "max_tokens": max_tokens, "temperature": 0.0}
    with _client(timeout_sec, api_key) as http:
        resp = _request(http, "POST", _url(base_url, "/chat/completions"), json=body)
    if resp.status_code != 200:
        raise ProbeError(f"{base_url}: probe of {name!r}: HTTP {resp.status_code}: {_error_text(resp)}")
    try:
        out = resp.json()
        choice = out["choices"][0]
        choice["message"]["role"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ProbeError(f"{base_url}: probe of {name!r}: the response has no assistant choice") from exc
    if out.get("model") != name:
        raise ProbeError(f"{base_url}: probe of {name!r} was answered by model {out.get('model')!r}")
    return out


def hand_off(
    base_url: str, name: str, path: Path | str, *, timeout_sec: float = 300.0, api_key: str | None = None
) -> HandoffRecord:
    """Load an adapter revision under its versioned name and probe that it answers.

    Args:
        base_url / name / path / timeout_sec: see :func:`load_adapter`.
        api_key: the endpoint's API key; None sends none. The record never holds it.

    Raises:
        AdapterNameConflictError, AdapterLoadError, ProbeError: not retryable.
        EndpointUnavailableError: retryable.
    """
    began = time.monotonic()
    state = load_adapter(base_url, name, path, timeout_sec=timeout_sec, api_key=api_key)
    out = probe_adapter(base_url, name, timeout_sec=timeout_sec, api_key=api_key)
    return HandoffRecord(
        base_url=base_url,
        name=name,
        path=str(path),
        load=state,
        probe_model=out["model"],
        probe_finish_reason=out["choices"][0].get("finish_reason"),
        probe_completion_tokens=int((out.get("usage") or {}).get("completion_tokens") or 0),
        wall_sec=time.monotonic() - began,
    )
