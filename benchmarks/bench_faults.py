"""Benchmark: faults survived - each fault of the fault suite injected K times at seeded random points.

Runs ``tests/faults`` (the real stack: Temporal dev server, a two-node Ray cluster, Docker,
SQLite, the SCRIPTED POLICY behind the HTTP API) with ``MINDFORGE_FAULT_SEEDS`` set to K
seeds, so every fault test runs once per seed, each at the point its seed draws, and
reads back what each injection left (``MINDFORGE_FAULT_RESULTS``, one JSON line per
injection, written by :func:`tests.faults.lineage_faults.record_result`). Prints one row a
fault:

- injections asked (K) and recorded (an injection whose test failed before its counts
  were read is missing: pytest's summary, printed above the table, names it);
- lineages completed; trials lost; trials double-counted; infrastructure errors scored
  (a fault's trial stored with a reward); orphaned sandboxes left;
- median recovery seconds: from the fault until the last trial it hit was stored whole
  (Temporal: until the restarted server answered; the trainer: until the adapter trained
  again was registered).

Targets, for every fault: 0 lost, 0 double-counted, 0 scored, 0 orphans, every lineage
completed. Needs root (the disk-full fault mounts a tmpfs) and ``mindforge dev up``; it
restarts the host's Docker engine. Run on demand::

    .venv/bin/python benchmarks/bench_faults.py            # K = 5 (about 30 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_faults.py --k 1      # one injection a fault
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: the faults the suite injects, in the order the table lists them
FAULTS = [
    "Temporal server killed",
    "policy server killed mid-trial",
    "Ray worker killed mid-batch",
    "dockerd restarted mid-trial",
    "artifact disk full",
    "trainer killed mid-Update",
]
COLUMNS = ["fault", "injections", "completed", "lost", "double", "scored", "orphans", "recovery s (median)"]


def run_suite(seeds: list[int], results: Path, pytest_args: list[str]) -> int:
    """Run ``tests/faults`` once per seed; returns pytest's exit status."""
    env = {**os.environ, "MINDFORGE_FAULT_SEEDS": ",".join(map(str, seeds)), "MINDFORGE_FAULT_RESULTS": str(results)}
    cmd = [sys.executable, "-m", "pytest", "tests/faults", "-q", "-p", "no:cacheprovider", *pytest_args]
    print("$ " + " ".join(cmd[1:]), f"(seeds {seeds})", flush=True)
    return subprocess.run(cmd, cwd=REPO, env=env, check=False).returncode


def table(lines: list[dict], k: int) -> list[list[str]]:
    """The table's rows: one a fault, from the recorded injections (see the module docstring)."""
    by_fault: dict[str, list[dict]] = defaultdict(list)
    for line in lines:
        by_fault[line["fault"]].append(line)
    rows = []
    for fault in FAULTS:
        got = by_fault.get(fault, [])
        lineages = [g for g in got if "status" in g]
        completed = len(got) if not lineages else sum(g["status"] == "completed" for g in lineages)
        recoveries = [g["recovery_sec"] for g in got if g.get("recovery_sec") is not None]

        def total(key: str, rows_: list[dict] = lineages) -> str:
            return str(sum(r[key] for r in rows_)) if rows_ else "-"

        rows.append([
            fault, f"{len(got)}/{k}", f"{completed}/{k}", total("lost"), total("double_counted"),
            total("infra_scored"), total("orphans"), f"{statistics.median(recoveries):.1f}" if recoveries else "-",
        ])
    return rows


def print_table(rows: list[list[str]]) -> None:
    """Print ``rows`` under :data:`COLUMNS` as a Markdown table."""
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> int:
    """``bench_faults.py [--k K] [--first-seed S] [-- PYTEST ARGS]``; exit status: pytest's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5, help="injections a fault (seeds first-seed .. first-seed+K-1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), e.g. -k disk")
    ns = parser.parse_args(argv)
    seeds = list(range(ns.first_seed, ns.first_seed + ns.k))
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        results.touch()
        status = run_suite(seeds, results, ns.pytest_args)
        lines = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"\nfaults injected at seeds {seeds[0]}..{seeds[-1]}; pytest exit status {status}\n")
    print_table(table(lines, ns.k))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
