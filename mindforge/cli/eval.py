"""``mindforge eval``: run a pair on tasks in-process, with progress, a summary table and a JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from mindforge.cli.common import ENGINE_HELP, load_task_dirs, task_progress
from mindforge.cli.output import make_console


def eval_command(
    tasks: list[Path] = typer.Option(..., "--tasks", "-t", help="Task directories or folders of them."),
    contract: Path = typer.Option(..., "--contract", "-c", help="HCP contract TOML file."),
    attempts: int = typer.Option(1, "--attempts", "-n", min=1, help="Trials per task."),
    concurrency: int = typer.Option(1, "--concurrency", "-j", min=1, help="Trials at once."),
    base_url: str = typer.Option(
        None, "--base-url", help="Policy endpoint (.../v1); default from the contract's base_url_env or settings."
    ),
    model: str = typer.Option(
        None, "--model", "-m",
        help="Serve this model in-process for the run instead of using an endpoint: smollm2, tiny, a .gguf file, "
        "a model directory or a hub id (its served name must be the contract's model.id).",
    ),
    engine: str = typer.Option("auto", "--engine", help=ENGINE_HELP + " With --model only."),
    out: Path = typer.Option(None, "--out", "-o", help="JSON results file (default: under the run's artifacts)."),
) -> None:
    """Run trials of every task under one HCP contract (no Temporal, for quick work)."""
    from mindforge.errors import InputError
    from mindforge.hcp import load_contract

    hcp = load_contract(contract)
    if model and base_url:
        raise InputError("--model", "", "give --model (serve it here) or --base-url (an endpoint), not both")
    loaded, errors = load_task_dirs(tasks)
    if errors:
        raise errors[0][1]
    if not model:
        if engine != "auto":
            raise InputError("--engine", "engine", "chooses the engine of --model's in-process server; give --model")
        _run(hcp, loaded, attempts, concurrency, base_url, out)
        return
    from mindforge.cli.common import choose_engine
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.server import start_policy_server

    resolved = resolve_model(model)  # checked before the model is loaded
    if resolved.name != hcp.model.id:
        raise InputError(
            contract, "model.id", f"is {hcp.model.id!r} but --model {model} is served as {resolved.name!r}"
        )
    chosen = choose_engine(engine, resolved)
    make_console().print(f"serving {model} as {resolved.name} on {chosen}")
    with start_policy_server(model, port=0, engine=chosen) as server:
        _run(hcp, loaded, attempts, concurrency, server.base_url, out)


def _run(hcp, loaded, attempts: int, concurrency: int, base_url: str | None, out: Path | None) -> None:
    """Run the trials against ``base_url``, write the JSON results and print the summary table."""
    from mindforge.agent.loop import ModelAgent
    from mindforge.settings import get_settings
    from mindforge.trials.batch import evaluate
    from mindforge.trials.run import open_engine

    settings = get_settings()
    engine, image_map = open_engine(settings)
    with task_progress(True) as progress:
        bar = progress.add_task(f"eval {hcp.mindforge.name}@{hcp.mindforge.revision}", total=len(loaded) * attempts)
        summary = evaluate(
            loaded,
            lambda: ModelAgent(hcp, base_url=base_url),
            engine,
            attempts=attempts,
            artifact_root=settings.artifacts,
            image_map=image_map,
            concurrency=concurrency,
            on_trial=lambda _r: progress.advance(bar),
        )
    out = out or settings.artifacts / "runs" / summary.run_id / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary.model_dump(mode="json"), indent=2), encoding="utf-8")
    table = Table(title=f"eval {summary.run_id}  contract {hcp.content_hash[:12]}")
    for col in ("task", "attempt", "reward", "failure class", "turns", "prompt tok", "compl tok", "seconds"):
        table.add_column(col)
    for r in summary.records:
        table.add_row(
            r.task_id,
            str(r.attempt),
            "-" if r.reward is None else f"{r.reward:g}",
            str(r.failure_class or ""),
            str(r.num_turns),
            str(r.prompt_tokens),
            str(r.completion_tokens),
            f"{r.timings.total_sec:.1f}",
        )
    console = make_console()
    console.print(table)
    rate = "-" if summary.pass_rate is None else f"{summary.pass_rate:.2f}"
    console.print(f"pass rate {rate}; solved {len(summary.solved_tasks)}/{len(loaded)} tasks; results: {out}")
