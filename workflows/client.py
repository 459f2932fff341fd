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

from mindforge.errors import InfraError


async def connect(address: str, namespace: str) -> Client:
    """A Temporal client with the pydantic data converter.

    Args:
        address: the Temporal frontend, ``host:port``.
        namespace: the Temporal namespace.

    Returns:
        A connected client.

    Raises:
        InfraError: Temporal does not answer at ``address``.
    """
    try:
        return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)
    except RuntimeError as exc:
        raise InfraError(
            f"Temporal does not answer at {address} ({exc}); "
            "start the dev stack with `mindforge dev up` or set MINDFORGE_TEMPORAL_ADDRESS"
        ) from None
