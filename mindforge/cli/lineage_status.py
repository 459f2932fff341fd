"""``mindforge lineage status``: a lineage's generations, the pairs, and one compounding table per sealed reading.

Read from the store alone. The table view prints the per-generation table (what each
stage did, and the sealed lift over the parent pair per reading), the readings the
lineage has in one header line (held-out families, tasks per reading), the pairs with
where each change came from, then one compact table per sealed reading (sealed
instances, sealed families, sealed tasks: never pooled), each pair's figures on that
reading (:mod:`mindforge.reports.compounding`). ``--json`` prints
:func:`status_document`, the same figures as ``report --format json``.

Not a Typer sub-app: :mod:`mindforge.cli.lineage` calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from mindforge.cli.output import print_json
from mindforge.errors import InputError


def lineage_row(lin) -> dict:
    """One lineage as JSON: the keys of ``mindforge lineage list --json``.

    Returns:
        ``{"id", "name", "status", "current_generation", "workflow_id", "created_at",
        "updated_at"}``; timestamps ISO 8601 UTC, ``workflow_id`` may be null.
    """
    return {
        "id": lin.id,
        "name": lin.name,
        "status": str(lin.status),
        "current_generation": lin.current_generation,
        "workflow_id": lin.workflow_id,
        "created_at": lin.created_at.isoformat(),
        "updated_at": lin.updated_at.isoformat(),
    }


def print_status(name: str, console: Console, ui_link: Callable, workflow_id: str, *, as_json: bool = False) -> None:
    """Print lineage ``name``'s status from the store: tables on ``console``, or one JSON document.

    Args:
        name: the lineage's name (its id).
        console: where the tables go (:func:`mindforge.cli.output.make_console`).
        ui_link: ``(settings, workflow id) -> Web UI link``.
        workflow_id: the lineage's workflow id.
        as_json: print :func:`status_document` instead.

    Raises:
        InputError: no lineage of that name in the store.
    """
    from mindforge.reports import compounding
    from mindforge.reports.data import gather_experience
    from mindforge.reports.experience import summary_text as experience_summary_text
    from mindforge.reports.readings import reading_tables, readings_summary
    from mindforge.settings import get_settings
    from mindforge.store import PoolSplit, lineages, pool, registry
    from mindforge.store import engine as se

    settings = get_settings()
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        lin = lineages.get_lineage(session=s, lineage_id=name)
        if lin is None:
            raise InputError("lineage", "name", f"no lineage {name!r} in {settings.db_url}")
        gens = lineages.list_generations(session=s, lineage_id=name)
        sealed = len(pool.list_pool(session=s, lineage_id=lin.id, split=PoolSplit.SEALED))
        summary = readings_summary(lin.spec or {}, sealed)
        tables = reading_tables(
            gens, summary, contract_edit=lambda old, new: compounding.edits_between(s, old, new),
            library_entries=lambda h: compounding.library_entries(s, h),
        )
        library = gather_experience(s, lin.id, gens)
        if as_json:
            return print_json(status_document(lin, gens, ui_link(settings, workflow_id), tables, library, summary))
        console.print(generations_table(name, lin, gens))
        for line in gate_power_lines(gens):
            console.print(line)
        hashes = {r.contract_hash for t in tables.values() for r in t.rows}
        stored = {h: registry.get_contract(session=s, content_hash=h) for h in hashes}
        refs = {h: f"{c.name}@{c.revision}" for h, c in stored.items() if c is not None}
        for renderable in readings_renderables(summary, tables, lambda h: refs.get(h, (h or "-")[:12])):
            console.print(renderable)
        console.print(experience_summary_text(library))
    console.print(f"Web UI: {ui_link(settings, workflow_id)}")


def generations_table(name: str, lin, generations) -> Table:
    """The per-generation table: stages run, Discovery, base evaluation, search, successor, Update, sealed lift."""
    table = Table(title=f"lineage {name}: {lin.status}  generation {lin.current_generation}")
    for col in ("gen", "status", "stages run", "admitted", "base eval solved (search split)", "search coverage",
                "successor (selection)", "update", "sealed lift over the parent pair, every reading"):
        table.add_column(col)
    for g in generations:
        table.add_row(str(g.index), str(g.status), ", ".join(g.stages_run), *_generation_cells(g.record))
    return table


def gate_power_lines(generations) -> list[str]:
    """Each generation's gates at its parent's measured selection rate (``record["gate_power"]``), in words."""
    from mindforge.evaluation.sizing import GatesAtRate

    out = []
    for g in generations:
        stored = (g.record or {}).get("gate_power")
        if stored:
            lines = GatesAtRate.model_validate(stored).lines()
            out += [f"generation {g.index}: {lines[0]}", *lines[1:]]
    return out


def readings_renderables(summary, tables: dict, contract_ref) -> list[Any]:
    """The readings header line, the pairs table, then one compact table per sealed reading.

    Args:
        summary: :class:`mindforge.reports.readings.ReadingsSummary`.
        tables: reading -> :class:`mindforge.reports.readings.ReadingTable`.
        contract_ref: ``hash -> name@revision``.

    Returns:
        what to print, in order: a text line, then Rich tables (a line saying so when the
        lineage has no sealed reading).
    """
    from mindforge.reports import compounding
    from mindforge.reports.readings import headline_lines

    out: list[Any] = [summary.header()]
    if not tables:
        return [*out, "compounding: no sealed reading recorded yet (the lineage has no sealed task)"]
    out += ["sealed readings, never pooled (the last pair measured over pair 0):",
            *(f"  {line}" for line in headline_lines(tables, summary))]
    pairs = Table(title="pairs (pair k: generation k starts from it) and where each change came from")
    for col in compounding.PAIRS_HEADER:
        pairs.add_column(col)
    for row in next(iter(tables.values())).rows:
        pairs.add_row(*compounding.change_cells(row, contract_ref))
    out.append(pairs)
    for table in tables.values():
        out.append(reading_table(table, contract_ref))
    return out


def reading_table(table, contract_ref) -> Table:
    """One reading's compact compounding table; the instances reading adds its copyable / needs-adaptation columns."""
    from mindforge.evaluation.curriculum import SealedReading
    from mindforge.reports import compounding

    parts = table.reading == SealedReading.INSTANCES.value and any(r.parts for r in table.rows)
    rich = Table(title=f"{table.header()}" + ("" if table.measured else " - not measured yet"))
    header = compounding.HEADER + (compounding.COMPACT_PART_HEADER if parts else [])
    for col in header:
        rich.add_column(col)
    for row in table.rows:
        cells = compounding.table_cells(row, contract_ref, compact=True)
        rich.add_row(*cells, *(compounding.part_cells(row, compact=True)[1:] if parts else []))
    return rich


def status_document(lin, generations, web_ui: str, tables=None, library=None, summary=None) -> dict:
    """``mindforge lineage status --json``: the lineage, its generations, its readings and its Web UI link.

    Args:
        lin: the stored lineage.
        generations: its stored generations.
        web_ui: its Web UI link.
        tables: reading -> :class:`mindforge.reports.readings.ReadingTable` (None: none).
        library: the experience library (:class:`mindforge.reports.experience.ExperienceReport`).
        summary: :class:`mindforge.reports.readings.ReadingsSummary` (None: not given).

    Returns:
        :func:`lineage_row` plus ``"spec"``, ``"web_ui"``, ``"generations"``,
        ``"readings_record"``, ``"readings"`` and ``"experience"``.

        ``generations``: one object per generation, index order, with ``{"index", "status",
        "stages_run", "contract_hash", "adapter_revision_id", "started_at", "finished_at",
        "record", "sealed_reading", "readings"}``; ``record`` is the stored generation record
        as it is; ``sealed_reading`` names the reading of an older record's one
        ``record["sealed_lift"]`` (null since each reading has its own, ``sealed_lifts``);
        ``readings`` maps each reading the generation measured (``instances``, ``families``,
        ``tasks``) to the figures of the pair it hands on
        (:func:`mindforge.reports.compounding.generation_figures`: ``sealed``,
        ``sealed_parent``, ``base`` (pair 0), ``kept``, ``lift_vs_prev``, ``lift_vs_root``
        with their reasons, ``attribution``, ``n_tasks``, ``sealed_tasks_sha256``, and
        ``parts``: copyable / needs adaptation for ``instances``); the same as ``report
        --format json``.

        ``readings_record``: ``{"recorded", "training_families", "sealed_families", "tasks"
        (reading -> sealed tasks), "copyable", "needs_adaptation"}`` or null.
        ``readings``: reading -> ``{"reading", "title", "n_tasks", "families",
        "before_readings", "rows"}``, each row one pair (pair 0 first) of that reading.
        ``experience``: the library (``entries`` by provenance, ``size``, ``rounds``,
        ``rejections`` by reason per generation), or null when not given.
    """
    from mindforge.reports.compounding import generation_readings, sealed_reading_of

    return {
        **lineage_row(lin),
        "spec": lin.spec,
        "web_ui": web_ui,
        "readings_record": summary.model_dump(mode="json") if summary is not None else None,
        "readings": {k: t.model_dump(mode="json") for k, t in (tables or {}).items()},
        "experience": library.model_dump(mode="json") if library is not None else None,
        "generations": [
            {
                "index": g.index,
                "status": str(g.status),
                "stages_run": list(g.stages_run),
                "contract_hash": g.contract_hash,
                "adapter_revision_id": g.adapter_revision_id,
                "started_at": g.started_at.isoformat() if g.started_at else None,
                "finished_at": g.finished_at.isoformat() if g.finished_at else None,
                "record": g.record,
                "sealed_reading": sealed_reading_of(g.record),
                "readings": generation_readings(g.record),
            }
            for g in generations
        ],
    }


def _generation_cells(record: dict) -> list[str]:
    """Summary cells of a generation record: Discovery, base evaluation, search, successor, Update, sealed lift."""
    disc = record.get("discovery")
    exp = record.get("expansion", {})
    succ = record.get("successor") or {}
    succ_text = ""
    if succ:
        reason = str(succ.get("reason", "")).removesuffix("; the parent is kept")  # the cell says so first
        if len(reason) > 60:
            reason = reason[:59].rstrip(" ;,(") + "…"  # the whole reason: --verbose
        succ_text = ("promoted: " if succ.get("promoted") else "kept parent: ") + reason
    return [
        f"{len(disc.get('admitted', []))}/{disc.get('proposed', 0)}" if disc else "",
        (
            f"{exp.get('solved_tasks', '')}/{exp.get('tasks', '')} "
            f"({exp.get('passed', '')}/{exp.get('trials', '')} trials)"
            if exp
            else ""
        ),
        _search_text(record.get("search", {})),
        succ_text,
        _update_text(record.get("update", {})),
        _lift_lines(record),
    ]


def _search_text(search: dict) -> str:
    """The search cell: off, refused, or coverage, best candidate in the run, trials and stop reason."""
    from mindforge.search.state import stop_reason_text

    if search.get("disabled"):
        return "off"
    if "refused" in search:
        return f"refused: {search['refused']}"
    if not search:
        return ""
    return (
        f"{search.get('covered', 0)}/{search.get('failing_tasks', 0)} covered, best candidate in the run "
        f"(not a sweep) {search.get('best_single', {}).get('covered', 0)}; "
        f"{search.get('spent', {}).get('attempts', 0)} trials, "
        f"{stop_reason_text(search.get('stop_reason'))}"
    )


def _lift_lines(record: dict) -> str:
    """The sealed-lift cell: one line per reading, ``sealed instances: +0.25 [+0.00, +0.50], 4 tasks in 4 families``.

    The three headline readings always (one the lineage does not have says ``none``), never
    one reading alone under a general name; or why nothing was measured yet.
    """
    from mindforge.evaluation.curriculum import HEADLINE_READINGS, READING_ORDER
    from mindforge.reports.compounding import families_text, generation_lifts, generation_readings
    from mindforge.reports.readings import reading_name

    lifts = generation_lifts(record)
    if not lifts:
        return record.get("sealed_lift_reason", "")
    readings = generation_readings(record)
    lines = []
    for reading in READING_ORDER:
        entry, name = lifts.get(reading.value), reading_name(reading.value)
        if entry is None:
            if reading in HEADLINE_READINGS:
                lines.append(f"{name}: none")
            continue
        lift = entry.get("lift") or {}
        if (readings.get(reading.value) or {}).get("kept"):
            text = "kept its parent pair (re-read)"
        elif lift.get("mean") is not None and lift.get("lo") is not None:
            families = f" in {families_text(int(lift.get('n_units') or 0))}" if lift.get("unit") == "family" else ""
            interval = f"{lift['mean']:+.2f} [{lift['lo']:+.2f}, {lift['hi']:+.2f}]"
            text = f"{interval}, {lift.get('n_tasks', 0)} tasks{families}"
        else:
            text = entry.get("reason", "")
        lines.append(f"{name}: {text}")
    return "\n".join(lines)


def _update_text(upd: dict) -> str:
    """The Update cell: its outcome, then one line per on-policy iteration (reward, flat groups, tokens, loss, s)."""
    lines = [str(upd.get("outcome", ""))]
    for it in upd.get("iterations") or []:
        loss = "" if it.get("loss") is None else f", loss {it['loss']:+.3f}"
        lines.append(
            f"it {it['iteration']}: reward {it['mean_reward']:.2f} on {it['rollouts']}, "
            f"flat {it['flat_groups']}/{it['groups']}{_guided(it)}, {it['tokens_trained']} tokens{loss}, "
            f"{it['seconds']:.0f} s"
        )
    return "\n".join(lines)


def _guided(it: dict) -> str:
    """`` (n guided)`` when guides joined some of an iteration's groups, else ""."""
    return f" ({it['guided_groups']} guided)" if it.get("guided_groups") else ""
