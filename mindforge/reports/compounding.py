"""The compounding tables: every pair of a lineage on each sealed reading apart, and where each change came from.

Call pair k the pair generation k starts from: pair 0 is the root and generation k hands
on pair k+1. The sealed split is read three ways, never pooled
(:mod:`mindforge.evaluation.curriculum`: *sealed instances*, *sealed families*, *sealed
tasks*). Each generation's sealed stage stores one
:class:`mindforge.evaluation.compounding.GenerationCompounding` per reading under
``record["readings"][<reading>]`` (and the two parts of the instances reading,
``copyable`` and ``needs_adaptation``, under ``record["reading_parts"]``); a generation
recorded before readings existed has only ``record["compounding"]``, read here as the
*sealed tasks* reading (:func:`reading_record`). This module reads those records (the
store alone) into one row per pair and reading (:func:`compounding_rows`):

- its sealed success (score, passed / trials, tasks), and pair 0's beside it (``base``);
- ``lift_vs_prev`` (pair k over pair k-1) and ``lift_vs_root`` (pair k over pair 0),
  paired by task, each with its 95% interval and task count;
- the attribution of ``lift_vs_prev`` into a harness part and a weights part;
- ``kept``: pair k is pair k-1 (the generation kept its parent pair), so its figures are
  the very trials of pair k-1, *re-read* (a pair's sealed trials run once per lineage;
  each pair's ``run_in`` names the generations that ran them), not a new measurement;
- for the instances reading, the copyable and needs-adaptation parts (``parts``);
- where the change came from: the contract edit, the experience-library snapshot size
  (when the contract carries one), the adapter, and the selection evidence that chose
  them (the successor check and the pair gate, both on the selection split).

:func:`generation_readings` gives the same figures keyed per generation and reading
(``sealed``, ``sealed_parent``, ``lift_vs_prev``, ``lift_vs_root``, ``attribution``,
``n_tasks``, ``base``, ...) for ``report --format json`` and ``mindforge lineage status
--json``, so both carry one set of numbers. The question it answers is the one the
source paper leaves open: does recursive improvement compound.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from mindforge.evaluation.curriculum import COPYABLE, NEEDS_ADAPTATION, READING_ORDER, SealedReading
from mindforge.hcp import loads_contract
from mindforge.store import Contract
from mindforge.store.registry import contract_ancestry

#: the reading a generation recorded before readings existed is read as (its whole sealed split)
LEGACY_READING = SealedReading.TASKS.value
#: the two parts of the instances reading, in the order reports show them
PARTS = (COPYABLE, NEEDS_ADAPTATION)
#: a part's name in words
PART_TITLES = {COPYABLE: "copyable", NEEDS_ADAPTATION: "needs adaptation"}
#: what a kept pair's figure cells say instead of a figure
KEPT = "= pair {prev} (kept; re-read, not run again)"


class CompoundingRow(BaseModel):
    """One pair of the lineage on one sealed reading.

    Attributes:
        pair: k (0 = the root).
        reading: the sealed reading the figures are of (``instances``, ``families``, ``tasks``).
        handed_on_by: the generation that handed it on (None for the root).
        measured_in: the generation whose record gives ``sealed`` (None: not measured).
        contract_hash / adapter: the pair ("" = base weights).
        kept: pair k is pair k-1 (generation k-1 kept its parent pair): its figures are
            pair k-1's trials, re-read, not a new measurement.
        sealed: ``{"score", "n_tasks", "n_trials", "passed", "excluded_trials"}`` or None;
            score in reward units (0..1), mean over the reading's tasks of the task's mean reward.
        base: pair 0's ``sealed`` on the same reading, as the same generation read it (None
            when not measured).
        lift_vs_prev / lift_vs_root: ``LiftReport.summary()`` or None (with the reasons).
        attribution: ``{"harness": {...}, "weights": {...}}`` parts (status, lift, reason).
        parts: instances reading only: ``copyable`` / ``needs_adaptation`` -> ``{"sealed",
            "base", "lift_vs_root", "lift_vs_root_reason", "n_tasks"}``.
        change: ``{"contract_edit", "library_entries", "adapter", "adapter_changed",
            "successor", "promotion"}``: the edits from the previous pair's contract, the
            snapshot size, the adapter, and the selection-split decisions that chose them.
        sealed_tasks_sha256: identity of the task set the figures were measured on.
    """

    pair: int
    reading: str = LEGACY_READING
    handed_on_by: int | None = None
    measured_in: int | None = None
    contract_hash: str = ""
    adapter: str = ""
    kept: bool = False
    sealed: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    lift_vs_prev: dict[str, Any] | None = None
    lift_vs_prev_reason: str = ""
    lift_vs_root: dict[str, Any] | None = None
    lift_vs_root_reason: str = ""
    attribution: dict[str, Any] = Field(default_factory=dict)
    parts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    change: dict[str, Any] = Field(default_factory=dict)
    sealed_tasks_sha256: str = ""


def _sealed(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if not entry:
        return None
    keys = ("contract_hash", "adapter", "score", "n_tasks", "n_trials", "passed", "excluded_trials", "run_in")
    return {k: entry.get(k) for k in keys}


def _key(entry: dict[str, Any] | None) -> tuple[str, str] | None:
    return (entry.get("contract_hash") or "", entry.get("adapter") or "") if entry else None


def record_readings(record: dict[str, Any]) -> list[str]:
    """The readings a generation record has figures for, in :data:`READING_ORDER`.

    A record written before readings existed (``compounding`` only) has the one reading
    :data:`LEGACY_READING`; a record not measured yet has none.
    """
    if "readings" in record:
        stored = record.get("readings") or {}
        return [r.value for r in READING_ORDER if stored.get(r.value)]
    return [LEGACY_READING] if record.get("compounding") else []


def reading_record(record: dict[str, Any], reading: str) -> dict[str, Any]:
    """One reading's stored ``GenerationCompounding`` (JSON) of a generation record; ``{}`` when absent.

    Falls back to ``record["compounding"]`` for a generation recorded before readings
    existed, read as the *sealed tasks* reading (its whole sealed split).
    """
    if "readings" in record:
        return (record.get("readings") or {}).get(reading) or {}
    return (record.get("compounding") or {}) if reading == LEGACY_READING else {}


def is_legacy(record: dict[str, Any]) -> bool:
    """True for a generation measured before readings existed (``compounding`` without ``readings``)."""
    return "readings" not in record and bool(record.get("compounding"))


def sealed_reading_of(record: dict[str, Any]) -> str | None:
    """The reading an older record's one ``sealed_lift`` was measured on (``sealed_reading``; ``tasks`` before that).

    Records written since each reading has its own lift (``sealed_lifts``) have no single
    reading: None.
    """
    if "sealed_lifts" in record:
        return None
    if "readings" in record or "sealed_reading" in record:
        return record.get("sealed_reading")
    return LEGACY_READING if record.get("sealed_lift") or record.get("compounding") else None


def generation_lifts(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A generation's sealed lift over its parent pair, per reading: ``reading -> {"lift", "reason", "vs_root"}``.

    Read from ``sealed_lifts`` (with ``sealed_lift_reasons`` and ``sealed_lifts_vs_root``);
    a record written before that gives each reading it has figures for from its
    compounding rows, and one older still its one ``sealed_lift``, under the reading it
    was measured on (:func:`sealed_reading_of`). ``{}``: not measured yet.
    """
    if "sealed_lifts" in record:
        reasons, vs_root = record.get("sealed_lift_reasons") or {}, record.get("sealed_lifts_vs_root") or {}
        return {
            reading: {"lift": lift, "reason": reasons.get(reading, ""), "vs_root": vs_root.get(reading)}
            for reading, lift in (record.get("sealed_lifts") or {}).items()
        }
    out = {}
    for reading in record_readings(record):
        row = reading_record(record, reading)
        out[reading] = {
            "lift": row.get("lift_vs_prev"), "reason": row.get("lift_vs_prev_reason", ""),
            "vs_root": row.get("lift_vs_root") if row.get("root") else None,
        }
    if not out and ("sealed_lift" in record):
        out[sealed_reading_of(record) or LEGACY_READING] = {
            "lift": record.get("sealed_lift"), "reason": record.get("sealed_lift_reason", ""),
            "vs_root": record.get("sealed_lift_vs_root"),
        }
    return out


def _base(row: dict[str, Any]) -> dict[str, Any] | None:
    """Pair 0's sealed figures in one reading's row: ``root``, or ``parent`` in generation 0."""
    if row.get("root"):
        return _sealed(row["root"])
    return _sealed(row.get("parent")) if row and row.get("generation", 0) == 0 else None


def _parts(record: dict[str, Any], reading: str, *, parent: bool = False) -> dict[str, dict[str, Any]]:
    """The copyable / needs-adaptation figures of the instances reading (``{}`` for other readings)."""
    if reading != SealedReading.INSTANCES.value:
        return {}
    stored = record.get("reading_parts") or {}
    out = {}
    for name in PARTS:
        row = stored.get(name) or {}
        if not row:
            continue
        out[name] = {
            "sealed": _sealed(row.get("parent" if parent else "successor")),
            "base": _base(row),
            "lift_vs_root": None if parent else row.get("lift_vs_root"),
            "lift_vs_root_reason": "the root" if parent else row.get("lift_vs_root_reason", ""),
            "n_tasks": len(row.get("sealed_tasks") or []),
        }
    return out


def generation_figures(record: dict[str, Any], reading: str = LEGACY_READING) -> dict[str, Any]:
    """The figures of one reading in one generation record, keyed as ``generations[i]["readings"]`` carries them.

    Generation i hands on pair i+1: ``sealed`` is that pair's sealed success on the
    reading, ``sealed_parent`` pair i's and ``base`` pair 0's (both read in the same
    generation, on the same tasks), ``lift_vs_prev`` pair i+1 over pair i and
    ``lift_vs_root`` pair i+1 over pair 0.

    Args:
        record: a stored generation record.
        reading: ``instances``, ``families`` or ``tasks``.

    Returns:
        ``{"sealed", "sealed_parent", "base", "kept", "lift_vs_prev", "lift_vs_prev_reason",
        "lift_vs_root", "lift_vs_root_reason", "attribution", "n_tasks", "sealed_tasks_sha256",
        "parts"}``; figures None (and reasons "not measured yet") before the generation's
        sealed stage read this reading. ``kept``: the generation kept its parent pair.
        ``parts``: the instances reading's copyable / needs-adaptation figures, else ``{}``.
    """
    row = reading_record(record, reading)
    pending = "not measured yet" if not row else ""
    return {
        "sealed": _sealed(row.get("successor")),
        "sealed_parent": _sealed(row.get("parent")),
        "base": _base(row),
        "kept": bool(row) and _key(row.get("parent")) == _key(row.get("successor")),
        "lift_vs_prev": row.get("lift_vs_prev"),
        "lift_vs_prev_reason": row.get("lift_vs_prev_reason", pending),
        "lift_vs_root": row.get("lift_vs_root"),
        "lift_vs_root_reason": row.get("lift_vs_root_reason", pending),
        "attribution": row.get("attribution") or {},
        "n_tasks": len(row.get("sealed_tasks") or []),
        "sealed_tasks_sha256": row.get("sealed_tasks_sha256", ""),
        "parts": _parts(record, reading) if row else {},
    }


def generation_readings(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Reading -> :func:`generation_figures` for every reading the record has figures for (``{}``: none yet)."""
    return {reading: generation_figures(record, reading) for reading in record_readings(record)}


def _selection(record: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The successor check and the pair gate of a generation, as small dicts (both read the selection split)."""
    successor = record.get("successor")
    promotion = (record.get("update") or {}).get("promotion")
    succ = (
        {
            "decided_on": successor.get("decided_on"), "promoted": successor.get("promoted"),
            "cannot_compare": bool(successor.get("cannot_compare")), "scores": successor.get("scores"),
            "reason": successor.get("reason", ""), "reused": successor.get("reused") or [],
        }
        if successor else None
    )
    lift = (promotion or {}).get("lift") or {}
    prom = (
        {
            "decided_on": promotion.get("decided_on"), "promoted": promotion.get("promoted"),
            "cannot_compare": bool(promotion.get("cannot_compare")),
            "lift": {k: lift.get(k) for k in ("mean", "lo", "hi", "n_tasks", "measured_on")} if lift else None,
            "reason": promotion.get("reason", ""), "reused": promotion.get("reused") or [],
        }
        if promotion else None
    )
    return succ, prom


def compounding_rows(
    generations: list[Any], *, reading: str = LEGACY_READING, contract_edit=None, library_entries=None
) -> list[CompoundingRow]:
    """One row per pair of one sealed reading, from a lineage's generation rows (index order).

    Args:
        generations: stored generations (``index``, ``contract_hash``, ``record``).
        reading: ``instances``, ``families`` or ``tasks`` (a generation recorded before
            readings existed has ``tasks`` only, see :func:`reading_record`).
        contract_edit: ``(old hash, new hash) -> str``, the edits between two contracts
            (default: none known).
        library_entries: ``hash -> int | None``, the experience-snapshot size a contract
            carries (default: none known).

    Returns:
        pair 0 first; a generation without a measurement of this reading still yields its
        pair, with the reasons.
    """
    ordered = sorted(generations, key=lambda g: g.index)
    if not ordered:
        return []
    first = reading_record(ordered[0].record, reading)
    root = first.get("parent") or {}
    rows = [
        CompoundingRow(
            pair=0, reading=reading, measured_in=ordered[0].index if root else None,
            contract_hash=root.get("contract_hash") or ordered[0].contract_hash or "", adapter=root.get("adapter", ""),
            sealed=_sealed(root), base=_sealed(root), parts=_parts(ordered[0].record, reading, parent=True),
            sealed_tasks_sha256=first.get("sealed_tasks_sha256", ""),
            lift_vs_prev_reason="the root", lift_vs_root_reason="the root",
        )
    ]
    rows += [_pair_row(g, reading, contract_edit, library_entries) for g in ordered]
    return rows


def _pair_row(g: Any, reading: str, contract_edit, library_entries) -> CompoundingRow:
    """The row of the pair generation ``g`` hands on (pair g+1), on one reading."""
    figures = generation_figures(g.record, reading)
    row = reading_record(g.record, reading)
    handed_on = (g.record.get("update") or {}).get("next_pair") or {}
    successor = row.get("successor") or handed_on
    parent = row.get("parent") or {}
    contract = successor.get("contract_hash") or g.record.get("contract_hash") or ""
    adapter = successor.get("adapter", g.record.get("adapter", "")) or ""
    succ, prom = _selection(g.record)
    old = parent.get("contract_hash") or g.contract_hash or ""
    return CompoundingRow(
        pair=g.index + 1, reading=reading, handed_on_by=g.index, measured_in=g.index if row else None,
        contract_hash=contract, adapter=adapter, kept=figures["kept"], sealed=figures["sealed"], base=figures["base"],
        lift_vs_prev=figures["lift_vs_prev"], lift_vs_prev_reason=figures["lift_vs_prev_reason"],
        lift_vs_root=figures["lift_vs_root"], lift_vs_root_reason=figures["lift_vs_root_reason"],
        attribution=figures["attribution"], parts=figures["parts"], sealed_tasks_sha256=figures["sealed_tasks_sha256"],
        change={
            "contract_edit": contract_edit(old, contract) if contract_edit and contract != old else "",
            "library_entries": library_entries(contract) if library_entries else None,
            "adapter": adapter,
            "adapter_changed": adapter != (parent.get("adapter") or ""),
            "successor": succ,
            "promotion": prom,
        },
    )


def lift_text(lift: dict | None, reason: str = "") -> str:
    """``+0.200 [-0.100, +0.500] n=6 (2 families)``, ``... n=5`` when the unit is the task, or ``- (reason)``."""
    if not lift or lift.get("mean") is None:
        return f"- ({reason})" if reason else "-"
    text = f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n={lift.get('n_tasks', 0)}"
    if lift.get("unit") == "family":
        text += f" ({families_text(int(lift.get('n_units') or 0))})"
    return text


def families_text(n: int) -> str:
    """``1 family`` or ``N families``."""
    return f"{n} {'family' if n == 1 else 'families'}"


def method_text(lift: dict | None) -> str:
    """How a lift's interval was made: its ``method`` (a figure recorded before methods were: the bootstrap)."""
    if not lift or lift.get("mean") is None:
        return ""
    return str(lift.get("method") or "percentile bootstrap by task")


def part_text(part: dict | None) -> str:
    """An attribution part in words: its lift, ``unchanged (reason)`` or ``not run (reason)``."""
    if not part:
        return "-"
    if part.get("status") == "measured":
        return lift_text(part.get("lift"))
    words = "unchanged" if part.get("status") == "unchanged" else "not run"
    return f"{words} ({part.get('reason', '')})"


def score_text(sealed: dict | None, *, compact: bool = False) -> str:
    """A pair's sealed success: ``0.400 (4/10 passed, 5 tasks)``, compact ``0.400 (4/10)``, or ``-``."""
    if not sealed or sealed.get("score") is None:
        return "-"
    counts = f"{sealed.get('passed', 0)}/{sealed.get('n_trials', 0)}"
    if not compact:
        counts += f" passed, {sealed.get('n_tasks', 0)} tasks"
    return f"{sealed['score']:.3f} ({counts})"


def kept_text(row: CompoundingRow) -> str:
    """``= pair k-1 (kept; re-read, not run again)``: what a kept pair shows instead of a figure."""
    return KEPT.format(prev=row.pair - 1)


def pair_text(row: CompoundingRow, contract_ref) -> str:
    """``contract ref / adapter`` of a row (``base`` for base weights)."""
    return f"{contract_ref(row.contract_hash)} / {row.adapter or 'base'}"


#: one reading's table header (report and CLI)
HEADER = [
    "pair", "handed on by", "contract / adapter", "sealed success", "lift vs pair k-1 (95% CI)",
    "lift vs pair 0 (95% CI)", "harness part", "weights part", "pair 0 (base)",
]


def table_cells(row: CompoundingRow, contract_ref, *, compact: bool = False) -> list[str]:
    """One pair's cells of its reading's table (:data:`HEADER`); a kept pair says so instead of a figure.

    ``compact`` (the CLI's table): scores without their task count (the table's title has
    it) and no reason beside a kept pair's missing lift.
    """
    who = ["root" if row.handed_on_by is None else f"gen {row.handed_on_by}", pair_text(row, contract_ref)]
    base = score_text(row.base, compact=compact)
    if row.pair == 0:
        return [str(row.pair), *who, score_text(row.sealed, compact=compact), "-", "-", "-", "-", base]
    if row.kept:
        why = "-" if compact else f"- ({row.lift_vs_prev_reason or 'kept its parent pair'})"
        return [str(row.pair), *who, kept_text(row), why, f"= pair {row.pair - 1}'s", "unchanged", "unchanged", base]
    return [
        str(row.pair), *who, score_text(row.sealed, compact=compact),
        lift_text(row.lift_vs_prev, row.lift_vs_prev_reason), lift_text(row.lift_vs_root, row.lift_vs_root_reason),
        part_text(row.attribution.get("harness")), part_text(row.attribution.get("weights")), base,
    ]


#: the instances reading's parts table header (report and CLI)
PART_HEADER = ["pair", *(f"{PART_TITLES[p]}: {what}" for p in PARTS for what in ("success", "lift vs pair 0"))]


#: the same, compact: one cell per part (success, then its lift over pair 0)
COMPACT_PART_HEADER = [f"{PART_TITLES[p]}: success; vs pair 0" for p in PARTS]


def part_cells(row: CompoundingRow, *, compact: bool = False) -> list[str]:
    """One pair's copyable / needs-adaptation cells (:data:`PART_HEADER`, or :data:`COMPACT_PART_HEADER`)."""
    cells = [str(row.pair)]
    for name in PARTS:
        part = row.parts.get(name) or {}
        if row.kept:
            pair = [kept_text(row), f"= pair {row.pair - 1}'s"]
        else:
            lift = "-" if row.pair == 0 else lift_text(part.get("lift_vs_root"), part.get("lift_vs_root_reason", ""))
            pair = [score_text(part.get("sealed"), compact=compact), lift]
        cells += ["\n".join(pair[:1] if row.kept or row.pair == 0 else pair)] if compact else pair
    return cells


#: the pairs table header: where each change came from (no sealed figure; those are per reading)
PAIRS_HEADER = ["pair", "handed on by", "contract / adapter", "change", "selection evidence"]


def reused_text(reused: list[dict] | None) -> str:
    """``; reused 24 trials of generation 0`` for a decision's trials run by earlier generations ("" for none)."""
    if not reused:
        return ""
    by_gen: dict[int, int] = {}
    for entry in reused:
        by_gen[int(entry.get("generation", -1))] = by_gen.get(int(entry.get("generation", -1)), 0) + int(
            entry.get("trials", 0)
        )
    parts = ", ".join(f"{n} of generation {g}" for g, n in sorted(by_gen.items()))
    return f"; reused trials: {parts}"


def change_cells(row: CompoundingRow, contract_ref) -> list[str]:
    """One pair's cells of the pairs table (:data:`PAIRS_HEADER`): what changed and the selection evidence."""
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
        verdict = "cannot compare" if succ.get("cannot_compare") else "promoted" if succ.get("promoted") else "kept"
        evidence.append(f"successor {verdict} on {succ.get('decided_on')}{reused_text(succ.get('reused'))}")
    if prom := change.get("promotion"):
        verdict = (
            "cannot compare" if prom.get("cannot_compare")
            else "trained pair handed on" if prom.get("promoted") else "kept pair handed on"
        )
        evidence.append(
            f"pair gate: {verdict} on {prom.get('decided_on')}"
            + (f" ({lift_text(prom['lift'])})" if prom.get("lift") else "") + reused_text(prom.get("reused"))
        )
    if row.kept:
        came_from.append(kept_text(row))
    return [
        str(row.pair),
        "root" if row.handed_on_by is None else f"gen {row.handed_on_by}",
        pair_text(row, contract_ref),
        "; ".join(came_from) or ("-" if row.pair == 0 else "no change"),
        "; ".join(evidence) or "-",
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
    try:  # the experience library (mindforge.experience) may not be in this build
        describe_experience = importlib.import_module("mindforge.experience").describe_experience
    except (ImportError, AttributeError):
        return None
    try:
        described = describe_experience(loads_contract(row.toml_text, f"{row.name}@{row.revision}"))
    except Exception:  # noqa: BLE001 - a stored contract that no longer parses has no snapshot to count
        return None
    return int(described["entries"]) if described else None
