"""One way to connect to Temporal, shared by the CLI and the worker: MindForge's data converter.

Both sides must agree on how payloads are encoded (pydantic models as JSON), so both
connect here: ``mindforge/cli/temporal_client.py`` for the commands and ``workers/main.py``
for the worker. No workflow imports this module; it lives beside the workflows because
it is orchestration code, which the CLI may import only inside functions and the worker
anywhere. :func:`connect_settings` connects as settings say, with TLS, mutual TLS and an
API key where they are given (a secured self-hosted cluster, Temporal Cloud).
"""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RetryConfig, TLSConfig

from mindforge.errors import InfraError, InputError
from mindforge.settings import Settings

#: how long a call made through a connected client keeps retrying while the server does
#: not answer, in seconds: a dev server that is restarted on its database file (or a
#: frontend that fails over) comes back within it, and a waiting ``quickstart`` or
#: ``lineage watch`` rides the gap out instead of exiting (Temporal's default is 10 s)
RECONNECT_WINDOW_SEC = 300
#: Temporal's own retry of every call: exponential back-off up to 5 s between tries,
#: given up after :data:`RECONNECT_WINDOW_SEC`
CALL_RETRY = RetryConfig(
    max_interval_millis=5000, max_elapsed_time_millis=RECONNECT_WINDOW_SEC * 1000, max_retries=1000
)


def _pem(path: Path, setting: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, setting, f"unreadable: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise InputError(path, setting, "not a PEM file (no -----BEGIN line)")
    return data


def tls_config(settings: Settings) -> TLSConfig | bool:
    """The TLS to use with Temporal, from settings' ``temporal_tls*``: False for none, else a ``TLSConfig``.

    Settings already refuse a half-given pair (a client certificate without its key, TLS
    turned off beside TLS settings); this reads the PEM files.

    Raises:
        InputError: a PEM file is unreadable or not PEM (naming the file and its setting).
    """
    if not settings.temporal_uses_tls:
        return False
    s = settings
    return TLSConfig(
        server_root_ca_cert=_pem(s.temporal_tls_ca_file, "MINDFORGE_TEMPORAL_TLS_CA_FILE") if s.temporal_tls_ca_file
        else None,
        client_cert=_pem(s.temporal_tls_cert_file, "MINDFORGE_TEMPORAL_TLS_CERT_FILE") if s.temporal_tls_cert_file
        else None,
        client_private_key=_pem(s.temporal_tls_key_file, "MINDFORGE_TEMPORAL_TLS_KEY_FILE") if s.temporal_tls_key_file
        else None,
        domain=s.temporal_tls_server_name,
    )


async def connect_settings(settings: Settings) -> Client:
    """A Temporal client for ``settings``: its address and namespace, TLS or mTLS, API key (:func:`connect`).

    Raises:
        InputError: a TLS file is unreadable (:func:`tls_config`).
        InfraError: Temporal does not answer, or the TLS handshake or the key is refused.
    """
    key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    return await connect(
        settings.temporal_address, settings.temporal_namespace, tls=tls_config(settings), api_key=key
    )


async def connect(address: str, namespace: str, *, tls: TLSConfig | bool = False, api_key: str | None = None) -> Client:
    """A Temporal client with the pydantic data converter.

    Args:
        address: the Temporal frontend, ``host:port``.
        namespace: the Temporal namespace.
        tls: False for a plain connection, True for TLS with the system's CAs, or a
            ``TLSConfig`` (a CA, a client certificate and key for mTLS, a server name).
        api_key: sent as ``Authorization: Bearer <key>`` on every call (needs TLS).

    Returns:
        A connected client whose calls retry an unanswering server for up to
        :data:`RECONNECT_WINDOW_SEC` seconds (:data:`CALL_RETRY`); the connection
        itself is tried once, so a server that is not there fails at once.

    Raises:
        InputError: an API key without TLS.
        InfraError: Temporal does not answer at ``address``, or refuses the TLS handshake.
    """
    if api_key and tls is False:
        raise InputError("settings", "MINDFORGE_TEMPORAL_API_KEY", "an API key is sent over TLS only")
    try:
        return await Client.connect(
            address, namespace=namespace, data_converter=pydantic_data_converter, retry_config=CALL_RETRY,
            tls=tls, api_key=api_key,
        )
    except RuntimeError as exc:
        how = (
            "check MINDFORGE_TEMPORAL_TLS_* and MINDFORGE_TEMPORAL_API_KEY against the server's TLS and authentication"
            if tls is not False else
            "start the dev stack with `mindforge dev up` or set MINDFORGE_TEMPORAL_ADDRESS "
            "(and MINDFORGE_TEMPORAL_TLS_* where the server wants TLS)"
        )
        raise InfraError(f"Temporal at {address} does not answer or refuses the connection ({exc}); {how}") from None
