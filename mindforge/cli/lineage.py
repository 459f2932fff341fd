"""``mindforge lineage``: start, watch, pause, resume and cancel lineages on Temporal.

This module talks to Temporal only through :mod:`mindforge.cli.temporal_client`; workflow classes are
named by string so the CLI never imports workflow code.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import typer
from rich.table import Table

from mindforge.cli.curriculum import (
    FAMILIES_HELP,
    INSTANCES_HELP,
    POWER_BASELINE_HELP,
    SEALED_FAMILIES_HELP,
    SEALED_TASKS_HELP,
    SELECTION_INSTANCES_HELP,
    TARGET_LIFT_HELP,
    curriculum_spec,
)
from mindforge.cli.lineage_status import lineage_row
from mindforge.cli.output import EXAMPLES_HELP, GUIDANCE_HELP, make_console, print_json, status_line
from mindforge.errors import InfraError, InputError

app = typer.Typer(
    help="Lineages: N generations of a model-harness pair, run durably on Temporal.", no_args_is_help=True
)
# tables stay readable when the output goes to a file or a pipe (Rich assumes 80 columns there)
console = make_console()


def workflow_id_for(name: str) -> str:
    """The LineageWorkflow id of lineage ``name``."""
    return f"lineage-{name}"


def ui_link(settings, workflow_id: str) -> str:
    """Temporal Web UI link of a workflow."""
    return f"{settings.temporal_ui_url}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}"


def split_config(selection: float, sealed: float, min_tasks: int = 5, allow_small: bool = False):
    """The ``--selection`` / ``--sealed`` / ``--min-split-tasks`` / ``--allow-small-splits`` options as a SplitConfig.

    Raises:
        InputError: the fractions leave no room for the search split.
    """
    from mindforge.evaluation import SplitConfig

    try:
        return SplitConfig(
            selection_fraction=selection, sealed_fraction=sealed, min_tasks=min_tasks, allow_small_splits=allow_small
        )
    except ValueError as exc:
        reason = str(exc).splitlines()[-1].removeprefix("  Value error, ")
        raise InputError("--selection/--sealed", "splits", reason) from None


def check_pool_splits(name: str, tasks: list[Path], splits, extra: dict[str, int] | None = None) -> dict:
    """Load the pool and check its split sizes before a lineage starts (the worker checks again).

    Args:
        name: the lineage's name (the split key).
        tasks: the task folders split by the fractions.
        splits: the :class:`mindforge.evaluation.SplitConfig`.
        extra: split name -> tasks added besides them (sealed tasks, family instances).

    Returns:
        split name -> task count.

    Raises:
        InputError: a task does not load.
        SplitTooSmallError: a split below ``splits.min_tasks`` without ``allow_small_splits``
            (the message names the split and the numbers).
    """
    from mindforge.evaluation import PoolSplit, check_split_sizes

    counts = pool_counts(name, tasks, splits)
    for key, n in (extra or {}).items():
        counts[key] = counts.get(key, 0) + n
    check_split_sizes({PoolSplit(k): v for k, v in counts.items()}, splits)
    return counts


def pool_counts(name: str, tasks: list[Path], splits) -> dict[str, int]:
    """Split name -> tasks of ``tasks`` on it (assigned as ``prepare_lineage`` will; not checked).

    Raises:
        InputError: a task does not load.
    """
    from mindforge.evaluation import SplitCandidate, assign_splits, split_counts
    from mindforge.tasks.loader import load_tasks

    loaded = load_tasks(tasks) if tasks else []
    assignment = assign_splits(
        [SplitCandidate(task_hash=t.content_hash, task_id=t.id, category=t.config.metadata.category) for t in loaded],
        splits,
        split_key=name,
    )
    return {k.value: v for k, v in split_counts(assignment).items()}


def build_spec(
    name, tasks, contract, generations, attempts, splits, seed, policy_url, stages, batch_size, base_model=None,
    search_attempts=None, audit_judge=False, update_loop=None, examples=None, say=None, experience=True,
    curriculum=None, sealed_tasks=None, power_baseline=None, evaluation=None, target_lift=None,
):
    """Validate CLI input into a :class:`LineageSpec` (paths made absolute, contract and split sizes checked).

    ``base_model`` is what the Update stage trains a LoRA on: a model spec as ``--model``
    takes (``tiny``, ``smollm2``, a ``.gguf`` file, a model directory or a hub id),
    resolved by :func:`mindforge.policy.engines.models.resolve_model` to the very weights the
    policy server loads for it (a GGUF file's converted copy, the tiny model's
    directory). Default: the contract's ``model.id`` (a bundled model's served name
    resolves to that model). ``splits`` is a :class:`mindforge.evaluation.SplitConfig`
    (:func:`split_config`). ``search_attempts`` caps configuration
    search per generation (None: the default budget; 0: no search). ``audit_judge`` sends
    the failures audit rules cannot decide to the policy endpoint as a judge. ``examples``
    is a folder of the user's worked examples (``--examples DIR``,
    :func:`mindforge.search.library.load_example_folder`) that search may add; None: none.
    ``say`` (e.g. ``console.print``) is given each split's size and each gate's rule and
    minimum detectable lift at 80% power (:func:`check_gates`). ``experience`` False turns the
    experience library's growth rounds off (``ExpansionSpec.experience.enabled``; on by default).
    ``update_loop`` overrides :class:`mindforge.payloads.UpdateSpec` fields of the
    on-policy loop (``iterations``, ``group_size``, ``tasks_per_iteration``,
    ``time_budget_sec``); None values keep the spec's defaults.

    ``curriculum`` is a :class:`mindforge.payloads.CurriculumSpec`
    (:func:`mindforge.cli.curriculum.curriculum_spec`), the family instances the pool draws;
    with ``power_baseline`` set, its selection instances are sized so that the gates detect
    ``target_lift`` (default 0.10) with 80% power against a parent passing that share of its
    trials (:func:`mindforge.cli.curriculum.size_curriculum_selection`). ``sealed_tasks`` are task
    folders pinned to the sealed split (the sealed-tasks reading). ``evaluation`` overrides
    :class:`mindforge.payloads.EvaluationSpec` fields (``attempts``, ``race_budget``,
    ``successor_candidates``); None values keep the defaults.

    Raises:
        InputError: a missing path, an invalid contract, an unknown stage, a bad
            worked-example file (naming the file and field), a worked example that restates
            a pool task's reference solution (:mod:`mindforge.cli.examples_check`), or a base model spec that
            names no loadable model (``ModelSpecError``).
        SplitTooSmallError: a split below the minimum (see :func:`check_pool_splits`).
        InputError: a gate that cannot pass at any lift (see :func:`check_gates`).
    """
    from mindforge.hcp import load_contract
    from mindforge.payloads import (
        EvaluationSpec,
        ExpansionSpec,
        ExperienceSpec,
        LineageSpec,
        RuntimeSpec,
        SearchBudgetSpec,
        Stage,
        UpdateSpec,
    )

    for option, paths in (("--tasks", tasks), ("--sealed-tasks", sealed_tasks or [])):
        for p in paths:
            if not p.exists():
                raise InputError(p, option, "no such file or directory")
    if not tasks and curriculum is None:
        raise InputError("--tasks", "tasks", "a lineage needs tasks (--tasks) or task families (--families)")
    hcp = load_contract(contract)  # fails early with file + key path + reason
    from mindforge.policy.engines.models import resolve_model

    base_model_path = resolve_model(base_model or hcp.model.id).hf_dir
    try:
        stage_list = [Stage(s.strip()) for s in stages.split(",") if s.strip()]
    except ValueError as exc:
        raise InputError("--stages", "stages", str(exc)) from None
    from mindforge.cli.examples_check import checked_seeds

    seeded = checked_seeds(contract, hcp, examples, [*tasks, *(sealed_tasks or [])], curriculum)
    search = (
        SearchBudgetSpec(examples=seeded) if search_attempts is None
        else SearchBudgetSpec(enabled=False, examples=seeded) if search_attempts == 0
        else SearchBudgetSpec(max_attempts=search_attempts, examples=seeded)
    )
    spec = LineageSpec(
        name=name,
        tasks=[str(p.resolve()) for p in tasks],
        contract_path=str(contract.resolve()),
        generations=generations,
        stages=stage_list,
        runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=batch_size),
        expansion=ExpansionSpec(
            attempts=attempts, audit_judge=audit_judge, search=search, experience=ExperienceSpec(enabled=experience)
        ),
        update=UpdateSpec(
            base_model_path=base_model_path, **{k: v for k, v in (update_loop or {}).items() if v is not None}
        ),
        evaluation=EvaluationSpec(
            splits=splits, seed=seed, **{k: v for k, v in (evaluation or {}).items() if v is not None}
        ),
        curriculum=curriculum,
        sealed_tasks=[str(p.resolve()) for p in sealed_tasks or []],
    )
    lines = size_and_check(spec, tasks, [Path(p) for p in spec.sealed_tasks], power_baseline, target_lift)
    if say is not None:
        for line in lines:
            say(line)
    return spec


def size_and_check(
    spec, tasks: list[Path], sealed_tasks: list[Path], power_baseline: float | None, target_lift: float | None = None
) -> list[str]:
    """Size a curriculum's selection split (when asked), check every split's size and every gate; the lines to print.

    With ``power_baseline`` set, the selection instances are sized so that the gates detect
    ``target_lift`` (default 0.10) over a parent passing that rate with 80% power.

    Raises:
        InputError: a task does not load, or a gate cannot pass (or no size reaches the power).
        SplitTooSmallError: a split below the minimum.
    """
    from mindforge.cli.curriculum import curriculum_counts, size_curriculum_selection
    from mindforge.tasks.loader import load_tasks

    extra = {"sealed": len(load_tasks(sealed_tasks))} if sealed_tasks else {}
    lines = []
    if spec.curriculum is not None:
        if power_baseline is not None:
            fixed = pool_counts(spec.name, tasks, spec.evaluation.splits).get("selection", 0)
            gates = lambda k: planned_gates(spec, k)  # noqa: E731 - the gates at k selection tasks
            lines.append(size_curriculum_selection(spec, fixed, gates, baseline=power_baseline, lift=target_lift))
        for key, n in curriculum_counts(spec.curriculum).items():
            extra[key] = extra.get(key, 0) + n
        cur = spec.curriculum
        lines.append(
            f"curriculum: {cur.instances} instance(s) of each of {len(cur.families)} families from {cur.families_dir}, "
            f"{cur.selection_instances} more of each training family for selection; held out whole: "
            f"{', '.join(cur.sealed_families) or 'none'}"
        )
    counts = check_pool_splits(spec.name, tasks, spec.evaluation.splits, extra)
    return lines + check_gates(spec, counts)


def planned_gates(spec, selection_tasks: int) -> list:
    """The gates ``spec`` runs, with ``selection_tasks`` tasks on the selection split."""
    from mindforge.evaluation.power import configured_gates
    from mindforge.payloads import Stage

    ev = spec.evaluation
    return configured_gates(
        selection_tasks,
        successor=Stage.EXPANSION in spec.stages and spec.expansion.search.enabled,
        promotion=Stage.UPDATE in spec.stages,
        attempts=ev.attempts, min_tasks=ev.splits.min_tasks, candidates=ev.successor_candidates,
        race_budget=ev.race_budget, margin=spec.update.promotion_margin,
    )


def check_gates(spec, counts: dict) -> list[str]:
    """Each split's size and each gate's power at the configured trials; refuses a gate that cannot pass.

    The power is computed (:func:`mindforge.evaluation.power.gate_power`): exact binomial
    against a baseline that passes nothing, simulated with a fixed seed over a baseline
    passing 25% of its trials.

    Args:
        spec: the lineage spec.
        counts: split name -> task count (:func:`check_pool_splits`).

    Returns:
        lines to print.

    Raises:
        InputError: a gate that runs cannot pass at any lift (the selection split holds
            no task, or fewer than ``--min-split-tasks``), or would decide on fewer than 5
            paired tasks (``--min-split-tasks`` below 5), naming the option and the numbers.
    """
    from mindforge.evaluation.power import GateCannotPassError, gate_power

    ev = spec.evaluation
    gates = planned_gates(spec, counts.get("selection", 0))
    lines = ["splits: " + ", ".join(f"{k} {counts.get(k, 0)} tasks" for k in ("search", "selection", "sealed"))]
    for rule in gates:
        try:
            lines.append(gate_power(rule, seed=ev.seed).describe())
        except GateCannotPassError as exc:
            raise InputError(exc.field, "evaluation.splits", exc.reason) from None
    if any(r.gate == "successor" for r in gates):
        from mindforge.evaluation.race import candidate_attempts

        each = candidate_attempts(ev.successor_candidates, ev.race_budget)
        if ev.successor_candidates == 1:
            race = f"the search's best contract races the parent on selection, {each} attempt(s) per task"
        else:
            race = (
                f"the search's best {ev.successor_candidates} contracts race the parent on selection, {each} "
                f"attempt(s) per task each, each judged at the Bonferroni level over {ev.successor_candidates}"
            )
        lines.append(f"  (successor: {race}; the race stops once its outcome is settled)")
    return lines


async def start_lineage(spec, settings) -> str:
    """Start the LineageWorkflow for ``spec``; returns its workflow id."""
    from mindforge.cli.temporal_client import connect, search_attributes
    from mindforge.payloads import ORCHESTRATION_QUEUE, LineageInput

    client = await connect(settings)
    wid = workflow_id_for(spec.name)
    await client.start_workflow(
        "LineageWorkflow",
        LineageInput(lineage_id=spec.name, spec=spec),
        id=wid,
        task_queue=ORCHESTRATION_QUEUE,
        search_attributes=search_attributes(spec.name),
    )
    return wid


def extension_input(name: str, generations: int, settings):
    """The ``LineageInput`` that adds ``generations`` to stored lineage ``name`` (its stored spec, ``extend`` set).

    The worker's ``continue_lineage`` reads the pool, the next index and the pairs from
    the store when the run starts; the spec here only makes the input whole.

    Raises:
        InputError: no lineage ``name`` in the store.
    """
    from mindforge.errors import InputError
    from mindforge.payloads import LineageInput, LineageSpec
    from mindforge.store import engine as se
    from mindforge.store import lineages

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        lin = lineages.get_lineage(session=s, lineage_id=name)
        if lin is None:
            raise InputError("--name", "name", f"no lineage {name!r} in {settings.db_url} to continue")
        spec = LineageSpec.model_validate({k: v for k, v in lin.spec.items() if k in LineageSpec.model_fields})
    return LineageInput(lineage_id=name, spec=spec, extend=generations)


async def wait_lineage(
    settings, wid: str, show: bool = True, worker=None, worker_log: Path | None = None, policy=None
) -> dict:
    """Wait for a lineage workflow to finish, showing the query status; returns the final status.

    The status is a spinner on a terminal and plain lines in a file or pipe (:func:`status_line`).

    Args:
        show: show the status at all.
        worker: the worker process this command started, if any; its exit ends the wait.
        worker_log: that worker's log file, quoted when it exits.
        policy: the policy server this command started (a
            :class:`~mindforge.policy.server.runner.PolicyServerProcess`), if any: this
            command owns it, so when it exits (a crash, an out-of-memory kill) it is started
            again on the same port; the trials it failed meanwhile have no reward and run again.

    Raises:
        InfraError: the worker this command started exited before the lineage finished, or
            the Temporal server stopped answering for longer than the client's retry
            window (the lineage stays on the server; the error says how to look at it).
    """
    from mindforge.cli.temporal_client import connect, workflow_result

    client = await connect(settings)
    handle = client.get_workflow_handle(wid)
    with status_line(console, f"{wid}: starting", enabled=show) as set_status:
        result_task = asyncio.create_task(workflow_result(settings, handle))
        while not result_task.done():
            await asyncio.sleep(2)
            if worker is not None and worker.poll() is not None:
                result_task.cancel()
                tail = worker_log.read_text(errors="replace").splitlines()[-5:] if worker_log else []
                raise InfraError(
                    f"the worker exited with status {worker.returncode} before the lineage finished; "
                    f"log {worker_log}:\n" + "\n".join(tail)
                )
            if policy is not None and policy.exited() is not None:
                began = time.monotonic()
                code = await asyncio.to_thread(policy.revive)
                console.print(
                    f"the policy server exited (status {code}); started again on {policy.base_url} "
                    f"in {time.monotonic() - began:.0f} s"
                )
            try:
                st = await handle.query("status")
                shown = min(st["generation"], st["generations"] - 1)  # indices from 0, as in the tables
                set_status(f"{wid}: {st['state']} generation {shown} (of {st['generations']}, first is 0)")
            except Exception:  # noqa: BLE001 - between runs (continue-as-new) the query may miss
                pass
        result = result_task.result()
    return result if isinstance(result, dict) else json.loads(json.dumps(result, default=lambda o: o.__dict__))


@app.command()
def start(
    name: str = typer.Option(..., "--name", help="Unique lineage name."),
    tasks: list[Path] = typer.Option(
        None, "--tasks", help="Task directories or folders of them, split by --selection/--sealed."
    ),
    contract: Path = typer.Option(..., "--contract", help="Root HCP contract (TOML)."),
    families: Path = typer.Option(None, "--families", help=FAMILIES_HELP),
    instances: int = typer.Option(5, "--instances", min=1, help=INSTANCES_HELP),
    sealed_families: int = typer.Option(2, "--sealed-families", min=0, help=SEALED_FAMILIES_HELP),
    selection_instances: int = typer.Option(None, "--selection-instances", min=1, help=SELECTION_INSTANCES_HELP),
    power_baseline: float = typer.Option(0.25, "--power-baseline", min=0.0, max=0.95, help=POWER_BASELINE_HELP),
    target_lift: float = typer.Option(0.10, "--target-lift", min=0.01, max=0.9, help=TARGET_LIFT_HELP),
    sealed_tasks: list[Path] = typer.Option(None, "--sealed-tasks", help=SEALED_TASKS_HELP),
    generations: int = typer.Option(1, "--generations", min=1),
    attempts: int = typer.Option(2, "--attempts", min=1, help="Trials per task per generation (group size)."),
    selection: float = typer.Option(
        0.2, "--selection", min=0.0, max=0.99, help="Share of tasks on the selection split (decisions)."
    ),
    sealed: float = typer.Option(
        0.2, "--sealed", min=0.0, max=0.99, help="Share of tasks on the sealed split (the reported lift only)."
    ),
    min_split_tasks: int = typer.Option(5, "--min-split-tasks", min=0, help="Fewest tasks each split must hold."),
    allow_small_splits: bool = typer.Option(
        False, "--allow-small-splits", help="Start even with a split below the minimum (the report flags it)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of bootstrap intervals and sampling."),
    policy_url: str = typer.Option(None, "--policy-url", help="OpenAI-compatible endpoint (.../v1)."),
    stages: str = typer.Option("discovery,expansion,update", "--stages", help="Stages to run, comma-separated."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Trials per run_trials activity."),
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
    iterations: int = typer.Option(
        None, "--iterations", min=0,
        help="Update: on-policy GRPO iterations under the training contract (0: one offline update; default 4).",
    ),
    group_size: int = typer.Option(None, "--group-size", min=2, help="Update: rollouts per task per draw (default 8)."),
    update_time_budget: float = typer.Option(
        None, "--update-time-budget", min=1.0, help="Update: deadline in seconds; no draw or step runs past it."
    ),
    guidance: bool = typer.Option(
        None, "--guidance/--no-guidance", help=GUIDANCE_HELP + " (default: off)."
    ),
    examples: Path = typer.Option(None, "--examples", help=EXAMPLES_HELP),
    experience: bool = typer.Option(
        True, "--experience/--no-experience",
        help="Grow the lineage's experience library (validated search-split solutions) in every Expansion.",
    ),
    wait: bool = typer.Option(False, "--wait", help="Wait for the lineage to finish, with progress."),
) -> None:
    """Start a lineage and print its Temporal Web UI link."""
    from mindforge.settings import get_settings

    settings = get_settings()
    splits = split_config(selection, sealed, min_split_tasks, allow_small_splits)
    drawn = None
    if families is not None:
        drawn = curriculum_spec(
            name, families, instances=instances, sealed_families=sealed_families, sealed_fraction=sealed,
            selection_instances=selection_instances, seed=seed,
        )
    spec = build_spec(
        name, list(tasks or []), contract, generations, attempts, splits, seed, policy_url, stages, batch_size,
        base_model, search_attempts, audit_judge,
        {"iterations": iterations, "group_size": group_size, "time_budget_sec": update_time_budget,
         "guidance": guidance},
        examples, say=console.print, experience=experience, curriculum=drawn, sealed_tasks=list(sealed_tasks or []),
        power_baseline=power_baseline if drawn is not None and selection_instances is None else None,
        target_lift=target_lift,
    )
    wid = asyncio.run(start_lineage(spec, settings))
    console.print(f"started lineage [bold]{name}[/] ({wid})\nWeb UI: {ui_link(settings, wid)}")
    if wait:
        final = asyncio.run(wait_lineage(settings, wid))
        console.print(f"lineage {name}: {final.get('state')}")
        _print_store_status(name)


@app.command()
def extend(
    name: str = typer.Argument(..., help="A lineage in the store whose runs have ended."),
    generations: int = typer.Option(1, "--generations", min=1, help="Generations to add."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run to finish, with progress."),
) -> None:
    """Add generations to an existing lineage: from its last pair, on the same splits and sealed tasks."""
    from mindforge.cli.temporal_client import connect, search_attributes
    from mindforge.payloads import ORCHESTRATION_QUEUE
    from mindforge.settings import get_settings

    settings = get_settings()
    arg = extension_input(name, generations, settings)
    wid = workflow_id_for(name)

    async def go() -> None:
        client = await connect(settings)
        await client.start_workflow(
            "LineageWorkflow", arg, id=wid, task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(name)
        )

    asyncio.run(go())
    console.print(
        f"extending lineage [bold]{name}[/] by {generations} generation(s) ({wid})\nWeb UI: {ui_link(settings, wid)}"
    )
    if wait:
        final = asyncio.run(wait_lineage(settings, wid))
        console.print(f"lineage {name}: {final.get('state')}")
        _print_store_status(name)


def _print_store_status(name: str, as_json: bool = False) -> None:
    """Print lineage ``name`` from the store (:func:`mindforge.cli.lineage_status.print_status`)."""
    from mindforge.cli.lineage_status import print_status

    print_status(name, console, ui_link, workflow_id_for(name), as_json=as_json)


_JSON_HELP = "Print one JSON document instead of a table."


@app.command()
def status(
    name: str = typer.Argument(..., help="Lineage name."),
    as_json: bool = typer.Option(False, "--json", help=_JSON_HELP),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Then every figure in words, with its reason (what the main job used to print)."
    ),
) -> None:
    """Show a lineage's generations and which stages ran."""
    _print_store_status(name, as_json)
    if verbose and not as_json:
        _print_results_text(name)


def _print_results_text(name: str) -> None:
    """The long account of each generation and sealed reading (:func:`mindforge.cli.results.results_lines`)."""
    from mindforge.cli.results import results_lines
    from mindforge.settings import get_settings
    from mindforge.store import engine as se

    with se.session_scope(se.init_db(get_settings().db_url)) as s:
        for line in results_lines(s, name):
            console.print(line, highlight=False)


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help=_JSON_HELP)) -> None:
    """List lineages in the store."""
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages

    eng = se.init_db(get_settings().db_url)
    with se.session_scope(eng) as s:
        found = lineages.list_lineages(session=s)
        if as_json:
            return print_json([lineage_row(lin) for lin in found])
        table = Table(title="lineages")
        for col in ("name", "status", "generation", "workflow", "created"):
            table.add_column(col)
        for lin in found:
            table.add_row(
                lin.name, str(lin.status), str(lin.current_generation), lin.workflow_id or "", str(lin.created_at)[:19]
            )
    console.print(table)


def _signal(name: str, signal: str) -> None:
    """Send ``signal`` to the lineage's workflow.

    Raises:
        InputError: no workflow of that lineage runs on the server (unknown or ended).
    """
    from mindforge.cli.temporal_client import signal_workflow
    from mindforge.errors import InputError
    from mindforge.settings import get_settings

    settings = get_settings()

    async def go() -> None:
        if not await signal_workflow(settings, workflow_id_for(name), signal):
            raise InputError(
                f"lineage {name}", "", f"no running workflow {workflow_id_for(name)} to {signal} (unknown or ended)"
            )

    asyncio.run(go())
    console.print(f"sent {signal} to lineage {name}\nWeb UI: {ui_link(settings, workflow_id_for(name))}")


@app.command()
def pause(name: str = typer.Argument(...)) -> None:
    """Pause before the next generation starts."""
    _signal(name, "pause")


@app.command()
def resume(name: str = typer.Argument(...)) -> None:
    """Resume a paused lineage."""
    _signal(name, "resume")


@app.command()
def cancel(name: str = typer.Argument(...)) -> None:
    """Cancel the running generation and end the lineage."""
    _signal(name, "cancel")


def wait_for_status(name: str, wanted: set[str], timeout_sec: float) -> str:
    """Poll the store until the lineage's status is in ``wanted`` (for scripts and tests)."""
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages

    eng = se.init_db(get_settings().db_url)
    deadline = time.monotonic() + timeout_sec
    status = ""
    while time.monotonic() < deadline:
        with se.session_scope(eng) as s:
            lin = lineages.get_lineage(session=s, lineage_id=name)
            status = str(lin.status) if lin else ""
        if status in wanted:
            return status
        time.sleep(1)
    return status
