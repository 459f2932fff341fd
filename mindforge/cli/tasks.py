"""``mindforge tasks``: validate, run single trials, import Terminal-Bench 1 tasks."""

from __future__ import annotations

import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import typer
from rich.table import Table

from mindforge.cli.common import load_task_dirs, task_progress
from mindforge.cli.discover import discover_command
from mindforge.cli.output import make_console
from mindforge.errors import InputError

app = typer.Typer(help="Load, validate and run tasks (Harbor / Terminal-Bench 2 layout).", no_args_is_help=True)
console = make_console(stderr=True)

_VERDICT_STYLE = {
    "valid": "green",
    "no_reference": "yellow",
    "broken": "red",
    "trivially_passing": "red",
    "flaky": "magenta",
    "invalid": "red",
}


@app.command()
def validate(
    paths: list[Path] = typer.Argument(..., help="Task directories, or folders of task directories."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", min=1, help="Tasks validated at once."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    allow_no_reference: bool = typer.Option(
        False, help="Treat tasks without a reference solution as valid when nop scores 0."
    ),
) -> None:
    """Build each task, run the oracle twice and nop once, and give a verdict per task.

    Exits 1 when any task is not valid.
    """
    from mindforge.settings import get_settings
    from mindforge.trials.run import open_engine
    from mindforge.trials.validate import TaskValidation, Verdict, validate_task

    tasks, load_errors = load_task_dirs(paths)
    results: list[TaskValidation] = [
        TaskValidation(task_id=d.name, path=str(d), verdict=Verdict.INVALID, reasons=[str(e)]) for d, e in load_errors
    ]
    settings = get_settings()
    engine, image_map = open_engine(settings)
    run_id = f"validate-{uuid.uuid4().hex[:8]}"
    with task_progress(not as_json) as progress:
        bar = progress.add_task("validating", total=len(tasks) * 3)
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [
                pool.submit(
                    validate_task,
                    t,
                    engine,
                    artifact_root=settings.artifacts,
                    image_map=image_map,
                    run_id=run_id,
                    on_trial=lambda _r: progress.advance(bar),
                )
                for t in tasks
            ]
            for fut in as_completed(futures):
                results.append(fut.result())
    results.sort(key=lambda r: r.task_id)
    ok_verdicts = {Verdict.VALID} | ({Verdict.NO_REFERENCE} if allow_no_reference else set())
    if as_json:
        sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in results], indent=2) + "\n")
    else:
        table = Table(title=f"task validation ({run_id})")
        for col in ("task", "verdict", "oracle", "nop", "reasons"):
            table.add_column(col)
        for r in results:
            style = _VERDICT_STYLE.get(r.verdict, "")
            table.add_row(
                r.task_id,
                f"[{style}]{r.verdict}[/]",
                ", ".join("-" if x is None else f"{x:g}" for x in r.oracle_rewards),
                "-" if r.nop_reward is None else f"{r.nop_reward:g}",
                "\n".join(r.reasons),
            )
        make_console().print(table)
        n_ok = sum(r.verdict in ok_verdicts for r in results)
        make_console().print(f"{n_ok}/{len(results)} valid; artifacts under {settings.artifacts}")
    if any(r.verdict not in ok_verdicts for r in results):
        raise typer.Exit(1)


@app.command()
def run(
    path: Path = typer.Argument(..., help="A task directory."),
    agent: str = typer.Option("oracle", "--agent", "-a", help="oracle | nop"),
    attempts: int = typer.Option(1, "--attempts", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print the records as JSON."),
) -> None:
    """Run single trials of one task and print their records."""
    from mindforge.agent.simple import NopAgent, OracleAgent
    from mindforge.settings import get_settings
    from mindforge.trials.run import open_engine, run_trial

    agents = {"oracle": OracleAgent, "nop": NopAgent}
    if agent not in agents:
        raise InputError("--agent", "agent", f"unknown agent {agent!r}; choose one of {sorted(agents)}")
    tasks, errors = load_task_dirs([path])
    if errors:
        raise errors[0][1]
    settings = get_settings()
    engine, image_map = open_engine(settings)
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    records = []
    for task in tasks:
        for i in range(attempts):
            records.append(
                run_trial(
                    task,
                    agents[agent](),
                    engine,
                    run_id=run_id,
                    trial_id=f"{task.id}.{agent}.{i}",
                    artifact_root=settings.artifacts,
                    attempt=i,
                    image_map=image_map,
                )
            )
    if as_json:
        sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in records], indent=2) + "\n")
        return
    table = Table(title=f"trials ({run_id})")
    for col in ("trial", "reward", "failure", "build s", "agent s", "verify s", "teardown s", "artifacts"):
        table.add_column(col)
    for r in records:
        t = r.timings
        table.add_row(
            r.trial_id,
            "-" if r.reward is None else f"{r.reward:g}",
            f"{r.failure_class or ''} {r.failure_detail}".strip(),
            f"{t.build_sec:.2f}",
            f"{t.agent_sec:.2f}",
            f"{t.verify_sec:.2f}",
            f"{t.teardown_sec:.2f}",
            r.artifacts.get("dir", ""),
        )
    make_console().print(table)


@app.command("import-tb1")
def import_tb1_cmd(
    src: Path = typer.Argument(..., help="A Terminal-Bench 1 task directory (task.yaml at its top)."),
    dest: Path = typer.Argument(..., help="Folder to write the native task directory into."),
) -> None:
    """Convert a Terminal-Bench 1 task into the native Harbor layout."""
    from mindforge.tasks.tb1 import import_tb1

    out = import_tb1(src, dest)
    make_console().print(f"imported {src} -> {out}")



app.command("discover")(discover_command)


