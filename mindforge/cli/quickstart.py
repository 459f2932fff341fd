"""``mindforge quickstart``: the README's main job.

Brings the dev stack up, serves the policy (the embedded server, unless ``--policy-url``
points at one that runs already, e.g. vLLM), runs a worker, starts a one-generation
lineage on a few bundled tasks, waits for it with progress, and prints where the results
and the Temporal Web UI are. The worker and the policy server it started are stopped at
the end; Temporal, Ray and Docker stay up (``mindforge dev down`` stops them).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from mindforge.cli.output import make_console
from mindforge.errors import InputError
from mindforge.settings import REPO_ROOT

console = make_console()

DEFAULT_TASKS = ["log-5xx-report", "fix-invoice-totals", "sqlite-revenue-report", "jsonl-to-csv"]


def quickstart_command(
    model: str = typer.Option(
        "tiny", "--model",
        help="Model for the embedded policy server and the Update stage: 'tiny' (offline, random weights), 'smollm2' "
        "(bundled SmolLM2-135M-Instruct), a local .gguf file, a model directory or a hub id.",
    ),
    contract: Path = typer.Option(
        None,
        "--contract",
        help="Root HCP contract; default tiny.toml / smollm2.toml for those models, else baseline.toml.",
    ),
    policy_url: str = typer.Option(None, "--policy-url", help="Use this running endpoint (e.g. vLLM) instead of the embedded server."),
    tasks: list[Path] = typer.Option(None, "--tasks", help="Tasks to run (default: three bundled tasks)."),
    name: str = typer.Option(None, "--name", help="Lineage name (default quickstart-<time>)."),
    generations: int = typer.Option(1, "--generations", min=1),
    attempts: int = typer.Option(2, "--attempts", min=1),
    stages: str = typer.Option("discovery,expansion,update", "--stages"),
    selection: float = typer.Option(0.2, "--selection", min=0.0, max=0.99, help="Share of tasks on the selection split (decisions)."),
    sealed: float = typer.Option(0.2, "--sealed", min=0.0, max=0.99, help="Share of tasks on the sealed split (the reported lift)."),
    min_split_tasks: int = typer.Option(5, "--min-split-tasks", min=0, help="Fewest tasks each split must hold."),
    allow_small_splits: bool = typer.Option(
        False, "--allow-small-splits", help="Run even with a split below the minimum (the report flags it)."
    ),
    search_attempts: int = typer.Option(16, "--search-attempts", min=0, help="Configuration-search budget in trials (0: none)."),
) -> None:
    """Run one generation of a lineage end to end on this machine."""
    from mindforge.cli.lineage import (
        _print_store_status,
        build_spec,
        split_config,
        start_lineage,
        ui_link,
        wait_lineage,
    )
    from mindforge.devstack import dev_up
    from mindforge.hcp import load_contract
    from mindforge.policy.models import bundled_contract, resolve_model
    from mindforge.policy.runner import PolicyServerProcess
    from mindforge.settings import get_settings

    # SIGTERM runs the clean-up below (worker and policy server stopped), as Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = get_settings()
    dev_up(settings, say=lambda m: console.print(f"[dim]{m}[/]"))
    get_settings.cache_clear()
    settings = get_settings()
    # the embedded server's model, resolved once here (a GGUF file is converted now): the
    # server and the trainer reuse the copy; with --policy-url the contract's model.id rules
    resolved = None if policy_url else resolve_model(model)
    shipped = bundled_contract(resolved.name if resolved else model) or "baseline.toml"
    contract = contract or REPO_ROOT / "hcp_contracts" / shipped
    hcp = load_contract(contract)
    if resolved is not None and hcp.model.id != resolved.name:
        raise InputError(
            contract, "model.id", f"is {hcp.model.id!r} but the embedded server will serve {resolved.name!r}"
        )
    task_paths = tasks or [REPO_ROOT / "tasks" / t for t in DEFAULT_TASKS]
    name = name or f"quickstart-{time.strftime('%Y%m%d-%H%M%S')}"
    logs = settings.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    server = None
    worker = None
    try:
        if not policy_url:
            console.print(f"serving {model} as {resolved.name} (log {logs / 'policy.log'}) ...")
            server = PolicyServerProcess(
                "mindforge.policy.server", ["--model", model], log_path=logs / "policy.log", ready_timeout_sec=600
            ).start()
            policy_url = server.base_url
        console.print(f"policy endpoint {policy_url}")
        worker_log = logs / f"worker-{name}.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "mindforge.cli.main", "worker"],
            stdout=worker_log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
        splits = split_config(selection, sealed, min_split_tasks, allow_small_splits)
        spec = build_spec(
            name, task_paths, contract, generations, attempts, splits, 0, policy_url, stages, 16,
            base_model=resolved.spec if resolved else None, search_attempts=search_attempts,
        )
        wid = asyncio.run(start_lineage(spec, settings))
        console.print(f"started lineage [bold]{name}[/]\nWeb UI: {ui_link(settings, wid)}")
        final = asyncio.run(wait_lineage(settings, wid, worker=worker, worker_log=worker_log))
        console.print(f"lineage {name}: {final.get('state')}")
        _print_store_status(name)
        console.print(f"artifacts: {settings.artifacts / 'runs'}\nstore: {settings.db_url}")
        _report(name)
    finally:
        if worker and worker.poll() is None:
            worker.terminate()
            worker.wait(60)
        if server:
            server.stop()


def _report(name: str) -> None:
    """Write the lineage's HTML report and say where it is."""
    from mindforge.cli.report import report_command

    report_command(name, "html", None)


if __name__ == "__main__":  # pragma: no cover
    typer.run(quickstart_command)
