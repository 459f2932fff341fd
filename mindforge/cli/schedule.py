"""``mindforge schedule``: Temporal Schedules for nightly improvement runs (overlap policy: skip).

``create`` starts a one-off lineage run per firing; ``extend`` continues an existing
lineage by one (or more) generations per firing, from its last pair.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from mindforge.cli.output import EXAMPLES_HELP, print_json

app = typer.Typer(help="Temporal Schedules that start a lineage on a cron.", no_args_is_help=True)
console = Console()


def schedule_id_for(name: str) -> str:
    """Schedule id of lineage ``name``'s nightly run."""
    return f"schedule-{name}"


async def create_schedule(spec, cron: str, settings) -> str:
    """Create a schedule that starts a one-off lineage run per firing; returns the schedule id.

    Each firing starts ``LineageWorkflow`` with id ``lineage-<name>`` plus Temporal's
    firing-time suffix; a firing while the previous run is still going is skipped
    (``ScheduleOverlapPolicy.SKIP``).
    """
    from temporalio.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleOverlapPolicy,
        SchedulePolicy,
        ScheduleSpec,
    )

    from mindforge.cli.lineage import workflow_id_for
    from mindforge.cli.temporal_client import connect, search_attributes
    from mindforge.payloads import ORCHESTRATION_QUEUE, LineageInput

    client = await connect(settings)
    sid = schedule_id_for(spec.name)
    await client.create_schedule(
        sid,
        Schedule(
            action=ScheduleActionStartWorkflow(
                "LineageWorkflow",
                LineageInput(lineage_id=spec.name, spec=spec),
                id=workflow_id_for(spec.name),
                task_queue=ORCHESTRATION_QUEUE,
                typed_search_attributes=search_attributes(spec.name),
            ),
            spec=ScheduleSpec(cron_expressions=[cron]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        ),
    )
    return sid


async def create_extend_schedule(name: str, generations: int, cron: str, settings) -> str:
    """Create a schedule whose every firing adds ``generations`` to stored lineage ``name``; returns its id.

    Each firing starts ``LineageWorkflow`` (id ``lineage-<name>`` plus Temporal's
    firing-time suffix) with ``extend``: it continues from the lineage's last pair, with
    the same splits and sealed tasks, instead of starting over. Overlap policy: skip.

    Raises:
        InputError: no lineage ``name`` in the store.
    """
    from temporalio.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleOverlapPolicy,
        SchedulePolicy,
        ScheduleSpec,
    )

    from mindforge.cli.lineage import extension_input, workflow_id_for
    from mindforge.cli.temporal_client import connect, search_attributes
    from mindforge.payloads import ORCHESTRATION_QUEUE

    arg = extension_input(name, generations, settings)
    client = await connect(settings)
    sid = schedule_id_for(name)
    await client.create_schedule(
        sid,
        Schedule(
            action=ScheduleActionStartWorkflow(
                "LineageWorkflow", arg, id=workflow_id_for(name), task_queue=ORCHESTRATION_QUEUE,
                typed_search_attributes=search_attributes(name),
            ),
            spec=ScheduleSpec(cron_expressions=[cron]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        ),
    )
    return sid


@app.command()
def extend(
    cron: str = typer.Option(..., "--cron", help='Cron expression, e.g. "0 2 * * *" (02:00 UTC nightly).'),
    name: str = typer.Option(..., "--name", help="A lineage in the store; each firing continues it."),
    generations: int = typer.Option(1, "--generations", min=1, help="Generations each firing adds."),
) -> None:
    """Create a schedule whose every firing adds generations to an existing lineage, from its last pair."""
    from mindforge.settings import get_settings

    settings = get_settings()
    sid = asyncio.run(create_extend_schedule(name, generations, cron, settings))
    console.print(
        f"created schedule {sid} ({cron}, overlap skip): each firing adds {generations} generation(s) to {name}\n"
        f"Web UI: {settings.temporal_ui_url}/namespaces/{settings.temporal_namespace}/schedules/{sid}"
    )


@app.command()
def create(
    cron: str = typer.Option(..., "--cron", help='Cron expression, e.g. "0 2 * * *" (02:00 UTC nightly).'),
    name: str = typer.Option(..., "--name", help="Lineage name the schedule runs."),
    tasks: list[Path] = typer.Option(..., "--tasks"),
    contract: Path = typer.Option(..., "--contract"),
    generations: int = typer.Option(1, "--generations", min=1),
    attempts: int = typer.Option(2, "--attempts", min=1),
    selection: float = typer.Option(
        0.2, "--selection", min=0.0, max=0.99, help="Share of tasks on the selection split."
    ),
    sealed: float = typer.Option(0.2, "--sealed", min=0.0, max=0.99, help="Share of tasks on the sealed split."),
    min_split_tasks: int = typer.Option(5, "--min-split-tasks", min=0, help="Fewest tasks each split must hold."),
    allow_small_splits: bool = typer.Option(False, "--allow-small-splits", help="Allow a split below the minimum."),
    seed: int = typer.Option(0, "--seed"),
    policy_url: str = typer.Option(None, "--policy-url"),
    stages: str = typer.Option("discovery,expansion,update", "--stages"),
    base_model: str = typer.Option(
        None,
        "--base-model",
        help="Base model the Update stage trains on, as --model takes it (default: the contract's model.id).",
    ),
    search_attempts: int = typer.Option(
        None, "--search-attempts", min=0, help="Search budget per generation in trials (0: no search)."
    ),
    audit_judge: bool = typer.Option(
        False, "--audit-judge", help="Ask the policy model to judge failures the audit rules cannot decide."
    ),
    examples: Path = typer.Option(None, "--examples", help=EXAMPLES_HELP),
) -> None:
    """Create a schedule that runs a lineage on a cron (overlapping firings are skipped)."""
    from mindforge.cli.lineage import build_spec, split_config
    from mindforge.settings import get_settings

    settings = get_settings()
    splits = split_config(selection, sealed, min_split_tasks, allow_small_splits)
    spec = build_spec(
        name, tasks, contract, generations, attempts, splits, seed, policy_url, stages, 16, base_model,
        search_attempts, audit_judge, examples=examples, say=console.print,
    )
    sid = asyncio.run(create_schedule(spec, cron, settings))
    console.print(
        f"created schedule {sid} ({cron}, overlap skip)\n"
        f"Web UI: {settings.temporal_ui_url}/namespaces/{settings.temporal_namespace}/schedules/{sid}"
    )


@app.command("list")
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of a table."),
) -> None:
    """List schedules."""
    from mindforge.cli.temporal_client import connect
    from mindforge.settings import get_settings

    async def go() -> list:
        client = await connect(get_settings())
        out = []
        async for entry in await client.list_schedules():
            desc = await client.get_schedule_handle(entry.id).describe()
            out.append((entry.id, desc))
        return out

    rows = [schedule_row(sid, desc) for sid, desc in asyncio.run(go())]
    if as_json:
        print_json(rows)
        return
    table = Table(title="schedules")
    for col in ("id", "cron", "overlap", "next run"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["id"], row["cron"], row["overlap"], row["next_run"] or "")
    console.print(table)


def schedule_row(schedule_id: str, desc) -> dict:
    """One schedule as JSON: the keys of ``mindforge schedule list --json``.

    Args:
        schedule_id: the schedule's id.
        desc: its ``temporalio.client.ScheduleDescription``.

    Returns:
        ``{"id", "cron", "overlap", "paused", "workflow", "workflow_id", "next_run"}``:
        ``cron`` as :func:`_spec_text` writes it, ``overlap`` the policy's name
        (``SKIP``), ``next_run`` ISO 8601 UTC or null.
    """
    action = desc.schedule.action
    nxt = desc.info.next_action_times[0] if desc.info.next_action_times else None
    return {
        "id": schedule_id,
        "cron": _spec_text(desc.schedule.spec),
        "overlap": str(desc.schedule.policy.overlap.name),
        "paused": bool(desc.schedule.state.paused),
        "workflow": action.workflow,
        "workflow_id": action.id,
        "next_run": nxt.isoformat() if nxt else None,
    }


def _spec_text(spec) -> str:
    """Cron-like text of a schedule spec (the server keeps crons as calendar specs)."""
    if spec.cron_expressions:
        return ", ".join(spec.cron_expressions)

    def ranges(rs) -> str:
        return ",".join(str(r.start) if r.start == r.end else f"{r.start}-{r.end}" for r in rs) or "*"

    return "; ".join(
        f"{ranges(c.minute)} {ranges(c.hour)} {ranges(c.day_of_month)} {ranges(c.month)} {ranges(c.day_of_week)}"
        for c in spec.calendars
    )


@app.command()
def delete(schedule_id: str = typer.Argument(..., help="Schedule id (schedule-<name>).")) -> None:
    """Delete a schedule."""
    from mindforge.cli.temporal_client import connect
    from mindforge.settings import get_settings

    async def go() -> None:
        client = await connect(get_settings())
        await client.get_schedule_handle(schedule_id).delete()

    asyncio.run(go())
    console.print(f"deleted schedule {schedule_id}")
