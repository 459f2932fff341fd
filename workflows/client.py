"""One way to connect to Temporal, shared by the CLI and the worker: MindForge's data converter.

Both sides must agree on how payloads are encoded (pydantic models as JSON), so both
connect here: ``mindforge/cli/temporal_client.py`` for the commands and ``workers/main.py``
for the worker. No workflow imports this module; it lives beside the workflows because
it is orchestration code, which the CLI may import only inside functions and the worker
anywhere.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RetryConfig

from mindforge.errors import InfraError

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


async def connect(address: str, namespace: str) -> Client:
    """A Temporal client with the pydantic data converter.

    Args:
        address: the Temporal frontend, ``host:port``.
        namespace: the Temporal namespace.

    Returns:
        A connected client whose calls retry an unanswering server for up to
        :data:`RECONNECT_WINDOW_SEC` seconds (:data:`CALL_RETRY`); the connection
        itself is tried once, so a server that is not there fails at once.

    Raises:
        InfraError: Temporal does not answer at ``address``.
    """
    try:
        return await Client.connect(
            address, namespace=namespace, data_converter=pydantic_data_converter, retry_config=CALL_RETRY
        )
    except RuntimeError as exc:
        raise InfraError(
            f"Temporal does not answer at {address} ({exc}); "
            "start the dev stack with `mindforge dev up` or set MINDFORGE_TEMPORAL_ADDRESS"
        ) from None
