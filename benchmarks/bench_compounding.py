"""Benchmark: does recursive improvement compound? Three generations of one lineage on one frozen sealed split.

One lineage of SmolLM2-135M-Instruct (llama.cpp policy server; the Update trains LoRA
adapters on the same weights with transformers + PEFT) on the full micro suite
(``tasks/micro``, split once by the lineage into search / selection / sealed), run through
the product code: the spec is built as ``mindforge lineage start`` builds it
(:func:`mindforge.cli.lineage.build_spec`: split sizes and gate power checked), and
``LineageWorkflow`` runs Expansion (base evaluation, audit, configuration search, the
successor check on selection) and Update (on-policy GRPO iterations, the promotion gate on
selection) in every generation on a Temporal dev server with in-process workers
(:func:`benchmarks.product_lineage.run_product_lineage`), trials as Ray tasks in Docker
sandboxes. Every generation runs its parent pair, its successor pair and the root pair on
the same sealed tasks with the same attempts (and, where both the contract and the adapter
changed, the harness-only pair for the attribution).

Call pair k the pair generation k starts from: pair 0 is the root, and generations 0, 1, 2
hand on pairs 1, 2, 3. It prints the compounding tables, one per sealed reading
(:func:`mindforge.cli.results.compounding_lines`: each pair's sealed success, its paired
lift over pair k-1 and over pair 0 with 95% bootstrap intervals and task counts, and the
harness / weights parts of each lift), where each change came from, and its two
targets as met / not met on each reading (the micro suite is hand-written tasks, so its
one reading is *sealed tasks*):

- pair 3 beats pair 0 on sealed: the paired lift's 95% lower bound is above 0;
- pair 3's sealed mean is above pair 1's (the gain keeps growing after generation 0).

The source paper leaves compounding open; the figures are reported as measured, either way.

Run on demand (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    .venv/bin/python benchmarks/bench_compounding.py           # 3 generations, 58 tasks (target: < 90 min)
    .venv/bin/python benchmarks/bench_compounding.py --quick   # 2 generations, 20 tasks (about 10 min)
    .venv/bin/python benchmarks/bench_compounding.py --lineage NAME  # report a lineage already run

``--lineage NAME`` runs nothing: it prints the same table, sources and targets for a
lineage already in the store (``MINDFORGE_DATA_DIR``), e.g. README's long run of the main
job (``mindforge quickstart --generations 3`` on the full micro suite).

``--quick`` runs two generations (pairs 0..2) on the main job's 20 tasks with smaller
budgets; its targets are read for the last pair it hands on (pair 2 over pair 0, pair 2
above pair 1), a smoke check of the loop rather than the full run's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
LINEAGE = "bench-compounding"

#: per-mode sizes: generations, tasks, base-evaluation attempts, search trials per generation,
#: the Update's on-policy loop, sealed / selection attempts per task and pair, and the splits
MODES: dict[str, dict[str, Any]] = {
    "full": {
        "generations": 3, "attempts": 2, "search_attempts": 64, "eval_attempts": 2,
        "update_loop": {"iterations": 2, "group_size": 4, "tasks_per_iteration": 4, "time_budget_sec": 600.0},
        "selection": 0.2, "sealed": 0.2,
    },
    "quick": {
        "generations": 2, "attempts": 2, "search_attempts": 24, "eval_attempts": 2,
        "update_loop": {"iterations": 1, "group_size": 4, "tasks_per_iteration": 3, "time_budget_sec": 90.0},
        "selection": 0.25, "sealed": 0.25,
    },
}


def build_bench_spec(name: str, mode: dict[str, Any], policy_url: str) -> Any:
    """The lineage spec, built and checked as ``mindforge lineage start`` does.

    Args:
        name: the lineage name.
        mode: one of :data:`MODES`.
        policy_url: the running llama.cpp policy server (``.../v1``).

    Returns:
        a :class:`mindforge.payloads.LineageSpec`.

    Raises:
        SplitTooSmallError: a split below 5 tasks.
        InputError: a gate that cannot pass at any lift.
    """
    from mindforge.cli.lineage import build_spec, split_config
    from mindforge.cli.quickstart import MAIN_JOB_TASKS

    micro = REPO / "tasks" / "micro"
    tasks = [micro] if mode["generations"] >= 3 else [micro / t for t in MAIN_JOB_TASKS]
    spec = build_spec(
        name, tasks, REPO / "hcp_contracts" / "smollm2.toml", mode["generations"], mode["attempts"],
        split_config(mode["selection"], mode["sealed"]), 0, policy_url, "expansion,update", 8,
        base_model="smollm2", search_attempts=mode["search_attempts"], update_loop=mode["update_loop"],
        say=print,
    )
    spec.evaluation.attempts = mode["eval_attempts"]
    spec.runtime.heartbeat_timeout_sec = 600
    return spec


def targets(rows: list[Any]) -> list[str]:
    """The two targets on the last pair L the lineage handed on (L = 3 after three generations).

    Args:
        rows: the compounding rows (:class:`mindforge.reports.compounding.CompoundingRow`), pair 0 first.

    Returns:
        one line per target, ``met``, ``NOT met`` or ``not measured`` with the figures.
    """
    from mindforge.reports.compounding import lift_text

    last = rows[-1]
    k = last.pair
    lift = last.lift_vs_root
    if lift and lift.get("lo") is not None:
        met = "met" if lift["lo"] > 0 else "NOT met"
        first = f"pair {k} beats pair 0 on sealed (95% lower bound > 0): {met}: {lift_text(lift)}"
    else:
        first = f"pair {k} beats pair 0 on sealed: not measured ({last.lift_vs_root_reason})"
    one = rows[1] if len(rows) > 1 else None
    if k >= 2 and one and one.sealed and last.sealed and None not in (one.sealed["score"], last.sealed["score"]):
        top, mid = last.sealed["score"], one.sealed["score"]
        second = f"pair {k} sealed mean above pair 1's: {'met' if top > mid else 'NOT met'}: {top:.3f} vs {mid:.3f}"
    else:
        second = f"pair {k} sealed mean above pair 1's: not measured (fewer than 3 pairs measured)"
    return [first, second]


def report(name: str, db_url: str) -> list[str]:
    """The compounding tables (one per sealed reading), where each change came from, and the targets per reading."""
    from mindforge.cli.results import compounding_lines
    from mindforge.reports import gather_report_data
    from mindforge.reports.compounding import change_cells
    from mindforge.reports.readings import reading_name
    from mindforge.store import engine as se

    eng = se.init_db(db_url)
    with se.session_scope(eng) as s:
        data = gather_report_data(s, name)
    lines = compounding_lines(data)
    tables = list(data.readings.values())
    if tables:
        lines.append("where each change came from (contract edit, library, adapter; selection evidence):")
        for row in tables[0].rows[1:]:
            cells = change_cells(row, data.contract_ref)
            lines.append(f"  pair {row.pair}: {cells[-2]}; {cells[-1]}")
    lines.append("targets, per sealed reading (never pooled):")
    for table in tables:
        lines += [f"  {reading_name(table.reading)}: {t}" for t in targets(table.rows)]
    return lines


def main(argv: list[str] | None = None) -> int:
    from benchmarks.product_lineage import run_product_lineage
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.server import start_policy_server
    from mindforge.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 generations, 20 tasks, small budgets (about 10 min)")
    parser.add_argument("--name", default=None, help="lineage name (default: bench-compounding-<time>)")
    parser.add_argument("--lineage", default=None, help="report this lineage from the store; run nothing")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.lineage:
        print(f"\n=== bench_compounding (lineage {args.lineage}, read from the store) ===")
        for line in report(args.lineage, get_settings().db_url):
            print(line)
        return 0
    mode_name = "quick" if args.quick else "full"
    mode = MODES[mode_name]
    settings = get_settings()
    resolve_model("smollm2")  # the GGUF converted once, before the server and the trainer use it
    name = args.name or f"{LINEAGE}-{time.strftime('%Y%m%d-%H%M%S')}"
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        spec = build_bench_spec(name, mode, server.base_url)
        asyncio.run(run_product_lineage(spec, settings))
    finally:
        server.stop()
    print(f"\n=== bench_compounding ({mode_name}: {mode['generations']} generations, SmolLM2-135M-Instruct, "
          f"tasks/micro, lineage {name}, one run) ===")
    for line in report(name, settings.db_url):
        print(line)
    print(f"wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
