"""``mindforge lineage status``: a lineage's generations and the compounding table, from the store.

The table view prints the per-generation table (what each stage did, and the sealed
lift), the compounding table (:mod:`mindforge.reports.compounding`) and the experience
library; ``--json`` prints :func:`status_document`, the same figures as ``report
--format json``.

Not a Typer sub-app: :mod:`mindforge.cli.lineage` calls it.
"""

from __future__ import annotations

from collections.abc import Callable

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
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages, registry

    settings = get_settings()
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        lin = lineages.get_lineage(session=s, lineage_id=name)
        if lin is None:
            raise InputError("lineage", "name", f"no lineage {name!r} in {settings.db_url}")
        gens = lineages.list_generations(session=s, lineage_id=name)
        table_rows = compounding.compounding_rows(
            gens, contract_edit=lambda old, new: compounding.edits_between(s, old, new),
            library_entries=lambda h: compounding.library_entries(s, h),
        )
        library = gather_experience(s, lin.id, gens)
        if as_json:
            return print_json(status_document(lin, gens, ui_link(settings, workflow_id), table_rows, library))
        table = Table(title=f"lineage {name}: {lin.status}  generation {lin.current_generation}")
        for col in ("gen", "status", "stages run", "admitted", "base eval solved (search split)", "search coverage",
                    "successor (selection)", "update", "sealed lift"):
            table.add_column(col)
        for g in gens:
            table.add_row(str(g.index), str(g.status), ", ".join(g.stages_run), *_generation_cells(g.record))
        console.print(table)
        stored = {r.contract_hash: registry.get_contract(session=s, content_hash=r.contract_hash) for r in table_rows}
        refs = {h: f"{c.name}@{c.revision}" for h, c in stored.items() if c is not None}
        console.print(compounding_table(table_rows, lambda h: refs.get(h, (h or "-")[:12])))
        console.print(experience_summary_text(library))
    console.print(f"Web UI: {ui_link(settings, workflow_id)}")


def compounding_table(rows, contract_ref) -> Table:
    """The compounding table (:mod:`mindforge.reports.compounding`) as a Rich table, one row per pair."""
    from mindforge.reports import compounding

    table = Table(title="compounding: every pair on the one frozen sealed split (pair k: generation k starts from it)")
    for col in compounding.HEADER:
        table.add_column(col)
    for row in rows:
        table.add_row(*compounding.table_cells(row, contract_ref))
    return table


def status_document(lin, generations, web_ui: str, compounding_rows=None, library=None) -> dict:
    """``mindforge lineage status --json``: the lineage, its generations and its Web UI link.

    Returns:
        :func:`lineage_row` plus ``"spec"``, ``"web_ui"``, ``"generations"`` and
        ``"compounding"``. ``generations``: one object per generation, index order, with
        ``{"index", "status", "stages_run", "contract_hash", "adapter_revision_id",
        "started_at", "finished_at", "record"}`` (``record``: the stored generation record
        as it is, e.g. ``expansion``, ``search``, ``successor``, ``update``,
        ``sealed_lift``) and the compounding figures of the pair the generation hands on
        (``sealed``, ``sealed_parent``, ``lift_vs_prev``, ``lift_vs_root``,
        ``attribution``, ...: :func:`mindforge.reports.compounding.generation_figures`, the
        same as ``report --format json``). ``compounding``: the table's rows, pair 0 first.
        ``experience``: the library (``mindforge.reports.experience.ExperienceReport``:
        ``entries`` by provenance, ``size``, ``rounds``, ``rejections`` by reason per
        generation), or null when not given.
    """
    from mindforge.reports.compounding import generation_figures

    return {
        **lineage_row(lin),
        "spec": lin.spec,
        "web_ui": web_ui,
        "compounding": [r.model_dump(mode="json") for r in compounding_rows or []],
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
                **generation_figures(g.record),
            }
            for g in generations
        ],
    }


def _generation_cells(record: dict) -> list[str]:
    """Summary cells of a generation record: Discovery, base evaluation, search, Update, lift."""
    disc = record.get("discovery")
    exp = record.get("expansion", {})
    search = record.get("search", {})
    upd = record.get("update", {})
    lift = record.get("sealed_lift") or {}
    succ = record.get("successor") or {}
    if search.get("disabled"):
        search_text = "off"
    elif "refused" in search:
        search_text = f"refused: {search['refused']}"
    elif search:
        search_text = (
            f"{search.get('covered', 0)}/{search.get('failing_tasks', 0)} covered, best candidate in the run "
            f"(not a sweep) {search.get('best_single', {}).get('covered', 0)}; "
            f"{search.get('spent', {}).get('attempts', 0)} trials, "
            f"{search.get('stop_reason')}"
        )
    else:
        search_text = ""
    if lift.get("mean") is not None and lift.get("lo") is not None:
        lift_text = f"{lift['mean']:+.2f} [{lift['lo']:+.2f}, {lift['hi']:+.2f}], {lift.get('n_tasks', 0)} tasks"
    else:
        lift_text = record.get("sealed_lift_reason", "")
    succ_text = ("promoted " if succ.get("promoted") else "kept parent ") + succ.get("reason", "")[:60] if succ else ""
    return [
        f"{len(disc.get('admitted', []))}/{disc.get('proposed', 0)}" if disc else "",
        (
            f"{exp.get('solved_tasks', '')}/{exp.get('tasks', '')} "
            f"({exp.get('passed', '')}/{exp.get('trials', '')} trials)"
            if exp
            else ""
        ),
        search_text,
        succ_text,
        _update_text(upd),
        lift_text,
    ]


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
