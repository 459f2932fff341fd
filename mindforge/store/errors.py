"""Named store errors, one per failure mode (mapped to non-retryable activity errors).

Contract immutability uses :class:`mindforge.hcp.ContractImmutableError`, the rule the
file registry applies too; it is re-exported by :mod:`mindforge.store`.
"""

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


class ContractNotRegisteredError(NotFoundError):
    """No contract with the hash looked up is registered in the store (retrying cannot register it).

    Args:
        content_hash: the contract hash looked up.
    """

    def __init__(self, content_hash: str) -> None:
        super().__init__("contract", content_hash)
        self.args = (f"contract {content_hash} is not registered in the store",)


class AlreadyExistsError(StoreError):
    """Creating a row whose unique key is taken (a lineage name, a generation index)."""


class ContractIdentityError(StoreError):
    """A contract hash is registered under another ``name@revision`` or parent than the one given.

    The hash covers the whole contract, ``[mindforge]`` section included, so this means
    the caller's arguments disagree with the contract they describe. (Re-registering
    ``name@revision`` with other content is :class:`mindforge.hcp.ContractImmutableError`.)
    """


class AdapterImmutableError(StoreError):
    """An adapter name is already registered with different weights (sha256) or identity."""


class SealedSplitFrozenError(StoreError):
    """A task that joins a lineage after it started was to go on the sealed split.

    The sealed split is fixed when the lineage starts (docs/design.md,
    "Compounding"): every generation's pair runs the same sealed tasks, so Discovery's
    admitted tasks go to search or selection only
    (:func:`mindforge.evaluation.splits.admission_config`).
    """
