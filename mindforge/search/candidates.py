"""Candidate contracts: children of the search root derived by recorded edits.

A candidate is the search root plus a chain of :class:`~mindforge.search.edits.Edit`
values. Materialising the chain derives one contract per edit with
:func:`mindforge.hcp.derive`, so every candidate has a parent (the contract one edit
earlier), the edit in words (``mindforge.edit``) and a diff. Revisions are
deterministic (``<root revision>+s<12 hex>`` from the parent's hash and the resulting
harness), so the same chain always yields the same contract and content hash.

Near-duplicates are not run twice: two candidates with the same *harness hash* (the
document without its ``[mindforge]`` identity section, i.e. the same resulting
harness reached by different edits or orders) are one candidate.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mindforge.hcp import (
    HCPContract,
    apply_changes,
    canonical_json,
    derive,
    diff_contracts,
    format_diff,
)
from mindforge.hcp.io import ContractError
from mindforge.search.edits import Edit, edit_changes

Origin = Literal["operator", "model", "compose", "refine", "progress", "seed"]


class CandidateError(ValueError):
    """An edit chain does not make a valid, new candidate (no-op, conflict, invalid contract)."""


class Candidate(BaseModel):
    """A candidate contract of a search, as small data.

    Attributes:
        contract_hash: the materialised contract's content hash.
        parent_hash: the hash of the contract one edit earlier (the root for one edit).
        harness_hash: sha256 of the document without ``[mindforge]`` (dedupe key).
        edits: the chain from the search root; the last one is this candidate's own.
        origin: ``operator`` (one operator edit), ``model`` (a model-proposed prompt
            edit), ``compose`` (two winners combined), ``refine`` (a winner plus one
            more edit), ``progress`` (a stepping stone - a candidate that got past its
            tasks' harness failure without passing - plus one more edit) or ``seed`` (a
            chain the race shortlists from data: the lineage's library and its variants,
            the previous generation's entrants).
        step: the search step that added it.
    """

    model_config = ConfigDict(frozen=True)

    contract_hash: str
    parent_hash: str
    harness_hash: str
    edits: list[Edit] = Field(min_length=1)
    origin: Origin = "operator"
    step: int = 0

    @property
    def edit_keys(self) -> tuple[str, ...]:
        """The chain's edit keys, in order."""
        return tuple(e.key for e in self.edits)


def harness_hash(contract: HCPContract) -> str:
    """sha256 (hex) of the contract's document without its ``[mindforge]`` identity section."""
    document = {k: v for k, v in contract.to_document().items() if k != "mindforge"}
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def apply_edit(parent: HCPContract, edit: Edit) -> HCPContract:
    """Derive the child of ``parent`` by one edit, with a deterministic revision.

    Raises:
        CandidateError: the edit does not apply, changes nothing, or makes an invalid
            contract (the reason names the key path).
    """
    try:
        changes = edit_changes(parent, edit)
        document = apply_changes(parent.to_document(), changes, f"derived from {parent.ref}")
    except (ValueError, ContractError) as exc:
        raise CandidateError(f"{edit.key}: {exc}") from None
    harness = {k: v for k, v in document.items() if k != "mindforge"}
    digest = hashlib.sha256(f"{parent.content_hash}:{canonical_json(harness)}".encode()).hexdigest()[:12]
    revision = f"{parent.mindforge.revision.split('+')[0]}+s{digest}"
    try:
        return derive(parent, revision=revision, edit=edit.describe(parent), changes=changes)
    except ContractError as exc:
        raise CandidateError(f"{edit.key}: {exc}") from None


_CHAINS: OrderedDict[tuple[str, tuple[str, ...]], list[HCPContract]] = OrderedDict()
_CHAIN_CACHE_SIZE = 4096
#: id -> (contract, content hash) of the roots chains were made from (contracts are frozen)
_ROOT_HASHES: dict[int, tuple[HCPContract, str]] = {}


def _root_hash(root: HCPContract) -> str:
    """``root.content_hash``, computed once per root object (a search derives thousands of chains from one)."""
    hit = _ROOT_HASHES.get(id(root))
    if hit is not None and hit[0] is root:
        return hit[1]
    if len(_ROOT_HASHES) >= 64:
        _ROOT_HASHES.clear()
    _ROOT_HASHES[id(root)] = (root, root.content_hash)
    return _ROOT_HASHES[id(root)][1]


def materialize_chain(root: HCPContract, edits: list[Edit]) -> list[HCPContract]:
    """The contracts along an edit chain: ``[root + e1, root + e1 + e2, ...]``.

    Register them in this order (each one's parent is the one before, the first one's
    the root). Results are cached by (root hash, edit keys).

    Raises:
        CandidateError: an edit does not apply, or two edits of the chain set the same
            thing (see :attr:`Edit.slot`).
    """
    slots = [e.slot for e in edits]
    if len(set(slots)) != len(slots):
        raise CandidateError(f"edits {[e.key for e in edits]} set the same thing twice")
    # the edits whole (an example's key names it, its value carries it): same key, same chain
    key = (_root_hash(root), tuple(e.model_dump_json() for e in edits))
    if key in _CHAINS:
        _CHAINS.move_to_end(key)
        return list(_CHAINS[key])
    chain: list[HCPContract] = []
    current = root
    for edit in edits:
        current = apply_edit(current, edit)
        chain.append(current)
    _CHAINS[key] = chain
    if len(_CHAINS) > _CHAIN_CACHE_SIZE:
        _CHAINS.popitem(last=False)
    return list(chain)


def materialize(root: HCPContract, edits: list[Edit]) -> HCPContract:
    """The contract at the end of an edit chain (see :func:`materialize_chain`)."""
    if not edits:
        return root
    return materialize_chain(root, edits)[-1]


#: (root hash, edits as JSON) -> (contract hash, parent hash, harness hash) of the chain's candidate
_HASHES: OrderedDict[tuple[str, tuple[str, ...]], tuple[str, str, str]] = OrderedDict()


def make_candidate(root: HCPContract, edits: list[Edit], *, origin: Origin, step: int) -> Candidate:
    """Build the candidate for an edit chain (its hashes cached by root hash and edits).

    Raises:
        CandidateError: the chain is invalid, or its harness equals the root's.
    """
    key = (_root_hash(root), tuple(e.model_dump_json() for e in edits))
    if key not in _HASHES:
        chain = materialize_chain(root, edits)
        child = chain[-1]
        parent = chain[-2] if len(chain) > 1 else root
        harness = harness_hash(child)
        if harness == harness_hash(root):
            raise CandidateError(f"edits {[e.key for e in edits]} leave the root's harness unchanged")
        _HASHES[key] = (child.content_hash, parent.content_hash, harness)
        if len(_HASHES) > _CHAIN_CACHE_SIZE:
            _HASHES.popitem(last=False)
    contract_hash, parent_hash, harness = _HASHES[key]
    return Candidate(
        contract_hash=contract_hash,
        parent_hash=parent_hash,
        harness_hash=harness,
        edits=list(edits),
        origin=origin,
        step=step,
    )


def compose_edits(a: list[Edit], b: list[Edit]) -> list[Edit]:
    """``a`` followed by the edits of ``b`` that ``a`` lacks.

    Raises:
        CandidateError: nothing to add, or an edit of ``b`` sets what one of ``a`` sets.
    """
    keys = {e.key for e in a}
    extra = [e for e in b if e.key not in keys]
    if not extra:
        raise CandidateError(f"{[e.key for e in b]} adds nothing to {[e.key for e in a]}")
    slots = {e.slot for e in a}
    clash = [e.key for e in extra if e.slot in slots]
    if clash:
        raise CandidateError(f"{clash} conflict with {[e.key for e in a]}")
    return [*a, *extra]


def candidate_diff(root: HCPContract, candidate: Candidate) -> str:
    """The readable diff of a candidate against its parent (identity section left out)."""
    chain = materialize_chain(root, candidate.edits)
    parent = chain[-2] if len(chain) > 1 else root
    return format_diff(diff_contracts(parent, chain[-1], include_identity=False))


class CandidatePool:
    """Candidates keyed by content hash and by harness hash: each added once.

    Args:
        root: the search root (its harness counts as taken).
        candidates: already known candidates, in order.
    """

    def __init__(self, root: HCPContract, candidates: list[Candidate] | None = None) -> None:
        self.root = root
        self.items: list[Candidate] = []
        self._by_hash: dict[str, int] = {}
        self._harness: dict[str, int] = {harness_hash(root): -1}
        for candidate in candidates or []:
            self.add(candidate)

    def find(self, contract_hash: str) -> int | None:
        """Index of the candidate with this content hash, or None."""
        return self._by_hash.get(contract_hash)

    def duplicate_of(self, candidate: Candidate) -> int | None:
        """Index of a known candidate with the same content or harness (-1 = the root), or None."""
        found = self._by_hash.get(candidate.contract_hash)
        return found if found is not None else self._harness.get(candidate.harness_hash)

    def add(self, candidate: Candidate) -> bool:
        """Add unless a duplicate is known; True when added."""
        if self.duplicate_of(candidate) is not None:
            return False
        self.items.append(candidate)
        self._by_hash[candidate.contract_hash] = len(self.items) - 1
        self._harness[candidate.harness_hash] = len(self.items) - 1
        return True
