"""Named store errors, one per failure mode (mapped to non-retryable activity errors)."""

from __future__ import annotations

from mindforge.errors import MindForgeError


class StoreError(MindForgeError):
    """Base class of the store's own errors."""


class NotFoundError(StoreError):
    """A row looked up by key does not exist.

    Args:
        entity: the table's entity name (``"lineage"``, ``"generation"``...).
        key: the key that was looked up, as text.
    """

    def __init__(self, entity: str, key: str) -> None:
        self.entity = entity
        self.key = key
        super().__init__(f"{entity} {key!r} not found")


class AlreadyExistsError(StoreError):
    """Creating a row whose unique key is taken (a lineage name, a generation index)."""


class ContractImmutableError(StoreError):
    """A contract ``name@revision`` is already registered with different content.

    A registered contract revision never changes: derive a new revision instead.
    """


class AdapterImmutableError(StoreError):
    """An adapter name is already registered with different weights (sha256) or identity."""
