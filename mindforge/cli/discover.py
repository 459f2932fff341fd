"""``mindforge tasks discover``: run Discovery alone (propose, validate, admit to a folder)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from mindforge.cli.output import make_console
from mindforge.errors import InputError


def _pool_results(path: Path) -> tuple[set[str], set[str], dict[str, int]]:
    """Solved ids, failed ids and failure-class counts from a ``mindforge eval`` results file."""
    from pydantic import ValidationError

    from mindforge.trials.batch import EvalSummary

    try:
        summary = EvalSummary.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, "", f"cannot read results: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise InputError(
            path, ".".join(map(str, err["loc"])), f"not a `mindforge eval` results file: {err['msg']}"
        ) from exc
    solved = {r.task_id for r in summary.records if r.passed}
    failed = {r.task_id for r in summary.records} - solved
    classes: dict[str, int] = {}
    for r in summary.records:
        if r.failure_class is not None:
            classes[r.failure_class.value] = classes.get(r.failure_class.value, 0) + 1
    return solved, failed, classes


def discover_command(
    contract: Path = typer.Option(..., "--contract", "-c", help="HCP contract TOML file of the proposing pair."),
    count: int = typer.Option(..., "--count", "-k", min=1, help="Tasks to ask the model for."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for admitted tasks (and the discovery record JSON)."),
    tasks: Path = typer.Option(
        None, "--tasks", "-t", help="The pool: a folder of task directories (default: the bundled tasks)."
    ),
    base_url: str = typer.Option(
        None, "--base-url", help="Policy endpoint (.../v1); default from the contract's base_url_env or settings."
    ),
    attempts: int = typer.Option(
        2, "--attempts", "-n", min=1, help="Trials of the pair per valid proposal (difficulty estimate)."
    ),
    results: Path = typer.Option(
        None, "--results", help="`mindforge eval` results JSON on the pool: which tasks the pair solves and fails."
    ),
    generation: int = typer.Option(1, "--generation", min=0, help="Generation number used in the ids (g<N>-...)."),
    selection: float = typer.Option(
        0.0, "--selection", min=0.0, max=0.99, help="Share of admitted tasks put on the selection split."
    ),
    sealed: float = typer.Option(
        0.0, "--sealed", min=0.0, max=0.99, help="Share of admitted tasks put on the sealed split."
    ),
    split_key: str = typer.Option(
        "standalone", "--split-key", help="Key of the split assignment (a lineage uses its id)."
    ),
) -> None:
    """Ask the pair for new tasks, validate them, and write the admitted ones to --out.

    Prints a table of every proposal with its verdict and reason; the full record
    (admitted tasks with provenance, rejections with reasons) is written as
    ``<run id>.json`` in --out.
    """
    from mindforge.cli.common import task_progress
    from mindforge.discovery import DiscoveryConfig, run_discovery
    from mindforge.hcp import load_contract
    from mindforge.settings import get_settings
    from mindforge.trials.run import open_engine

    hcp = load_contract(contract)
    summary, index = _load_pool(tasks, out, results)
    settings = get_settings()
    engine, image_map = open_engine(settings)
    run_id = f"discovery-{uuid.uuid4().hex[:8]}"
    from mindforge.evaluation import SplitConfig

    try:
        splits = SplitConfig(selection_fraction=selection, sealed_fraction=sealed, min_tasks=0)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--selection/--sealed") from None
    config = DiscoveryConfig(count=count, generation=generation, attempts=attempts, splits=splits, split_key=split_key)
    console = make_console()
    verdicts = []
    with task_progress(True) as progress:
        bar = progress.add_task(f"discovery {hcp.ref}: proposing {count}", total=None)

        def on_verdict(v) -> None:
            verdicts.append(v)
            progress.update(bar, description=f"discovery {hcp.ref}: checked {len(verdicts)}")

        record = run_discovery(
            hcp,
            summary,
            index,
            engine=engine,
            image_map=image_map,
            artifact_root=settings.artifacts,
            staging_dir=settings.artifacts / "discovery" / run_id / "staging",
            config=config,
            client=base_url,
            run_id=run_id,
            on_trial=lambda _r: progress.advance(bar),
            on_verdict=on_verdict,
        )
    record_path = _write_admitted(record, out, run_id)
    console.print(_table(record))
    console.print(
        f"{len(record.admitted)} of {record.proposed} proposals admitted (asked for {record.requested}); "
        f"tasks in {out}; record: {record_path}"
    )


def _load_pool(tasks: Path | None, out: Path, results: Path | None) -> tuple[Any, Any]:
    """The pool the pair proposes against: its summary (with ``--results``) and its dedupe index.

    The pool is ``tasks`` (default: the bundled tasks) plus the tasks earlier runs admitted
    to ``out``.

    Raises:
        Exception: the load error of the first pool task that fails to load.
    """
    from mindforge.cli.common import load_task_dirs
    from mindforge.discovery import PoolIndex, summarise_pool
    from mindforge.settings import REPO_ROOT

    pool_paths = [tasks or REPO_ROOT / "tasks"]
    if out.is_dir() and any((d / "task.toml").is_file() for d in out.iterdir()):
        pool_paths.append(out)  # earlier runs' admissions count as pool tasks
    loaded, errors = load_task_dirs(pool_paths)
    if errors:
        raise errors[0][1]
    solved, failed, classes = _pool_results(results) if results else (set(), set(), {})
    summary = summarise_pool(loaded, solved=solved, failed=failed, failure_classes=classes)
    return summary, PoolIndex.from_tasks(loaded)


def _write_admitted(record: Any, out: Path, run_id: str) -> Path:
    """Move the admitted tasks into ``out`` and write the record there as ``<run id>.json``; returns its path."""
    from mindforge.discovery import move_task_dir

    out.mkdir(parents=True, exist_ok=True)
    record.admitted = [
        a.model_copy(update={"path": str(move_task_dir(Path(a.path), out / a.task_id))}) for a in record.admitted
    ]
    record_path = out / f"{run_id}.json"
    record_path.write_text(record.model_dump_json(indent=2), encoding="utf-8")
    return record_path


def _table(record) -> Table:
    table = Table(title=f"{record.run_id}  pair {record.pair.contract_ref} ({record.pair.contract_hash[:12]})")
    for col in ("proposal", "task", "verdict", "split", "pair success"):
        table.add_column(col, no_wrap=True)
    table.add_column("detail")
    for a in record.admitted:
        d = a.difficulty
        rate = "-" if d is None or d.success_rate is None else f"{d.successes}/{d.scored}"
        table.add_row(a.proposed_id, a.task_id, "[green]admitted[/]", a.split.value, rate, a.path)
    for r in record.rejected:
        table.add_row(r.task_id or "(reply)", "", f"[red]{r.reason.value}[/]", "", "", r.detail[:160])
    return table
