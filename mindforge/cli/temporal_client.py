"""The CLI's Temporal client: connect with MindForge's data converter, and name runs for the Web UI.

Commands talk to Temporal only through this module (workflow classes are named by
string, so no command imports workflow or activity code); ``mindforge worker`` uses the
same connection (:func:`workflows.client.connect`). Temporal is imported when a command
first connects, not when the CLI starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindforge.errors import InfraError
from mindforge.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.common import TypedSearchAttributes


async def connect(settings: Settings) -> Client:
    """A Temporal client with the pydantic data converter, from settings (:func:`workflows.client.connect_settings`).

    The address and namespace, and TLS, mutual TLS and the API key where settings give them.

    Raises:
        InputError: a TLS file of the settings is unreadable.
        InfraError: Temporal does not answer at ``settings.temporal_address``, or refuses the handshake.
    """
    from workflows.client import connect_settings

    return await connect_settings(settings)


async def signal_workflow(settings: Settings, workflow_id: str, signal: str) -> bool:
    """Send ``signal`` (no argument) to the running workflow ``workflow_id``.

    Returns:
        True when it was sent; False when the server knows no running workflow of that id
        (unknown or ended).

    Raises:
        InfraError: Temporal does not answer at ``settings.temporal_address``.
        temporalio.service.RPCError: any other refusal by the server.
    """
    from temporalio.service import RPCError, RPCStatusCode

    client = await connect(settings)
    try:
        await client.get_workflow_handle(workflow_id).signal(signal)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return False
    return True


def search_attributes(
    lineage_id: str, generation: int | None = None, stage: str | None = None
) -> TypedSearchAttributes:
    """The typed search attributes of a lineage's runs (:func:`workflows.options.search_attributes`)."""
    from workflows.options import search_attributes as build

    return build(lineage_id, generation, stage)


async def workflow_result(settings: Settings, handle: Any) -> Any:
    """The workflow's result, waited for through server restarts shorter than the retry window.

    Args:
        settings: the settings (the Temporal address, for the message).
        handle: a ``temporalio.client.WorkflowHandle``.

    Returns:
        what the workflow returned.

    Raises:
        InfraError: the server stopped answering for longer than
            :data:`workflows.client.RECONNECT_WINDOW_SEC`; the workflow is still on the
            server, and the message says how to look at it and run it on.
    """
    from temporalio.service import RPCError

    from workflows.client import RECONNECT_WINDOW_SEC

    try:
        return await handle.result()
    except RPCError as exc:
        raise InfraError(
            f"Temporal at {settings.temporal_address} stopped answering for more than {RECONNECT_WINDOW_SEC} s "
            f"({exc}); the workflow {handle.id} is still on the server: once it is back (`mindforge dev up`), "
            "`mindforge lineage status NAME` shows it and a `mindforge worker` runs it on"
        ) from None
