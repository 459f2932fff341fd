"""The CLI's Temporal client: connect with MindForge's data converter, and name runs for the Web UI.

Commands talk to Temporal only through this module (workflow classes are named by
string, so no command imports workflow or activity code); ``mindforge worker`` uses the
same connection (:func:`workflows.client.connect`). Temporal is imported when a command
first connects, not when the CLI starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindforge.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.common import TypedSearchAttributes


async def connect(settings: Settings) -> Client:
    """A Temporal client with the pydantic data converter, from settings (:func:`workflows.client.connect`).

    Raises:
        InfraError: Temporal does not answer at ``settings.temporal_address``.
    """
    from workflows.client import connect as connect_to

    return await connect_to(settings.temporal_address, settings.temporal_namespace)


def search_attributes(
    lineage_id: str, generation: int | None = None, stage: str | None = None
) -> TypedSearchAttributes:
    """The typed search attributes of a lineage's runs (:func:`workflows.options.search_attributes`)."""
    from workflows.options import search_attributes as build

    return build(lineage_id, generation, stage)
