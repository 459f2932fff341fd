"""``mindforge quickstart``: the README's main job.

Brings the dev stack up, serves the policy (the embedded server, unless ``--policy-url``
points at one that runs already, e.g. vLLM), runs a worker, starts a lineage on instances of the bundled task families
(``tasks/families``, two held out whole) with 12 micro tasks pinned to the sealed split
(``--no-curriculum``: 20 micro tasks only), and runs as many generations as fit in the
wall-time budget (:func:`run_generations`), then prints what each generation found - the
base contract's success rate, search-set coverage, the successor chosen on the selection
split, the Update's outcome and the sealed lift with its interval - and the compounding
table (every pair on the one frozen sealed split, its lifts over the previous pair and
over the root with 95% intervals and task counts), and where the report, the artifacts
and the Temporal Web UI are. The worker and the policy server it started are stopped at
the end; Temporal, Ray and Docker stay up (``mindforge dev down`` stops them).

**Generations and the time budget.** Generation 0 runs as a one-generation lineage; each
further generation is added with ``extend`` (as ``mindforge lineage extend`` does: from
the last pair, same pool and frozen sealed split) only when the time spent so far plus
the longest generation so far fits in ``--time-budget`` and fewer than ``--generations``
ran. The budget is a prediction from measured generations, checked here between
generations: no workflow reads a clock, and a generation that started always finishes.
A SmolLM2 generation of the default curriculum took 778 s on 2 cores (run ``mj5``,
2026-12-05: 23.7 rollouts a minute, 0.43x of what the model allows at its prompts),
so the default 900 s budget fits one; the selection split is sized for the gates to detect
a lift of 0.25 with 80% power (``--target-lift``), which the harness gains of a
worked-example library clear.

By default the model is SmolLM2-135M-Instruct (``--model smollm2``, bundled as a GGUF
file) served by llama.cpp for generation, while the Update stage trains its LoRA adapter
on the same weights with transformers + PEFT; ``--model tiny`` is a one-minute smoke run
on random weights that exercises the loop and solves nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import typer
from rich.markup import escape

from mindforge.cli.common import ENGINE_HELP, choose_engine
from mindforge.cli.curriculum import (
    FAMILIES_HELP,
    INSTANCES_HELP,
    POWER_BASELINE_HELP,
    SEALED_FAMILIES_HELP,
    SEALED_TASKS_HELP,
    SELECTION_INSTANCES_HELP,
    TARGET_LIFT_HELP,
)
from mindforge.cli.output import EXAMPLES_HELP, GUIDANCE_HELP, make_console, quiet_progress_bars
from mindforge.errors import InputError
from mindforge.settings import REPO_ROOT

console = make_console()

#: the main job's pinned sealed tasks: the first three tasks of four skill categories of tasks/micro as
#: MAIN_JOB_TASKS lists them; those the lineage's mined solutions restate are read apart (restated tasks:
#: the bundled families' chmod and mkdir -p restate the last three and make-directory), the rest are the
#: sealed-tasks reading (transfer to hand-written tasks)
SEALED_TASKS = [
    "make-directory", "write-hello-file", "copy-file",
    "first-lines", "last-lines", "sort-names",
    "count-lines", "count-words", "count-files",
    "make-executable", "private-key-mode", "directory-mode",
]  # fmt: skip

#: 20 tasks of tasks/micro, five of each of four skill categories: the main job's pool with
#: --tasks-only (with --selection 0.25 --sealed 0.25, five selection and five sealed tasks, ten to search)
MAIN_JOB_TASKS = [
    # files
    "make-directory", "write-hello-file", "copy-file", "rename-file", "create-empty-file",
    # text
    "first-lines", "last-lines", "sort-names", "uppercase-text", "grep-error-lines",
    # counting
    "count-lines", "count-words", "count-files", "count-matching-lines", "count-unique-lines",
    # permissions
    "make-executable", "private-key-mode", "directory-mode", "remove-group-write", "change-owner",
]  # fmt: skip


def quickstart_command(
    model: str = typer.Option(
        "smollm2", "--model",
        help="Model for the embedded policy server and the Update stage: 'smollm2' (bundled SmolLM2-135M-Instruct), "
        "'tiny' (offline random weights: a smoke run that solves nothing), a local .gguf file, a model directory "
        "or a hub id.",
    ),
    engine: str = typer.Option(
        "auto", "--engine", help=ENGINE_HELP + " Training always runs on transformers + PEFT."
    ),
    contract: Path = typer.Option(
        None,
        "--contract",
        help="Root HCP contract; default tiny.toml / smollm2.toml for those models, else baseline.toml.",
    ),
    policy_url: str = typer.Option(
        None, "--policy-url", help="Use this running endpoint (e.g. vLLM) instead of the embedded server."
    ),
    tasks: list[Path] = typer.Option(
        None, "--tasks",
        help="Hand-written tasks split by --selection/--sealed, beside the curriculum (with --no-curriculum, default: "
        "20 tasks of tasks/micro).",
    ),
    curriculum: bool = typer.Option(
        True, "--curriculum/--no-curriculum",
        help="Draw the pool from task families (default), or run on hand-written tasks only.",
    ),
    families: Path = typer.Option(None, "--families", help=FAMILIES_HELP + " Default: tasks/families."),
    instances: int = typer.Option(3, "--instances", min=1, help=INSTANCES_HELP),
    sealed_families: int = typer.Option(2, "--sealed-families", min=0, help=SEALED_FAMILIES_HELP),
    selection_instances: int = typer.Option(None, "--selection-instances", min=1, help=SELECTION_INSTANCES_HELP),
    power_baseline: float = typer.Option(0.0, "--power-baseline", min=0.0, max=0.95, help=POWER_BASELINE_HELP),
    target_lift: float = typer.Option(
        0.25, "--target-lift", min=0.01, max=0.9,
        help=TARGET_LIFT_HELP + " The main job's default, 0.25, fits its time; 0.10 needs three times the trials.",
    ),
    sealed_tasks: list[Path] = typer.Option(
        None, "--sealed-tasks", help=SEALED_TASKS_HELP + " Default with the curriculum: 12 tasks of tasks/micro."
    ),
    name: str = typer.Option(None, "--name", help="Lineage name (default quickstart-<time>)."),
    generations: int = typer.Option(
        3, "--generations", min=1,
        help="Most generations to run; each after the first starts only if it is predicted to fit --time-budget.",
    ),
    time_budget: float = typer.Option(
        900.0, "--time-budget", min=0.0,
        help="Seconds from this command's start (set-up included) after which no new generation starts: one starts "
        "when the time so far plus the longest generation so far fits (0: no budget, run all --generations). A "
        "started generation always finishes, so the run can pass the budget by up to one generation; "
        "docs/main-job.md gives the measured length of a generation on 2 cores.",
    ),
    attempts: int = typer.Option(1, "--attempts", min=1, help="Base-evaluation trials per search task."),
    selection_attempts: int = typer.Option(
        2, "--selection-attempts", min=1, help="Attempts per selection task of the parent pair and the trained pair."
    ),
    sealed_attempts: int = typer.Option(1, "--sealed-attempts", min=1, help="Attempts per sealed task of each pair."),
    sealed_instance_attempts: int = typer.Option(
        None, "--sealed-instance-attempts", min=1,
        help="Attempts per sealed-instances task of each pair (default with the curriculum: sized so that a lift of "
        "--target-lift shows a lower bound above 0 with 80% power).",
    ),
    race: int = typer.Option(1, "--race", min=1, help="Search contracts that race the parent on selection."),
    race_budget: int = typer.Option(
        2, "--race-budget", min=1, help="Attempts per selection task the racing contracts share."
    ),
    stages: str = typer.Option("discovery,expansion,update", "--stages"),
    selection: float = typer.Option(
        0.25, "--selection", min=0.0, max=0.99, help="Share of tasks on the selection split (decisions)."
    ),
    sealed: float = typer.Option(
        0.25, "--sealed", min=0.0, max=0.99, help="Share of tasks on the sealed split (the reported lift)."
    ),
    min_split_tasks: int = typer.Option(5, "--min-split-tasks", min=0, help="Fewest tasks each split must hold."),
    allow_small_splits: bool = typer.Option(
        False, "--allow-small-splits", help="Run even with a split below the minimum (the report flags it)."
    ),
    search_attempts: int = typer.Option(
        72, "--search-attempts", min=0, help="Configuration-search budget in trials per generation (0: none)."
    ),
    iterations: int = typer.Option(
        2, "--iterations", min=0, help="Update: on-policy GRPO iterations under the training contract (0: offline)."
    ),
    group_size: int = typer.Option(4, "--group-size", min=2, help="Update: rollouts per task per draw."),
    update_time_budget: float = typer.Option(
        120.0, "--update-time-budget", min=1.0, help="Update: deadline (s) a generation; no draw or step runs past it."
    ),
    guidance: bool = typer.Option(True, "--guidance/--no-guidance", help=GUIDANCE_HELP + "."),
    examples: Path = typer.Option(None, "--examples", help=EXAMPLES_HELP),
) -> None:
    """Run a lineage end to end on this machine, as many generations as fit, and print what it found.

    Exit status 0 when the run and its report completed; 3 when the run completed but a
    section of its HTML report failed to render (the summary is printed, the report is
    written with the error in that section's place, and a warning names the file and each
    failed section); 2 on an input or infrastructure error.
    """
    from mindforge.cli.lineage import build_spec, split_config
    from mindforge.devstack import dev_up
    from mindforge.settings import get_settings

    # SIGTERM runs the clean-up below (worker and policy server stopped), as Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quiet_progress_bars()  # redirected to a file: plain lines, no tqdm bars (the GGUF conversion's)
    started = time.monotonic()
    settings = get_settings()
    dev_up(settings, say=lambda m: console.print(f"[dim]{m}[/]"))
    get_settings.cache_clear()
    settings = get_settings()
    resolved, engine, contract = root_model(model, engine, contract, policy_url)
    name = name or f"quickstart-{time.strftime('%Y%m%d-%H%M%S')}"
    splits = split_config(selection, sealed, min_split_tasks, allow_small_splits)
    pool = main_job_pool(
        name, tasks, sealed_tasks, curriculum, families,
        {"instances": instances, "sealed_families": sealed_families, "sealed_fraction": sealed,
         "selection_instances": selection_instances, "seed": 0},
    )
    # checks the pool's splits (and sizes the curriculum's selection split) before anything starts
    spec = build_spec(
        name, pool.tasks, contract, 1, attempts, splits, 0, policy_url, stages, 16,
        base_model=resolved.spec if resolved else None, search_attempts=search_attempts,
        update_loop={
            "iterations": iterations, "group_size": group_size, "tasks_per_iteration": 4,
            "time_budget_sec": update_time_budget, "guidance": guidance,
        },
        examples=examples, say=lambda line: console.print(line, highlight=False),
        curriculum=pool.curriculum, sealed_tasks=pool.sealed_tasks,
        power_baseline=power_baseline if pool.curriculum is not None and selection_instances is None else None,
        target_lift=target_lift,
        evaluation={
            "attempts": selection_attempts, "sealed_attempts": sealed_attempts, "successor_candidates": race,
            "race_budget": race_budget, "sealed_instance_attempts": sealed_instance_attempts,
        },
    )
    if spec.curriculum is not None and sealed_instance_attempts is None:
        from mindforge.cli.curriculum import size_sealed_instances

        console.print(size_sealed_instances(spec, lift=target_lift), highlight=False)
    run_with_services(spec, settings, MainJobServices(model, engine, resolved), generations, time_budget, started)


class MainJobServices:
    """What the main job serves: ``--model`` (None with ``--policy-url``), the engine, the resolved model."""

    def __init__(self, model: str, engine: str, resolved) -> None:
        self.model, self.engine, self.resolved = model, engine, resolved


def root_model(model: str, engine: str, contract: Path | None, policy_url: str | None):
    """The embedded server's model, its engine and the root contract's path, checked against each other.

    The model is resolved once here (a GGUF file is converted now): the server and the
    trainer reuse the copy; with ``--policy-url`` the contract's ``model.id`` rules.

    Returns:
        ``(resolved model or None, engine name or "external", contract path)``.

    Raises:
        InputError: the contract's ``model.id`` is not the model the embedded server serves.
        ModelSpecError: ``--model`` names no loadable model.
    """
    from mindforge.hcp import load_contract
    from mindforge.policy.engines.models import bundled_contract, resolve_model

    resolved = None if policy_url else resolve_model(model)
    engine = choose_engine(engine, resolved) if resolved is not None else "external"
    shipped = bundled_contract(resolved.name if resolved else model) or "baseline.toml"
    path = contract or REPO_ROOT / "hcp_contracts" / shipped
    hcp = load_contract(path)
    if resolved is not None and hcp.model.id != resolved.name:
        raise InputError(path, "model.id", f"is {hcp.model.id!r} but the embedded server will serve {resolved.name!r}")
    return resolved, engine, path


def run_with_services(
    spec, settings, services: MainJobServices, generations: int, time_budget: float, started: float
) -> None:
    """Start the policy server (unless ``spec`` names an endpoint) and a worker, run the generations, finish.

    The worker and the server are stopped at the end, on an error, on Ctrl-C and on
    SIGTERM; their logs are under ``<data dir>/logs/``.

    Raises:
        InfraError: the worker exited before a run ended.
    """
    from mindforge.cli.lineage import ui_link, wait_lineage
    from mindforge.policy.server.runner import PolicyServerProcess

    logs = settings.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    server = None
    worker = None
    name, policy_url = spec.name, spec.runtime.policy_url
    try:
        if services.resolved is not None:  # no --policy-url: the embedded server
            console.print(
                f"serving {services.model} as {services.resolved.name} on {services.engine} "
                f"(log {logs / 'policy.log'}) ..."
            )
            server = PolicyServerProcess(
                "mindforge.policy.server", ["--model", services.model, "--engine", services.engine],
                log_path=logs / "policy.log", ready_timeout_sec=600,
            ).start()
            policy_url = server.base_url
        spec.runtime.policy_url = policy_url
        console.print(f"policy endpoint {policy_url}")
        worker_log = logs / f"worker-{name}.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "mindforge.cli.main", "worker"],
            stdout=worker_log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
        wid = run_generations(
            spec, settings, generations, time_budget, started,
            wait=lambda w: asyncio.run(wait_lineage(settings, w, worker=worker, worker_log=worker_log, policy=server)),
        )
        _finish(name, settings, ui_link(settings, wid), started)
    finally:
        if worker and worker.poll() is None:
            worker.terminate()
            worker.wait(60)
        if server:
            server.stop()


class MainJobPool:
    """The main job's pool: hand-written tasks to split, tasks pinned sealed, and the curriculum (or None)."""

    def __init__(self, tasks: list[Path], sealed_tasks: list[Path], curriculum) -> None:
        self.tasks, self.sealed_tasks, self.curriculum = tasks, sealed_tasks, curriculum


def main_job_pool(
    name: str, tasks: list[Path] | None, sealed_tasks: list[Path] | None, curriculum: bool, families: Path | None,
    draw: dict,
) -> MainJobPool:
    """What the main job runs on: by default instances of tasks/families plus 12 micro tasks as sealed tasks.

    Args:
        name: the lineage's name (it keys the held-out families).
        tasks / sealed_tasks: ``--tasks`` / ``--sealed-tasks`` (None: the defaults).
        curriculum: draw from families (``--curriculum``) or not.
        families: ``--families`` (None: the bundled tasks/families).
        draw: :func:`mindforge.cli.curriculum.curriculum_spec`'s keyword arguments.

    Raises:
        InputError: a family does not load (naming its file and field).
    """
    from mindforge.cli.curriculum import curriculum_spec

    micro = REPO_ROOT / "tasks" / "micro"
    if not curriculum:
        return MainJobPool(tasks or [micro / t for t in MAIN_JOB_TASKS], sealed_tasks or [], None)
    spec = curriculum_spec(name, families or REPO_ROOT / "tasks" / "families", **draw)
    sealed = sealed_tasks or [micro / t for t in SEALED_TASKS]
    return MainJobPool(tasks or [], sealed, spec)


def next_fits(elapsed_sec: float, durations_sec: list[float], budget_sec: float) -> bool:
    """Whether one more generation is predicted to end within the budget.

    Args:
        elapsed_sec: seconds since the command started.
        durations_sec: wall seconds of each generation run so far (at least one).
        budget_sec: the wall-time budget in seconds (0: no budget).

    Returns:
        True when there is no budget, or when ``elapsed_sec`` plus the longest generation
        so far is at most ``budget_sec`` (later generations run more sealed pairs, so the
        longest is the safer guess).
    """
    return budget_sec <= 0 or elapsed_sec + max(durations_sec) <= budget_sec


def run_generations(spec, settings, most: int, budget_sec: float, started: float, wait: Callable[[str], object]) -> str:
    """Run generation 0 of ``spec``'s lineage, then add one generation at a time while the next fits the budget.

    Args:
        spec: the lineage spec (``generations`` 1: the first run makes generation 0).
        settings: the settings (Temporal address, store).
        most: most generations in all (>= 1).
        budget_sec: wall-time budget in seconds from ``started`` (0: none); see :func:`next_fits`.
        started: ``time.monotonic()`` when the command started.
        wait: waits for the workflow run of the given id to end.

    Returns:
        the lineage's workflow id.

    Raises:
        InfraError: from ``wait``, when the worker exits before a run ends.
    """
    from mindforge.cli.lineage import extension_input, start_lineage, ui_link, workflow_id_for
    from mindforge.cli.temporal_client import connect, search_attributes
    from mindforge.payloads import ORCHESTRATION_QUEUE

    async def extend() -> str:
        client = await connect(settings)
        handle = await client.start_workflow(
            "LineageWorkflow", extension_input(spec.name, 1, settings), id=workflow_id_for(spec.name),
            task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(spec.name),
        )
        return handle.id

    durations: list[float] = []
    wid = workflow_id_for(spec.name)
    for index in range(most):
        elapsed = time.monotonic() - started
        if index and not next_fits(elapsed, durations, budget_sec):
            console.print(
                f"no generation {index}: {elapsed:.0f} s spent + {max(durations):.0f} s (the longest generation) "
                f"would pass the {budget_sec:.0f} s budget"
            )
            break
        begun = time.monotonic()
        wid = asyncio.run(extend() if index else start_lineage(spec, settings))
        console.print(f"{'started' if not index else 'extended'} lineage [bold]{spec.name}[/]: generation {index}"
                      f"\nWeb UI: {ui_link(settings, wid)}")
        wait(wid)
        durations.append(time.monotonic() - begun)
        console.print(
            f"generation {index} done after {durations[-1]:.0f} s here"
            + (" (the lineage's start included: its tasks drawn and validated in sandboxes; the table's 'took'"
               " counts the generation alone)" if not index else "")
        )
    return wid


def _finish(name: str, settings, web_ui: str, started: float) -> None:
    """Print what the lineage found, write its HTML report, and say where everything is.

    The summary is printed before the report is written, so no report failure can lose
    it; a section that fails to render is shown in the report as an error and named here.

    Args:
        name: the lineage.
        settings: the settings (artifact root, store URL).
        web_ui: the Temporal Web UI link of the lineage's workflow.
        started: ``time.monotonic()`` when the command started.

    Raises:
        typer.Exit: with :data:`~mindforge.cli.report.REPORT_INCOMPLETE_EXIT` when the run
            completed and its report was written without some section (each named in a warning).
    """
    from mindforge.cli.report import REPORT_INCOMPLETE_EXIT, incomplete_lines, write_report

    _print_results(name)  # its first line is "lineage <name>: <state>"
    report = write_report(name, "html")
    console.print(
        f"report: {report.path}\nartifacts: {settings.artifacts / 'runs'}\nstore: {settings.db_url}\n"
        f"Web UI: {web_ui}\nwall time {time.monotonic() - started:.0f} s"
    )
    for line in incomplete_lines(str(report.path), report.failed):
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
    if report.failed:
        raise typer.Exit(REPORT_INCOMPLETE_EXIT)


def _print_results(name: str) -> None:
    """The last screen: a short table per generation and per sealed reading (:mod:`mindforge.cli.last_screen`).

    The long account of each generation is ``mindforge lineage status NAME --verbose`` and
    the report; the line after the tables says so.
    """
    from mindforge.cli.last_screen import last_screen
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages

    eng = se.init_db(get_settings().db_url)
    with se.session_scope(eng) as s:
        lin = lineages.get_lineage(session=s, lineage_id=name)
        if lin is None:
            raise InputError("lineage", "name", f"no lineage {name!r} in the store")
        for table in last_screen(s, lin.id):
            console.print(table)
    console.print(f"every figure with its reason: .venv/bin/mindforge lineage status {name} --verbose, and the report")


if __name__ == "__main__":  # pragma: no cover
    typer.run(quickstart_command)
