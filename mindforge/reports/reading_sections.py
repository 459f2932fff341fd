"""The report's sealed-reading sections: the pairs and their changes, one section per reading, the curriculum.

The sealed split is read apart by provenance, never pooled (:mod:`mindforge.reports.readings`):
``compounding`` lists the pairs, where each change came from and every headline reading;
``sealed-instances``, ``sealed-families``, ``sealed-tasks``, ``sealed-restated`` and
``sealed-dealt`` each show one reading's table (every pair's sealed success, lifts over
pair k-1 and pair 0 with 95% intervals by unit and task counts, the harness and weights
parts, pair 0 beside it), its plots (each pair's pass rate per generation with 95% Wilson
intervals; each pair's score with pair 0 plus the paired lift) and, for the instances
reading, the copyable / needs-adaptation parts; ``curriculum`` shows the families a
lineage drew and what their preparation kept.
"""

from __future__ import annotations

from typing import Any

from mindforge.evaluation import wilson_interval
from mindforge.evaluation.curriculum import READING_ORDER, SealedReading
from mindforge.evaluation.intervals import METHOD
from mindforge.reports import compounding, plots
from mindforge.reports.blocks import Section
from mindforge.reports.data import ReportData
from mindforge.reports.readings import ABSENT, ReadingTable, headline_lines, reading_name

#: section id of each reading's section, in reading order
READING_SECTION_IDS = {r.value: f"sealed-{r.value}" for r in READING_ORDER}
#: the roles of a generation's pairs on a reading, in the order the pass-rate plot sets them apart
ROLES = ("base", "parent", "handed on")
#: rejected instances listed in the curriculum section (the rest counted)
REJECTED_SHOWN = 30


def compounding_section(data: ReportData) -> Section:
    """``compounding``: the readings the lineage has, each reading's headline, and the pairs with their changes."""
    s = Section(id="compounding", title="Compounding: every pair on each sealed reading, never pooled")
    if not data.generations:
        return s.text("No generations recorded yet.")
    s.text(
        "Pair k is the pair generation k starts from (pair 0: the root; generation k hands on pair k+1). The sealed "
        "split is frozen at lineage start and read apart by how each task got there, each reading with its own "
        "figures, intervals and counts, never pooled: in-distribution gains are easy, transfer is hard. A pair's "
        "sealed trials are run once per lineage: a generation that kept its parent pair hands on the same pair, "
        "re-read (marked kept), not run again."
    )
    s.text(data.readings_record.header() + ".")
    if data.readings_record.checks:
        s.text(
            "The labels are checked against what the lineage mined (its library and the search split's reference "
            "solutions) at its start, after every Discovery admission and library growth: "
            f"{data.readings_record.checks}."
        )
    if not data.readings:
        return s.text("No sealed reading recorded yet (the lineage has no sealed task).")
    s.text("Each reading's headline (the last pair measured over pair 0):")
    for line in headline_lines(data.readings, data.readings_record):
        s.text(line)
    rows = next(iter(data.readings.values())).rows
    s.text("The pairs and where each change came from (the selection evidence; no sealed figure is read here):")
    return s.table(compounding.PAIRS_HEADER, [compounding.change_cells(r, data.contract_ref) for r in rows])


def reading_section(data: ReportData, reading: str, with_plots: bool) -> Section:
    """One reading's section: its table, its parts (instances), its plots and its pass rates per generation."""
    table = data.readings.get(reading)
    s = Section(id=READING_SECTION_IDS[reading], title=f"Sealed reading: {reading_name(reading)}")
    if table is None:
        return s.text(f"Not read in this lineage: {ABSENT[reading]}.")
    s.text(
        f"{table.header()}. Each pair's sealed success is the mean over the reading's tasks of its mean reward "
        "(passed / trials and tasks beside it); lifts are paired by task, mean reward difference with a 95% "
        f"interval by {'family' if table.n_families else 'task'} (the independent unit: "
        f"{METHOD}, the families beside the task count) and the task count; a figure recorded before intervals by "
        "unit has the percentile bootstrap by task. The harness part is (new contract, old adapter) over (old "
        "contract, old adapter); the weights part (new contract, new adapter) over (new contract, old adapter)."
    )
    if table.before_readings:
        gens = ", ".join(map(str, table.before_readings))
        s.text(f"Generation(s) {gens} were measured before the sealed split was read three ways: their figure is "
               "the whole sealed split, read here as sealed tasks.")
    s.table(compounding.HEADER, [compounding.table_cells(r, data.contract_ref) for r in table.rows])
    if reading == SealedReading.INSTANCES.value and any(r.parts for r in table.rows):
        s.text(
            f"Its two parts: copyable ({data.readings_record.copyable} tasks: the reference solution equals a search "
            f"instance's) and needs adaptation ({data.readings_record.needs_adaptation} tasks):"
        )
        s.table(compounding.PART_HEADER, [compounding.part_cells(r) for r in table.rows])
    rates = reading_rates(data, reading)
    if not rates:
        return s.text("No pair measured on this reading yet.")
    if with_plots:
        _plots(s, table, rates)
    s.text(
        "Pass rates of each pair, one row per pair, from the generation that first read it (95% Wilson intervals); "
        "a later generation that read it again re-read the same trials, marked:"
    )
    return s.table(
        ["generation", "pair", "contract / adapter", "passed/trials", "rate", "95% interval", "read again"],
        [_rate_cells(data, r) for r in rates],
    )


def reading_rates(data: ReportData, reading: str) -> list[dict[str, Any]]:
    """One row per pair on one reading: ``{"generation", "role", "pair", "pairs", "sealed", "interval", "reread_in"}``.

    A pair's sealed trials run once per lineage; every later generation that reads the pair
    again - pair k as generation k's parent after generation k-1 handed it on, pair 0 as the
    base of every generation, a kept pair as the pair handed on - *re-reads* the same trials.
    So each pair is one row, from the generation that first read it (``role``: ``parent``,
    ``handed on`` or ``base`` there), with ``reread_in`` the later generations that read it
    again and ``pairs`` every pair number it is (a kept pair k+1 is pair k). Intervals are
    Wilson's on passed / trials.
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for g in data.generations:
        figures = (g.get("readings") or {}).get(reading)
        if not figures:
            continue
        index = g["index"]
        entries = [("base", 0, figures.get("base")), ("parent", index, figures["sealed_parent"]),
                   ("handed on", index + 1, figures["sealed"])]
        for role, pair, sealed in entries:
            if not sealed or not sealed.get("n_trials") or (role == "base" and not index):
                continue
            key = _pair_key(sealed) or ("", "")
            row = rows.get(key)
            if row is None:
                interval = wilson_interval(int(sealed.get("passed") or 0), int(sealed["n_trials"]))
                rows[key] = {"generation": index, "role": role, "pair": pair, "pairs": [pair], "sealed": sealed,
                             "interval": interval, "reread_in": []}
                continue
            if pair not in row["pairs"]:
                row["pairs"].append(pair)
            if index != row["generation"] and index not in row["reread_in"]:
                row["reread_in"].append(index)
    return list(rows.values())


def _pair_key(sealed: dict[str, Any] | None) -> tuple[str, str] | None:
    return (sealed.get("contract_hash") or "", sealed.get("adapter") or "") if sealed else None


def reread_text(rate: dict[str, Any]) -> str:
    """``re-read in generation 1, 2 (the same trials, not run again)``, or ``-`` for a pair read once."""
    if not rate["reread_in"]:
        return "-"
    return f"re-read in generation {', '.join(map(str, rate['reread_in']))} (the same trials, not run again)"


def _rate_cells(data: ReportData, rate: dict[str, Any]) -> list[Any]:
    sealed, interval = rate["sealed"], rate["interval"]
    who = f"{data.contract_ref(sealed.get('contract_hash'))} / {sealed.get('adapter') or 'base'}"
    pair = f"{rate['pair']} ({rate['role']})" + "".join(
        f"; = pair {other} (kept)" for other in rate["pairs"] if other != rate["pair"]
    )
    return [
        rate["generation"], pair, who, f"{interval.successes}/{interval.n}", f"{interval.rate:.3f}",
        f"{interval.lo:.3f}..{interval.hi:.3f}", reread_text(rate),
    ]


def _plots(s: Section, table: ReadingTable, rates: list[dict[str, Any]]) -> None:
    """The reading's two plots: pass rate per generation (Wilson), and score per pair with pair 0 + lift."""
    name = reading_name(table.reading)
    points = sorted(
        ((r["generation"], r["interval"].rate, r["interval"].lo, r["interval"].hi, r["role"]) for r in rates),
        key=lambda p: ROLES.index(p[4]),
    )  # one point per pair, where it was first read; series in a fixed order, each set a little apart on x
    s.image(
        plots.sealed_scores(points, title=f"{name}: pass rate per generation (95% Wilson intervals)", series=""),
        f"{name}: pass rate per generation",
    )
    scores = [(r.pair, r.sealed["score"]) for r in table.rows if r.sealed and r.sealed.get("score") is not None]
    lifts = [
        (r.pair, r.lift_vs_root["mean"], r.lift_vs_root["lo"], r.lift_vs_root["hi"])
        for r in table.rows if r.pair and not r.kept and r.lift_vs_root and r.lift_vs_root.get("mean") is not None
    ]
    if scores:
        s.image(
            plots.sealed_by_generation(scores, lifts, title=f"{name}: sealed success by pair"),
            f"{name}: sealed success by pair",
        )


def curriculum_section(data: ReportData) -> Section:
    """``curriculum``: the families drawn and held out, instances per split, and what preparation kept."""
    s = Section(id="curriculum", title="Curriculum: task families drawn, held out and validated")
    cur = data.curriculum
    if cur is None:
        return s.text("This lineage draws no task families: its pool is tasks only.")
    s.text(
        f"{len(cur.families)} families from {cur.families_dir}: trained on {', '.join(cur.training_families) or '-'}; "
        f"held out whole (every instance sealed, no stage sees them): {', '.join(cur.sealed_families) or 'none'}. "
        f"Asked: {cur.instances} instances per family ({cur.sealed_fraction:g} of a training family's sealed), "
        f"{cur.selection_instances} more per training family for selection; seed {cur.seed}."
    )
    held_out = set(cur.sealed_families)
    rows = [
        [family, "held out" if family in held_out else "training", *(splits.get(k, 0) for k in SPLITS)]
        for family, splits in cur.per_family.items()
    ]
    if rows:
        total = [sum(splits.get(k, 0) for splits in cur.per_family.values()) for k in SPLITS]
        s.table(["family", "role", *SPLITS], [*rows, ["all", "", *total]])
    verdicts = ", ".join(f"{v} {n}" for v, n in cur.rejected_by_verdict.items()) or "none"
    s.text(
        f"Preparation: {cur.validated} instance(s) validated now, {cur.cached} read from the validation cache, "
        f"{len(cur.rejected)} rejected ({verdicts}); {cur.seconds:.0f} s"
        + (f"; images: {', '.join(cur.images)}" if cur.images else "") + "."
    )
    if cur.rejected:
        shown = [_rejected_cells(r) for r in cur.rejected[:REJECTED_SHOWN]]
        s.table(["instance", "verdict", "reason"], shown)
        if len(cur.rejected) > REJECTED_SHOWN:
            s.text(f"... and {len(cur.rejected) - REJECTED_SHOWN} more rejected (all in report --format json).")
    if cur.warnings:
        s.text("Warnings: " + "; ".join(cur.warnings) + ".")
    return s


#: the splits of the curriculum table, in order
SPLITS = ("search", "selection", "sealed")


def _rejected_cells(line: str) -> list[str]:
    """``"<instance>: <verdict>: <reason>"`` as three cells (the whole line as the reason when it has another shape)."""
    parts = line.split(": ", 2)
    return parts if len(parts) == 3 else ["", "", line]
