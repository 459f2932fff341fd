"""``mindforge cluster``: a Ray cluster of containers on its own network (Postgres, Redis, a Ray head, N workers)."""

from __future__ import annotations

from pathlib import Path

import typer

from mindforge.cli.output import make_console, print_json

app = typer.Typer(
    help="A Ray cluster of containers on its own Docker network, for MindForge's trials.", no_args_is_help=True
)
console = make_console(stderr=True)

_NAME_HELP = "The cluster's name (container and volume prefix, label value)."


def _settings():
    from mindforge.settings import get_settings

    get_settings.cache_clear()
    return get_settings()


@app.command()
def up(
    workers: int = typer.Option(2, "--workers", "-n", min=1, max=16, help="Ray worker containers."),
    cpus: int = typer.Option(1, "--cpus", min=1, help="CPUs each worker offers Ray."),
    sandboxes: int = typer.Option(4, "--sandboxes", min=1, help="Sandbox slots each worker offers (trials at once)."),
    name: str = typer.Option("mfc", "--name", help=_NAME_HELP),
    subnet: str = typer.Option(None, "--subnet", help="The network's IPv4 subnet (default: a free /24 of 172.30/16)."),
    gcs_ft: bool = typer.Option(True, "--gcs-ft/--no-gcs-ft", help="Keep the head's GCS state in Redis."),
    mount: list[Path] = typer.Option(
        None, "--mount", help="A host folder of tasks the workers read at the same path (default: tasks/)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the settings as one JSON document."),
) -> None:
    """Build the images, start Postgres, Redis, a Ray head and N Ray workers; print the worker settings."""
    from pydantic import ValidationError

    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import ClusterSpec, cluster_up

    try:
        spec = ClusterSpec(
            name=name, workers=workers, cpus_per_worker=cpus, sandboxes_per_worker=sandboxes, subnet=subnet,
            gcs_fault_tolerance=gcs_ft, **({"data_paths": [p.resolve() for p in mount]} if mount else {}),
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
    console.print(f"cluster [bold]{info.name}[/] up on {info.image}:")
    for container, address in info.addresses.items():
        console.print(f"  {container:24s} {address}")
    console.print(f"settings for a worker on this host ({info.env_file}; the store's URL: {info.database_url_file}):")
    for key, value in info.env.items():
        print(f"export {key}={value}")
    console.print(f"then: set -a; . {info.env_file}; set +a; mindforge worker")
    console.print(
        f"the nodes reach this machine at {info.host_address}: serve the policy there for their trials, "
        f"e.g. MINDFORGE_POLICY_API_KEY=... mindforge policy serve --host {info.host_address}"
    )


@app.command()
def image(
    extras: str = typer.Option("postgres", "--extras", help="MindForge's extras to install, comma-separated."),
) -> None:
    """Build the worker image (deploy/worker.Dockerfile) from the local base image; print its tag."""
    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import docker_client
    from mindforge.devstack.worker_image import build_worker_image

    try:
        client = docker_client()
        try:
            wanted = tuple(e.strip() for e in extras.split(",") if e.strip())
            tag = build_worker_image(client, _settings().base_image, lambda m: console.print(f"[dim]{m}[/]"), wanted)
        finally:
            client.close()
    except DevStackError as exc:
        console.print(f"[red]cluster image failed:[/] {exc}")
        raise typer.Exit(1) from exc
    print(tag)


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
        table = Table("container", "role", "address", "state", "sandboxes", title=f"cluster {name}")
        for node in found.nodes:
            colour = "green" if node.state == "running" else "red"
            table.add_row(node.container, node.role, node.address, f"[{colour}]{node.state}[/]", str(node.sandboxes))
        make_console().print(table)
        console.print(f"settings for a host worker: {found.env_file or 'none written'}")
    if not found.ready:
        raise typer.Exit(1)


@app.command()
def down(name: str = typer.Option("mfc", "--name", help=_NAME_HELP)) -> None:
    """Remove the cluster's containers, leftover sandboxes, volume, network, settings and secret files."""
    from mindforge.devstack import DevStackError
    from mindforge.devstack.cluster import cluster_down

    try:
        cluster_down(_settings(), name, say=lambda m: console.print(m))
    except DevStackError as exc:
        console.print(f"[red]cluster down failed:[/] {exc}")
        raise typer.Exit(1) from exc
