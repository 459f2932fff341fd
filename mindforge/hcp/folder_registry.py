"""A folder registry of HCP contracts: immutable once registered, one file per name and revision.

A registered ``name@revision`` always means the same content hash; registering it again
with the same content is a no-op, with other content an error. :func:`check_registration`
is the rule itself, so that a database-backed store applies the same one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mindforge.errors import InputError
from mindforge.hcp.io import ContractError, dump_contract, load_contract
from mindforge.hcp.model import HCPContract


class ContractImmutableError(InputError):
    """``name@revision`` is already registered with a different content hash.

    Attributes:
        ref: ``name@revision``.
        existing_hash: content hash already registered.
        new_hash: content hash of the contract offered.
    """

    def __init__(self, where: object, ref: str, existing_hash: str, new_hash: str) -> None:
        self.ref = ref
        self.existing_hash = existing_hash
        self.new_hash = new_hash
        super().__init__(
            where,
            "mindforge.revision",
            f"{ref} is already registered with content hash {existing_hash[:16]}..., this contract hashes to "
            f"{new_hash[:16]}...; registered contracts are immutable: give the new one a new revision",
        )


def check_registration(ref: str, new_hash: str, existing_hash: str | None, *, where: object = "registry") -> bool:
    """The immutability rule for registering ``ref`` with content hash ``new_hash``.

    Args:
        ref: ``name@revision``.
        new_hash: content hash of the contract offered.
        existing_hash: content hash already stored under ``ref``, or None.
        where: named in the error (the registry file or table).

    Returns:
        True when ``ref`` is new and must be stored; False when it is already stored
        with the same hash (idempotent).

    Raises:
        ContractImmutableError: stored with a different hash.
    """
    if existing_hash is None:
        return True
    if existing_hash != new_hash:
        raise ContractImmutableError(where, ref, existing_hash, new_hash)
    return False


def parse_ref(ref: str) -> tuple[str, str]:
    """Split ``"name@revision"``.

    Raises:
        InputError: not of that form.
    """
    name, sep, revision = ref.partition("@")
    if not sep or not name or not revision:
        raise InputError(ref, "", "not a contract reference of the form 'name@revision'")
    return name, revision


class ContractRegistry:
    """Contracts stored as ``root/<name>/<revision>.toml``, immutable once written.

    Args:
        root: the registry directory (created on first registration).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_for(self, name: str, revision: str) -> Path:
        """The file of ``name@revision`` (whether or not it exists)."""
        return self.root / name / f"{revision}.toml"

    def __contains__(self, ref: str) -> bool:
        return self.path_for(*parse_ref(ref)).is_file()

    def register(self, contract: HCPContract) -> Path:
        """Store ``contract`` under its name and revision; idempotent for the same content.

        Returns:
            the registry file.

        Raises:
            ContractImmutableError: the same name@revision is stored with other content.
            ContractError: the stored file is no longer a valid contract.
        """
        path = self.path_for(contract.mindforge.name, contract.mindforge.revision)
        new_hash = contract.content_hash
        if path.is_file():
            check_registration(contract.ref, new_hash, load_contract(path).content_hash, where=path)
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            os.chmod(tmp, 0o444)  # read-only: registered contracts do not change
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(dump_contract(contract))
            try:
                # link (not rename) fails if another writer got there first
                os.link(tmp, path)
            except FileExistsError:
                check_registration(contract.ref, new_hash, load_contract(path).content_hash, where=path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return path

    def get(self, ref: str) -> HCPContract:
        """Load the registered contract ``name@revision``.

        Raises:
            InputError: not a reference, or not registered.
            ContractError: the stored file is invalid or does not match its place.
        """
        name, revision = parse_ref(ref)
        path = self.path_for(name, revision)
        if not path.is_file():
            raise InputError(self.root, ref, "no contract registered under this name and revision")
        contract = load_contract(path)
        if contract.ref != ref:
            raise ContractError(path, "mindforge", f"the file holds {contract.ref}, not {ref}")
        return contract

    def refs(self) -> list[str]:
        """Every registered ``name@revision``, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(f"{path.parent.name}@{path.stem}" for path in self.root.glob("*/*.toml"))
