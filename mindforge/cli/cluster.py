"""``mindforge cluster``: a Ray cluster of containers on this machine (Postgres, a Ray head, N workers)."""

from __future__ import annotations

import typer

from mindforge.cli.output import make_console, print_json

app = typer.Typer(help="A Ray cluster of containers on this machine, for MindForge's trials.", no_args_is_help=True)
console = make_console(stderr=True)

_NAME_HELP = "The cluster's name (container and volume prefix, label value)."


def _settings():
    from mindforge.settings import get_settings

    get_settings.cache_clear()
    return get_settings()


@app.command()
def up(
    workers: int = typer.Option(2, "--workers", "-n", min=1, max=16, help="Ray worker containers."),
    cpus: int = typer.Option(1, "--cpus", min=1, help="CPUs each worker offers Ray (trials in parallel per worker)."),
    name: str = typer.Option("mfc", "--name", help=_NAME_HELP),
    gcs_port: int = typer.Option(6480, "--gcs-port", help="The Ray head's port on 127.0.0.1."),
    client_port: int = typer.Option(10480, "--client-port", help="The head's Ray Client port."),
    postgres_port: int = typer.Option(5480, "--postgres-port", help="The store's Postgres port on 127.0.0.1."),
    as_json: bool = typer.Option(False, "--json", help="Print the settings as one JSON document."),
) -> None:
    """Build the node image, start Postgres, a Ray head and N Ray workers; print the worker settings."""
    from pydantic import ValidationError

    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import ClusterSpec, cluster_up

    try:
        spec = ClusterSpec(
            name=name, workers=workers, cpus_per_worker=cpus, gcs_port=gcs_port, client_port=client_port,
            postgres_port=postgres_port,
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        info = cluster_up(_settings(), spec, say=lambda m: console.print(f"[dim]{m}[/]"))
    except DevStackError as exc:
        console.print(f"[red]cluster up failed:[/] {exc}")
        raise typer.Exit(1) from exc
    if as_json:
        print_json(info.model_dump(mode="json"))
        return
    console.print(f"cluster [bold]{info.name}[/] up: {', '.join(info.containers)}")
    console.print(f"settings for a worker on this host ({info.env_file}):")
    for key, value in info.env.items():
        print(f"export {key}={value}")
    console.print(f"then: set -a; . {info.env_file}; set +a; mindforge worker")


@app.command()
def status(
    name: str = typer.Option("mfc", "--name", help=_NAME_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
) -> None:
    """Each container of the cluster, its state and the sandboxes it runs; exit 1 unless it is ready."""
    from rich.table import Table

    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import cluster_status

    try:
        found = cluster_status(_settings(), name)
    except DevStackError as exc:
        console.print(f"[red]cluster status failed:[/] {exc}")
        raise typer.Exit(1) from exc
    if as_json:
        print_json(found.model_dump(mode="json"))
    elif not found.nodes:
        console.print(f"cluster [bold]{name}[/]: no containers (start it with `mindforge cluster up --name {name}`)")
    else:
        table = Table("container", "role", "state", "sandboxes", title=f"cluster {name}")
        for node in found.nodes:
            colour = "green" if node.state == "running" else "red"
            table.add_row(node.container, node.role, f"[{colour}]{node.state}[/]", str(node.sandboxes))
        make_console().print(table)
        console.print(f"settings for a host worker: {found.env_file or 'none written'}")
    if not found.ready:
        raise typer.Exit(1)


@app.command()
def down(name: str = typer.Option("mfc", "--name", help=_NAME_HELP)) -> None:
    """Remove the cluster's containers, volume, leftover sandboxes, temp dir and settings file."""
    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import cluster_down

    try:
        cluster_down(_settings(), name, say=lambda m: console.print(m))
    except DevStackError as exc:
        console.print(f"[red]cluster down failed:[/] {exc}")
        raise typer.Exit(1) from exc
