"""``mindforge dev``: bring the local dev stack up, stop it, show its status."""

from __future__ import annotations

import typer
from rich.table import Table

from mindforge.cli.output import make_console, print_json

app = typer.Typer(help="Local dev stack: Docker engine, base image, registry / image map.", no_args_is_help=True)
console = make_console(stderr=True)

_COMPONENT_HELP = "Only these components (repeatable); default all."


def _names(component: list[str] | None) -> list[str] | None:
    from mindforge.devstack import component_names

    if not component:
        return None
    unknown = [c for c in component if c not in component_names()]
    if unknown:
        raise typer.BadParameter(
            f"unknown component(s) {', '.join(unknown)}; known: {', '.join(component_names())}",
            param_hint="--component",
        )
    return component


def _settings():
    from mindforge.settings import get_settings

    get_settings.cache_clear()
    return get_settings()


def _print(rows, as_json: bool) -> None:
    if as_json:
        print_json([r.model_dump() for r in rows])
        return
    table = Table(title="MindForge dev stack")
    for col in ("component", "address", "answers", "detail"):
        table.add_column(col, overflow="fold")
    for r in rows:
        mark = "[green]yes[/]" if r.up else ("[red]no[/]" if r.required else "[yellow]no[/]")
        table.add_row(r.name, r.address, mark, r.detail)
    make_console().print(table)


@app.command()
def up(
    component: list[str] = typer.Option(None, "--component", "-c", help=_COMPONENT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
) -> None:
    """Start what is not running (installing Docker where missing); quick when all is up."""
    from mindforge.devstack import DevStackError, dev_up

    names = _names(component)
    try:
        rows = dev_up(_settings(), names, say=lambda m: console.print(f"[dim]{m}[/]"))
    except DevStackError as exc:
        console.print(f"[red]dev up failed:[/] {exc}")
        raise typer.Exit(1) from exc
    _print(rows, as_json)
    if any(r.required and not r.up for r in rows):
        raise typer.Exit(1)


@app.command()
def down(component: list[str] = typer.Option(None, "--component", "-c", help=_COMPONENT_HELP)) -> None:
    """Stop what ``dev up`` started; engines it did not start are left running."""
    from mindforge.devstack import DevStackError, dev_down

    try:
        dev_down(_settings(), _names(component), say=lambda m: console.print(m))
    except DevStackError as exc:
        console.print(f"[red]dev down failed:[/] {exc}")
        raise typer.Exit(1) from exc


@app.command()
def status(
    component: list[str] = typer.Option(None, "--component", "-c", help=_COMPONENT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
) -> None:
    """Each component, its address and whether it answers; exit 1 when a required one does not."""
    from mindforge.devstack import dev_status

    rows = dev_status(_settings(), _names(component))
    _print(rows, as_json)
    if any(r.required and not r.up for r in rows):
        raise typer.Exit(1)
