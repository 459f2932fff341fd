"""The compounding table: every pair of a lineage on its one frozen sealed split, and where each change came from.

Call pair k the pair generation k starts from: pair 0 is the root and generation k hands
on pair k+1. Each generation's sealed stage stores a
:class:`mindforge.evaluation.compounding.GenerationCompounding` under its record's
``compounding`` key; this module reads those records (the store alone) into one row per
pair:

- its sealed score (generation k-1's measurement of the pair it handed on; pair 0's from
  generation 0, where it is the parent);
- ``lift_vs_prev`` (pair k over pair k-1) and ``lift_vs_root`` (pair k over pair 0),
  paired by task on the sealed split, each with its 95% interval and task count;
- the attribution of ``lift_vs_prev`` into a harness part and a weights part;
- where the change came from: the contract edit, the experience-library snapshot size
  (when the contract carries one), the adapter, and the selection evidence that chose
  them (the successor check and the promotion gate, both on the selection split).

:func:`generation_figures` gives the same figures keyed per generation (``sealed``,
``lift_vs_prev``, ``lift_vs_root``, ``attribution``) for ``report --format json`` and
``mindforge lineage status --json``, so both carry one set of numbers. The question it
answers is the one the source paper leaves open: does recursive improvement compound.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from mindforge.hcp import loads_contract
from mindforge.store import Contract
from mindforge.store.registry import contract_ancestry


class CompoundingRow(BaseModel):
    """One pair of the lineage.

    Attributes:
        pair: k (0 = the root).
        handed_on_by: the generation that handed it on (None for the root).
        measured_in: the generation whose sealed trials give ``sealed`` (None: not measured).
        contract_hash / adapter: the pair ("" = base weights).
        sealed: ``{"score", "n_tasks", "n_trials", "passed", "excluded_trials"}`` or None.
        lift_vs_prev / lift_vs_root: ``LiftReport.summary()`` or None (with the reasons).
        attribution: ``{"harness": {...}, "weights": {...}}`` parts (status, lift, reason).
        change: ``{"contract_edit", "library_entries", "adapter", "successor", "promotion"}``:
            the edits from the previous pair's contract, the snapshot size, the adapter,
            and the selection-split decisions that chose them.
        sealed_tasks_sha256: identity of the sealed task set the figures were measured on.
    """

    pair: int
    handed_on_by: int | None = None
    measured_in: int | None = None
    contract_hash: str = ""
    adapter: str = ""
    sealed: dict[str, Any] | None = None
    lift_vs_prev: dict[str, Any] | None = None
    lift_vs_prev_reason: str = ""
    lift_vs_root: dict[str, Any] | None = None
    lift_vs_root_reason: str = ""
    attribution: dict[str, Any] = Field(default_factory=dict)
    change: dict[str, Any] = Field(default_factory=dict)
    sealed_tasks_sha256: str = ""


def _sealed(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if not entry:
        return None
    keys = ("contract_hash", "adapter", "score", "n_tasks", "n_trials", "passed", "excluded_trials")
    return {k: entry.get(k) for k in keys}


def generation_figures(record: dict[str, Any]) -> dict[str, Any]:
    """The compounding figures of one generation record, keyed as ``generations[i]`` carries them.

    Generation i hands on pair i+1: ``sealed`` is that pair's sealed score,
    ``sealed_parent`` pair i's (measured in the same generation, on the same tasks),
    ``lift_vs_prev`` pair i+1 over pair i and ``lift_vs_root`` pair i+1 over pair 0.

    Args:
        record: a stored generation record.

    Returns:
        ``{"sealed", "sealed_parent", "lift_vs_prev", "lift_vs_prev_reason", "lift_vs_root",
        "lift_vs_root_reason", "attribution", "sealed_tasks_sha256", "sealed_tasks"}``; values
        None (and reasons "not measured yet") before the generation's sealed stage ran.
    """
    row = record.get("compounding") or {}
    pending = "not measured yet" if not row else ""
    return {
        "sealed": _sealed(row.get("successor")),
        "sealed_parent": _sealed(row.get("parent")),
        "lift_vs_prev": row.get("lift_vs_prev"),
        "lift_vs_prev_reason": row.get("lift_vs_prev_reason", pending),
        "lift_vs_root": row.get("lift_vs_root"),
        "lift_vs_root_reason": row.get("lift_vs_root_reason", pending),
        "attribution": row.get("attribution") or {},
        "sealed_tasks_sha256": row.get("sealed_tasks_sha256", ""),
        "sealed_tasks": len(row.get("sealed_tasks") or []),
    }


def _selection(record: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The successor check and the promotion gate of a generation, as small dicts (both read the selection split)."""
    successor = record.get("successor")
    promotion = (record.get("update") or {}).get("promotion")
    succ = (
        {
            "decided_on": successor.get("decided_on"), "promoted": successor.get("promoted"),
            "scores": successor.get("scores"), "reason": successor.get("reason", ""),
        }
        if successor else None
    )
    lift = (promotion or {}).get("lift") or {}
    prom = (
        {
            "decided_on": promotion.get("decided_on"), "promoted": promotion.get("promoted"),
            "lift": {k: lift.get(k) for k in ("mean", "lo", "hi", "n_tasks", "measured_on")} if lift else None,
            "reason": promotion.get("reason", ""),
        }
        if promotion else None
    )
    return succ, prom


def compounding_rows(
    generations: list[Any], *, contract_edit=None, library_entries=None
) -> list[CompoundingRow]:
    """One row per pair from a lineage's generation rows (index order).

    Args:
        generations: stored generations (``index``, ``contract_hash``, ``record``).
        contract_edit: ``(old hash, new hash) -> str``, the edits between two contracts
            (default: none known).
        library_entries: ``hash -> int | None``, the experience-snapshot size a contract
            carries (default: none known).

    Returns:
        pair 0 first; a generation without a sealed measurement still yields its pair,
        with the reasons.
    """
    rows: list[CompoundingRow] = []
    ordered = sorted(generations, key=lambda g: g.index)
    if not ordered:
        return rows
    first = ordered[0].record.get("compounding") or {}
    root = first.get("parent") or {}
    rows.append(
        CompoundingRow(
            pair=0, measured_in=ordered[0].index if root else None,
            contract_hash=root.get("contract_hash") or ordered[0].contract_hash or "", adapter=root.get("adapter", ""),
            sealed=_sealed(root) if root else None, sealed_tasks_sha256=first.get("sealed_tasks_sha256", ""),
            lift_vs_prev_reason="the root", lift_vs_root_reason="the root",
        )
    )
    for g in ordered:
        figures = generation_figures(g.record)
        row = g.record.get("compounding") or {}
        successor = row.get("successor") or {}
        parent = row.get("parent") or {}
        contract = successor.get("contract_hash") or g.record.get("contract_hash") or ""
        adapter = successor.get("adapter", g.record.get("adapter", ""))
        succ, prom = _selection(g.record)
        old = parent.get("contract_hash") or g.contract_hash or ""
        edit = contract_edit(old, contract) if contract_edit and contract != old else ""
        rows.append(
            CompoundingRow(
                pair=g.index + 1, handed_on_by=g.index, measured_in=g.index if row else None,
                contract_hash=contract, adapter=adapter or "", sealed=figures["sealed"],
                lift_vs_prev=figures["lift_vs_prev"], lift_vs_prev_reason=figures["lift_vs_prev_reason"],
                lift_vs_root=figures["lift_vs_root"], lift_vs_root_reason=figures["lift_vs_root_reason"],
                attribution=figures["attribution"], sealed_tasks_sha256=figures["sealed_tasks_sha256"],
                change={
                    "contract_edit": edit,
                    "library_entries": library_entries(contract) if library_entries else None,
                    "adapter": adapter or "",
                    "adapter_changed": (adapter or "") != (parent.get("adapter") or ""),
                    "successor": succ,
                    "promotion": prom,
                },
            )
        )
    return rows


def lift_text(lift: dict | None, reason: str = "") -> str:
    """``+0.200 [-0.100, +0.500] n=5`` or ``- (reason)``."""
    if not lift or lift.get("mean") is None:
        return f"- ({reason})" if reason else "-"
    return f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n={lift.get('n_tasks', 0)}"


def part_text(part: dict | None) -> str:
    """An attribution part in words: its lift, ``unchanged (reason)`` or ``not run (reason)``."""
    if not part:
        return "-"
    if part.get("status") == "measured":
        return lift_text(part.get("lift"))
    words = "unchanged" if part.get("status") == "unchanged" else "not run"
    return f"{words} ({part.get('reason', '')})"


def score_text(sealed: dict | None) -> str:
    """A pair's sealed score: ``0.400 (4/10 passed, 5 tasks)`` or ``-``."""
    if not sealed or sealed.get("score") is None:
        return "-"
    counts = f"{sealed.get('passed', 0)}/{sealed.get('n_trials', 0)} passed, {sealed.get('n_tasks', 0)} tasks"
    return f"{sealed['score']:.3f} ({counts})"


def table_cells(row: CompoundingRow, contract_ref) -> list[str]:
    """The report's cells for one pair (also the CLI table's)."""
    change = row.change
    came_from = []
    if change.get("contract_edit"):
        came_from.append(f"contract: {change['contract_edit']}")
    if change.get("library_entries") is not None:
        came_from.append(f"library: {change['library_entries']} entries")
    if change.get("adapter_changed"):
        came_from.append(f"adapter: {change.get('adapter') or 'base'}")
    evidence = []
    if succ := change.get("successor"):
        evidence.append(f"successor {'promoted' if succ.get('promoted') else 'kept'} on {succ.get('decided_on')}")
    if prom := change.get("promotion"):
        evidence.append(
            f"adapter {'promoted' if prom.get('promoted') else 'kept'} on {prom.get('decided_on')}"
            + (f" ({lift_text(prom['lift'])})" if prom.get("lift") else "")
        )
    return [
        str(row.pair),
        "root" if row.handed_on_by is None else f"gen {row.handed_on_by}",
        f"{contract_ref(row.contract_hash)} / {row.adapter or 'base'}",
        score_text(row.sealed),
        "-" if row.pair == 0 else lift_text(row.lift_vs_prev, row.lift_vs_prev_reason),
        "-" if row.pair == 0 else lift_text(row.lift_vs_root, row.lift_vs_root_reason),
        "-" if row.pair == 0 else part_text(row.attribution.get("harness")),
        "-" if row.pair == 0 else part_text(row.attribution.get("weights")),
        "; ".join(came_from) or ("-" if row.pair == 0 else "no change"),
        "; ".join(evidence) or "-",
    ]


#: the compounding table's header (report and CLI)
HEADER = [
    "pair", "handed on by", "contract / adapter", "sealed score", "lift vs previous (95% CI)",
    "lift vs pair 0 (95% CI)", "harness part", "weights part", "change", "selection evidence",
]


def edits_between(session: Session, old: str, new: str) -> str:
    """The recorded edits that made contract ``new`` from ``old``, oldest first, joined by " + " ("" if unrelated)."""
    edits: list[str] = []
    for row in contract_ancestry(session=session, content_hash=new):
        if row.hash == old:
            return " + ".join(reversed(edits))
        edits.append(row.edit)
    return ""


def library_entries(session: Session, content_hash: str) -> int | None:
    """Entries of the experience-library snapshot a registered contract carries (None: none, or unknown)."""
    row = session.get(Contract, content_hash)
    if row is None:
        return None
    try:  # the experience library (issue 17) may not be in this build
        describe_experience = importlib.import_module("mindforge.experience").describe_experience
    except (ImportError, AttributeError):
        return None
    try:
        described = describe_experience(loads_contract(row.toml_text, f"{row.name}@{row.revision}"))
    except Exception:  # noqa: BLE001 - a stored contract that no longer parses has no snapshot to count
        return None
    return int(described["entries"]) if described else None
