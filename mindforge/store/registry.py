"""Registries of immutable things: HCP contract revisions and LoRA adapter revisions.

Registering is idempotent (the same content again returns the stored row) and a name
never changes meaning: the same ``name@revision`` (contract) or adapter ``name`` with
different content raises. Functions only flush; the caller's session scope commits.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from mindforge.hcp.folder_registry import check_registration, parse_ref
from mindforge.hcp.io import dump_contract
from mindforge.hcp.model import HCPContract
from mindforge.store._insert import insert_ignore
from mindforge.store.errors import (
    AdapterImmutableError,
    ContractIdentityError,
    ContractNotRegisteredError,
    NotFoundError,
)
from mindforge.store.models import AdapterRevision, AdapterRevisionCreate, Contract


def register_contract(
    *,
    session: Session,
    name: str,
    revision: str,
    content_hash: str,
    toml_text: str,
    parent_hash: str | None = None,
    edit: str = "",
) -> Contract:
    """Register an HCP contract revision, or return it when already registered.

    The hash is the caller's (``mindforge.hcp`` computes it over the contract's
    content); the store keys on it and does not recompute it.

    Args:
        session: the unit of work.
        name / revision: the contract's identity (``[mindforge]`` section).
        content_hash: content hash (hex), the primary key.
        toml_text: the contract file verbatim.
        parent_hash: the registered parent's hash; None for a root.
        edit: the recorded edit that derived it from the parent.

    Returns:
        The stored contract.

    Raises:
        mindforge.hcp.ContractImmutableError: ``name@revision`` is registered with
            another hash (the rule of :func:`mindforge.hcp.check_registration`).
        ContractIdentityError: this hash is registered under another identity or parent.
        sqlalchemy.exc.IntegrityError: ``parent_hash`` is not registered.
    """
    row = Contract(
        hash=content_hash, name=name, revision=revision, parent_hash=parent_hash, edit=edit, toml_text=toml_text
    )
    # the insert skips on either key (hash or name@revision); the checks below tell which
    insert_ignore(session, row)
    same_ref = get_contract_by_name(session=session, name=name, revision=revision)
    if same_ref is not None:
        check_registration(f"{name}@{revision}", content_hash, same_ref.hash, where="store table contracts")
    stored = session.get(Contract, content_hash)
    if stored is None or (stored.name, stored.revision, stored.parent_hash) != (name, revision, parent_hash):
        held = "nothing" if stored is None else f"{stored.name}@{stored.revision} (parent {stored.parent_hash})"
        raise ContractIdentityError(
            f"contract hash {content_hash} is registered as {held}, not {name}@{revision} (parent {parent_hash})"
        )
    return stored


def register_hcp_contract(*, session: Session, contract: HCPContract) -> Contract:
    """Register a loaded HCP contract: identity, parent, edit, hash and TOML taken from it.

    Args:
        session: the unit of work.
        contract: the contract; its parent (``[mindforge].parent``), if any, must be
            registered first.

    Returns:
        The stored contract.

    Raises:
        NotFoundError: the parent ``name@revision`` is not registered.
        mindforge.hcp.ContractImmutableError: ``name@revision`` is registered with
            other content.
    """
    parent_hash = None
    if contract.mindforge.parent:
        parent_name, parent_revision = parse_ref(contract.mindforge.parent)
        parent = get_contract_by_name(session=session, name=parent_name, revision=parent_revision)
        if parent is None:
            raise NotFoundError("contract", contract.mindforge.parent)
        parent_hash = parent.hash
    return register_contract(
        session=session,
        name=contract.mindforge.name,
        revision=contract.mindforge.revision,
        content_hash=contract.content_hash,
        toml_text=dump_contract(contract),
        parent_hash=parent_hash,
        edit=contract.mindforge.edit,
    )


def get_contract(*, session: Session, content_hash: str) -> Contract | None:
    """The contract with this hash, or None."""
    return session.get(Contract, content_hash)


def require_contract(*, session: Session, content_hash: str) -> Contract:
    """The registered contract with this hash.

    Raises:
        ContractNotRegisteredError: no contract with this hash is registered (an activity
            maps it to a non-retryable ``ApplicationError``).
    """
    row = get_contract(session=session, content_hash=content_hash)
    if row is None:
        raise ContractNotRegisteredError(content_hash)
    return row


def get_contract_by_name(*, session: Session, name: str, revision: str) -> Contract | None:
    """The contract ``name@revision``, or None."""
    statement = select(Contract).where(Contract.name == name, Contract.revision == revision)
    return session.exec(statement).first()


def list_contracts(*, session: Session, name: str | None = None) -> list[Contract]:
    """Registered contracts, oldest first, optionally of one name."""
    statement = select(Contract).order_by(col(Contract.created_at), col(Contract.hash))
    if name is not None:
        statement = statement.where(Contract.name == name)
    return list(session.exec(statement).all())


def contract_ancestry(*, session: Session, content_hash: str) -> list[Contract]:
    """The contract and its ancestors, the contract first and the root last.

    Returns:
        An empty list when ``content_hash`` is not registered.
    """
    chain: list[Contract] = []
    current = session.get(Contract, content_hash)
    while current is not None:
        chain.append(current)
        current = session.get(Contract, current.parent_hash) if current.parent_hash else None
    return chain


def register_adapter(*, session: Session, adapter_in: AdapterRevisionCreate) -> AdapterRevision:
    """Register a LoRA adapter revision, or return it when the same name and sha256 are stored.

    Args:
        session: the unit of work.
        adapter_in: the revision's identity, location and training facts.

    Returns:
        The stored adapter revision.

    Raises:
        AdapterImmutableError: the name is registered with another sha256, or the
            lineage's revision number is taken by another adapter.
        sqlalchemy.exc.IntegrityError: the lineage or parent adapter is unknown.
    """
    row = AdapterRevision.model_validate(adapter_in)
    insert_ignore(session, row)
    stored = get_adapter_by_name(session=session, name=row.name)
    if stored is None:
        statement = select(AdapterRevision).where(
            AdapterRevision.lineage_id == row.lineage_id, AdapterRevision.revision == row.revision
        )
        other = session.exec(statement).first()
        held = other.name if other is not None else "?"
        raise AdapterImmutableError(
            f"adapter revision {row.revision} of lineage {row.lineage_id!r} is registered as {held!r}, not {row.name!r}"
        )
    if stored.sha256 != row.sha256:
        raise AdapterImmutableError(
            f"adapter name {row.name!r} is registered with sha256 {stored.sha256}, not {row.sha256}: "
            "register new weights under a new versioned name"
        )
    return stored


def get_adapter(*, session: Session, adapter_id: str) -> AdapterRevision | None:
    """The adapter revision with this id, or None."""
    return session.get(AdapterRevision, adapter_id)


def get_adapter_by_name(*, session: Session, name: str) -> AdapterRevision | None:
    """The adapter revision with this serving name, or None."""
    return session.exec(select(AdapterRevision).where(AdapterRevision.name == name)).first()


def list_adapters(*, session: Session, lineage_id: str | None = None) -> list[AdapterRevision]:
    """Adapter revisions, by lineage and revision number, optionally of one lineage."""
    statement = select(AdapterRevision).order_by(
        col(AdapterRevision.lineage_id), col(AdapterRevision.revision), col(AdapterRevision.created_at)
    )
    if lineage_id is not None:
        statement = statement.where(AdapterRevision.lineage_id == lineage_id)
    return list(session.exec(statement).all())
