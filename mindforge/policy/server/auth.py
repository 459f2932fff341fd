"""Where a policy server may listen, and who may call it.

A policy server listens on loopback (``127.0.0.1``) unless told otherwise. With an API key
(settings' ``policy_api_key``, i.e. ``MINDFORGE_POLICY_API_KEY``) every request except
``GET /health`` must carry ``Authorization: Bearer <key>``, as the OpenAI API and vLLM's
``--api-key`` expect; any other request gets 401 with an OpenAI-shaped error body.
Listening beyond loopback without a key is refused before the server starts.

Both the embedded server (:mod:`mindforge.policy.server.server`) and the scripted test
policy (:mod:`mindforge.policy.doubles.scripted`) go through :func:`protect` (via
:mod:`mindforge.policy.server.runner`), so they refuse and answer alike.
"""

from __future__ import annotations

import hmac
from typing import Any

from pydantic import SecretStr

from mindforge.errors import MindForgeError
from mindforge.listen import is_loopback
from mindforge.policy.server.protocol import error_response
from mindforge.settings import POLICY_API_KEY_ENV, get_settings

#: paths answered without a key (liveness probes, as vLLM leaves ``/health`` open)
OPEN_PATHS = frozenset({"/health"})


class UnprotectedBindError(MindForgeError, ValueError):
    """Asked to listen beyond loopback without an API key."""

    def __init__(self, host: str) -> None:
        self.host = host
        super().__init__(
            f"refusing to serve the policy on {host}: beyond loopback the policy server needs an API key; set "
            f"{POLICY_API_KEY_ENV} (settings' policy_api_key), which clients send as `Authorization: Bearer <key>`, "
            "or listen on 127.0.0.1 (the default)"
        )


def as_secret(api_key: SecretStr | str | None) -> SecretStr | None:
    """The key as a ``SecretStr``, or None for no key (None or an empty string)."""
    if api_key is None:
        return None
    secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key)
    return secret if secret.get_secret_value() else None


def settings_key() -> SecretStr | None:
    """This process's policy API key (settings' ``policy_api_key``), or None."""
    return as_secret(get_settings().policy_api_key)


def check_bind(host: str, api_key: SecretStr | str | None) -> None:
    """Refuse a listening address beyond loopback when there is no API key.

    Raises:
        UnprotectedBindError: ``host`` is not loopback and ``api_key`` is None or empty.
    """
    if not is_loopback(host) and as_secret(api_key) is None:
        raise UnprotectedBindError(host)


class BearerAuth:
    """ASGI middleware: 401 unless ``Authorization: Bearer <key>`` matches (constant-time compare).

    The key is held as a ``SecretStr``, so the app's middleware list never shows it.
    """

    def __init__(self, app: Any, key: SecretStr) -> None:
        self.app = app
        self._key = key.get_secret_value().encode()

    def __repr__(self) -> str:
        return "BearerAuth(key=**********)"

    def _allowed(self, headers: list[tuple[bytes, bytes]]) -> bool:
        value = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        scheme, _, token = value.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._allowed(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        resp = error_response(
            401, "Missing or incorrect API key: send `Authorization: Bearer <key>`.", "AuthenticationError"
        )
        resp.headers["WWW-Authenticate"] = "Bearer"
        await resp(scope, receive, send)


def protect(app: Any, host: str, api_key: SecretStr | str | None) -> None:
    """Check where ``app`` is to listen and, with a key, require it on every request.

    Call before the app serves its first request (Starlette builds its middleware then).

    Args:
        app: a FastAPI/Starlette app.
        host: the address it is to listen on.
        api_key: the key clients must send; None or empty for none (loopback only).

    Raises:
        UnprotectedBindError: see :func:`check_bind`.
    """
    check_bind(host, api_key)
    secret = as_secret(api_key)
    if secret is not None:
        app.add_middleware(BearerAuth, key=secret)


def bearer_headers(api_key: SecretStr | str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <key>"}`` for a client's requests, or ``{}`` without a key."""
    secret = as_secret(api_key)
    return {"Authorization": f"Bearer {secret.get_secret_value()}"} if secret is not None else {}
