"""The experience snapshot inside an HCP contract, and what a trial is shown from it.

A contract names its snapshot by content hash: ``[resources.experience] snapshot = <sha256>``
plus the snapshot itself as the ``[[resources.embedded]]`` entry of kind ``experience`` (at
``EXPERIENCE_PATH``) whose checked ``sha256`` is that hash. The contract's content hash
therefore changes with the snapshot, with ``k`` and with the provenance filter, and every
trial is reproducible from (contract, task): retrieval is a pure function of both.
"""

from __future__ import annotations

from typing import Any

from mindforge.experience.entry import ExperienceEntry
from mindforge.experience.retrieval import ProvenanceFilter, retrieve
from mindforge.experience.snapshot import ExperienceSnapshot, load_snapshot
from mindforge.hcp.derive import derive, make_embedded
from mindforge.hcp.model import HCPContract
from mindforge.hcp.sections import EXPERIENCE_KIND, EXPERIENCE_PATH


def contract_snapshot(contract: HCPContract) -> ExperienceSnapshot | None:
    """The snapshot a contract carries, or None when it has no ``[resources.experience]``.

    Raises:
        InputError: the embedded snapshot is not a valid snapshot document.
    """
    resource = contract.experience_resource
    if resource is None:
        return None
    return load_snapshot(resource.data.decode("utf-8"), f"{contract.ref}: resources.embedded ({EXPERIENCE_PATH})")


def experience_changes(
    contract: HCPContract,
    snapshot: ExperienceSnapshot,
    *,
    k: int | None = None,
    provenance: ProvenanceFilter | None = None,
) -> dict[str, Any]:
    """The ``derive`` changes that put ``snapshot`` (and optionally ``k`` / ``provenance``) in ``contract``.

    ``k`` and ``provenance`` default to the contract's current settings (``k = 4``,
    ``any`` when it has none). Other embedded resources are kept as they are.
    """
    current = contract.resources.experience
    kept = [item for item in contract.resources.embedded if item.kind != EXPERIENCE_KIND]
    resource = make_embedded(EXPERIENCE_KIND, EXPERIENCE_PATH, snapshot.to_json())
    settings = {
        "snapshot": snapshot.snapshot_id,
        "k": k if k is not None else (current.k if current else 4),
        "provenance": provenance or (current.provenance if current else "any"),
    }
    return {"resources.embedded": [*kept, resource], "resources.experience": settings}


def attach_snapshot(
    contract: HCPContract,
    snapshot: ExperienceSnapshot,
    *,
    revision: str,
    k: int | None = None,
    provenance: ProvenanceFilter | None = None,
    edit: str = "",
) -> HCPContract:
    """A child of ``contract`` that carries ``snapshot`` (see :func:`experience_changes`).

    Raises:
        ContractError: the child is invalid (e.g. a ``k`` outside 0, 1, 2, 4, 8).
    """
    changes = experience_changes(contract, snapshot, k=k, provenance=provenance)
    k_set = changes["resources.experience"]["k"]
    words = edit or f"experience snapshot {snapshot.snapshot_id[:12]} ({len(snapshot.entries)} entries), k={k_set}"
    return derive(contract, revision=revision, edit=words, changes=changes)


def shown_entries(contract: HCPContract, *, instruction: str, task_id: str, task_hash: str) -> list[ExperienceEntry]:
    """The entries a trial of ``contract`` on this task is shown (best first; [] without experience).

    With the ``command`` action format, entries with a multi-line command are left out
    (that format takes one command line per reply).
    """
    settings = contract.resources.experience
    snapshot = contract_snapshot(contract)
    if settings is None or snapshot is None:
        return []
    return retrieve(
        snapshot,
        instruction,
        k=settings.k,
        task_id=task_id,
        task_hash=task_hash,
        provenance=settings.provenance,
        single_line=contract.tools.action_format == "command",
    )


def describe_experience(contract: HCPContract) -> dict[str, Any] | None:
    """``{"snapshot", "entries", "oracle", "model", "k", "provenance"}`` for display; None without experience."""
    settings = contract.resources.experience
    snapshot = contract_snapshot(contract)
    if settings is None or snapshot is None:
        return None
    return {
        "snapshot": settings.snapshot,
        "entries": len(snapshot.entries),
        **snapshot.counts(),
        "k": settings.k,
        "provenance": settings.provenance,
    }


def _summary(info: dict[str, Any] | None) -> str:
    if info is None:
        return "none"
    return (f"snapshot {info['snapshot'][:16]} ({info['entries']} entries: {info['oracle']} oracle, "
            f"{info['model']} model), k={info['k']}, provenance {info['provenance']}")


def experience_summary(contract: HCPContract) -> str:
    """One line: the snapshot's hash (16 hex), size by provenance, ``k`` and the filter; ``none`` without."""
    return _summary(describe_experience(contract))


def experience_content_keys(contract: HCPContract) -> set[str]:
    """The key paths of the embedded snapshot's ``content`` (a diff shows the summary instead)."""
    return {
        f"resources.embedded[{i}].content"
        for i, item in enumerate(contract.resources.embedded)
        if item.kind == EXPERIENCE_KIND
    }
