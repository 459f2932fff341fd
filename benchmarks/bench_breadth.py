"""Benchmark: breadth - a lineage over task-family instances, read three ways, and search against a real sweep.

Part 1 runs the main job's lineage (``mindforge quickstart``: SmolLM2-135M-Instruct on the
embedded llama.cpp server, the Update training LoRA adapters on the same weights) for three
generations over instances of the bundled task families (``tasks/families``, two of them
held out whole) plus hand-written micro tasks pinned to the sealed split, and prints, per
generation and per sealed reading (sealed instances, with copyable / needs adaptation;
sealed families; sealed tasks; never pooled):

- the base pair's (pair 0's) sealed success;
- pair k's lift over pair 0 and over pair k-1, with 95% intervals and task counts;
- the harness part and the weights part of each generation's lift;

and the decisions each generation took on the selection split (the successor check, the
pair gate) with their figures. The targets it states as met or not met:

- the lineage's own pair gate promotes an adapter in at least one generation, and that
  generation's weights part on sealed instances has a 95% lower bound above 0;
- pair 3 over pair 0 on sealed instances has a lower bound above 0, and pair 3's mean is
  above pair 1's (compounding);
- sealed families and sealed tasks: reported as measured, with no target.

Part 2 reproduces the source paper's headline shape on the instances generation 0's base
pair failed: the adaptive search's cumulative coverage (from the lineage's own record)
against a real sweep of the best single contract at the same budget - the one contract
that covered the most of those instances in the adaptive run (hindsight: the most
favourable single choice), run once on every failed instance, round robin, until it has
spent the search's budget. Target: adaptive coverage at least 3x the sweep's.

Run on demand (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    .venv/bin/python benchmarks/bench_breadth.py                 # three generations (target: 60 min)
    .venv/bin/python benchmarks/bench_breadth.py --lineage NAME  # report a lineage already run, then sweep
    .venv/bin/python benchmarks/bench_breadth.py --lineage NAME --no-sweep

Every figure is measured once, in one run; nothing is tuned on the readings.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
LINEAGE = "bench-breadth"
#: the quickstart options of the benchmark's lineage (the main job's, for three generations)
QUICKSTART = ["--generations", "3", "--time-budget", "3300"]


def run_lineage(name: str, extra: list[str]) -> int:
    """Run the main job (``mindforge quickstart``) as a subprocess; its output goes to this one's."""
    cmd = [sys.executable, "-m", "mindforge.cli.main", "quickstart", "--name", name, *QUICKSTART, *extra]
    print("$ " + " ".join(cmd[2:]), flush=True)
    return subprocess.run(cmd, cwd=REPO, check=False).returncode


def _lift(lift: dict | None) -> str:
    if not lift or lift.get("mean") is None:
        return "-"
    return f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n={lift.get('n_tasks')}"


def _part(part: dict | None) -> str:
    if not part:
        return "-"
    if part.get("status") == "measured":
        return _lift(part.get("lift"))
    return f"{part.get('status')} ({part.get('reason', '')})"


def reading_lines(records: list[dict[str, Any]]) -> list[str]:
    """Per generation and reading: the base pair's success, pair k+1 over pair 0 and pair k, the two parts."""
    from mindforge.evaluation.curriculum import READING_ORDER, READING_TITLES

    lines = []
    for reading in READING_ORDER:
        rows = [(i, (r.get("readings") or {}).get(reading.value)) for i, r in enumerate(records)]
        if not any(row for _i, row in rows):
            continue
        lines.append(f"{READING_TITLES[reading]}:")
        for i, row in rows:
            if not row:
                continue
            root = row.get("root") or row.get("parent") or {}
            succ = row.get("successor") or {}
            lines.append(
                f"  gen {i}: base pair {root.get('passed', 0)}/{root.get('n_trials', 0)} "
                f"({len(row.get('sealed_tasks') or [])} tasks); pair {i + 1} {succ.get('passed', 0)}/"
                f"{succ.get('n_trials', 0)}; vs pair 0 {_lift(row.get('lift_vs_root'))}; vs pair {i} "
                f"{_lift(row.get('lift_vs_prev'))}; harness {_part((row.get('attribution') or {}).get('harness'))}; "
                f"weights {_part((row.get('attribution') or {}).get('weights'))}"
            )
        if reading.value == "instances":
            for i, rec in enumerate(records):
                for part, row in (rec.get("reading_parts") or {}).items():
                    lines.append(f"    gen {i} {part}: pair {i + 1} vs pair 0 {_lift(row.get('lift_vs_root'))}")
    return lines


def decision_lines(records: list[dict[str, Any]]) -> list[str]:
    """Each generation's successor check and pair gate, with their selection figures."""
    lines = []
    for i, rec in enumerate(records):
        succ = rec.get("successor") or {}
        upd = rec.get("update") or {}
        prom = upd.get("promotion") or {}
        lines.append(
            f"  gen {i}: successor {'promoted' if succ.get('promoted') else 'kept'} ({succ.get('reason', '-')}); "
            f"update {upd.get('outcome', '-')}: {prom.get('reason') or upd.get('reason') or '-'}"
        )
    return lines


def targets(records: list[dict[str, Any]]) -> list[str]:
    """The benchmark's targets, met or not, from the generation records."""
    promoted = [i for i, r in enumerate(records) if (r.get("update") or {}).get("outcome") == "promoted"]
    weights = []
    for i in promoted:
        part = (((records[i].get("readings") or {}).get("instances") or {}).get("attribution") or {}).get("weights")
        lift = (part or {}).get("lift") or {}
        weights.append((i, lift.get("lo")))
    ok = any(lo is not None and lo > 0 for _i, lo in weights)
    out = [
        f"the pair gate promotes an adapter whose weights part on sealed instances has a lower bound above 0: "
        f"{'met' if ok else 'NOT met'} (promoted in generations {promoted or 'none'}; weights lower bounds "
        f"{[(i, round(lo, 3) if lo is not None else None) for i, lo in weights]})"
    ]
    last = ((records[-1].get("readings") or {}).get("instances") or {}) if records else {}
    lift = last.get("lift_vs_root") or {}
    k = len(records)
    if lift.get("lo") is not None:
        out.append(f"pair {k} over pair 0 on sealed instances, lower bound above 0: "
                   f"{'met' if lift['lo'] > 0 else 'NOT met'}: {_lift(lift)}")
    else:
        out.append(f"pair {k} over pair 0 on sealed instances: not measured ({last.get('lift_vs_root_reason', '-')})")
    first = ((records[0].get("readings") or {}).get("instances") or {}) if records else {}
    one, top = (first.get("successor") or {}).get("score"), (last.get("successor") or {}).get("score")
    if k >= 2 and one is not None and top is not None:
        out.append(f"pair {k} mean above pair 1's on sealed instances: {'met' if top > one else 'NOT met'}: "
                   f"{top:.3f} vs {one:.3f}")
    return out


def load_records(name: str, db_url: str) -> list[dict[str, Any]]:
    """The lineage's generation records, generation 0 first."""
    from mindforge.store import engine as se
    from mindforge.store import lineages

    eng = se.init_db(db_url)
    with se.session_scope(eng) as s:
        return [dict(g.record) for g in lineages.list_generations(session=s, lineage_id=name)]


def sweep(name: str, settings: Any) -> list[str]:
    """Adaptive coverage of generation 0's failed search instances against a sweep of the best single contract."""
    from benchmarks.breadth_sweep import run_sweep

    return run_sweep(name, settings)


def main(argv: list[str] | None = None) -> int:
    from mindforge.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lineage", default=None, help="report this lineage from the store; run no lineage")
    parser.add_argument("--name", default=None, help="lineage name (default: bench-breadth-<time>)")
    parser.add_argument("--no-sweep", action="store_true", help="skip part 2 (the best-single-contract sweep)")
    args, extra = parser.parse_known_args(argv)
    started = time.monotonic()
    settings = get_settings()
    name = args.lineage or args.name or f"{LINEAGE}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not args.lineage:
        code = run_lineage(name, extra)
        print(f"(the lineage's run exited {code})")
    records = load_records(name, settings.db_url)
    print(f"\n=== bench_breadth (lineage {name}: {len(records)} generation(s), SmolLM2-135M-Instruct, one run) ===")
    for line in reading_lines(records):
        print(line)
    print("decisions (selection split):")
    for line in decision_lines(records):
        print(line)
    print("targets:")
    for line in targets(records):
        print(f"  {line}")
    if not args.no_sweep and records:
        print("adaptive search vs the best single contract (generation 0's failed search instances, same budget):")
        for line in sweep(name, settings):
            print(f"  {line}")
    print(f"wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
