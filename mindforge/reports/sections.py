"""The report's sections as renderer-neutral content: paragraphs, tables, code blocks and plots.

HTML and Markdown render the same :class:`Section` list
(:mod:`mindforge.reports.blocks`), so both formats always carry the same numbers.
Section ids are stable (the HTML test looks for them). The sealed readings' sections
(``compounding``, one per reading, ``curriculum``) are built by
:mod:`mindforge.reports.reading_sections`: every sealed figure is shown under its
reading's name, never pooled.

A section that raises while it is built does not take the report down: it is replaced
by an error section of the same id that names it and the exception (type, message and
traceback), and :func:`failed_sections` lists such sections for the caller to report.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from mindforge.evaluation import PoolSplit
from mindforge.evaluation.curriculum import HEADLINE_READINGS, READING_ORDER
from mindforge.experience.validation import RejectionReason
from mindforge.reports import experience, plots
from mindforge.reports.blocks import Block, Section, Table
from mindforge.reports.compounding import (
    families_text,
    generation_lifts,
    generation_readings,
    method_text,
    reused_text,
)
from mindforge.reports.data import ReportData
from mindforge.reports.predictions import predictions_section
from mindforge.reports.reading_sections import (
    READING_SECTION_IDS,
    compounding_section,
    curriculum_section,
    reading_section,
)
from mindforge.reports.readings import headline_lines, reading_name

__all__ = ["SECTION_IDS", "Block", "Section", "Table", "build_sections", "failed_sections", "guarded", "sealed_text"]

#: section ids, in order
SECTION_IDS = (
    "summary",
    "coverage-curve",
    "single-vs-adaptive",
    "coverage-per-contract",
    "failure-audit",
    "edit-predictions",
    "task-matrix",
    "spend",
    "trials-per-node",
    "search-jobs",
    "lineage",
    "splits",
    "curriculum",
    "selection-decisions",
    "training-reward",
    "sealed-lift",
    "compounding",
    *READING_SECTION_IDS.values(),
    "experience",
    "discovery",
)


def _kv(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in mapping.items()) or "-"


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole}" + (f" ({100 * part / whole:.0f}%)" if whole else "")


def build_sections(data: ReportData, *, with_plots: bool = True) -> list[Section]:
    """All report sections, in :data:`SECTION_IDS` order; one that fails to render is an error section.

    Args:
        data: the gathered report data.
        with_plots: render plots (HTML); Markdown leaves them out.

    Returns:
        one section per id of :data:`SECTION_IDS`; see :func:`failed_sections` for those that failed.
    """
    builders: list[tuple[str, Callable[[], Section]]] = [
        ("summary", lambda: _summary(data)),
        ("coverage-curve", lambda: _curve(data, with_plots)),
        ("single-vs-adaptive", lambda: _single_vs_adaptive(data, with_plots)),
        ("coverage-per-contract", lambda: _per_contract(data, with_plots)),
        ("failure-audit", lambda: _audit(data, with_plots)),
        ("edit-predictions", lambda: predictions_section(data)),
        ("task-matrix", lambda: _matrix(data)),
        ("spend", lambda: _spend(data)),
        ("trials-per-node", lambda: _nodes(data)),
        ("search-jobs", lambda: _jobs(data)),
        ("lineage", lambda: _lineage(data)),
        ("splits", lambda: _splits(data)),
        ("curriculum", lambda: curriculum_section(data)),
        ("selection-decisions", lambda: _decisions(data)),
        ("training-reward", lambda: _training(data, with_plots)),
        ("sealed-lift", lambda: _sealed(data)),
        ("compounding", lambda: compounding_section(data)),
        *(
            (section_id, lambda reading=reading: reading_section(data, reading, with_plots))
            for reading, section_id in READING_SECTION_IDS.items()
        ),
        ("experience", lambda: _experience(data)),
        ("discovery", lambda: _discovery(data)),
    ]
    return [guarded(section_id, build) for section_id, build in builders]


def guarded(section_id: str, build: Callable[[], Section]) -> Section:
    """``build()``, or the error section of ``section_id`` when it raises.

    A report is read after a lineage ran, often as the last step of a command that ran
    it; one section's bug (a plot that matplotlib refuses, a record of an older shape)
    must cost that section only, and say so where the reader looks for the section.

    Args:
        section_id: the id of the section ``build`` makes.
        build: makes the section.

    Returns:
        the section, or one with ``error`` set and an error block naming the section,
        the exception's type and message, and its traceback.
    """
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - any bug of one section: shown in its place, the rest still render
        error = f"{type(exc).__name__}: {exc}"
        message = f"The section {section_id!r} failed to render: {error}. The other sections are complete."
        title = f"Section {section_id}: failed to render"
        section = Section(id=section_id, title=title, error=error, blocks=[Block(kind="error", text=message)])
        return section.pre("".join(traceback.format_exception(exc)).rstrip())


def failed_sections(sections: list[Section]) -> dict[str, str]:
    """Section id -> ``"ExceptionType: message"`` of each section that failed to render, in report order."""
    return {s.id: s.error for s in sections if s.error}


def _summary(data: ReportData) -> Section:
    s = Section(id="summary", title=f"Lineage {data.lineage_name}")
    s.text(
        f"Status {data.status}; {len(data.generations)} generation(s); "
        f"report generated {data.generated_at:%Y-%m-%d %H:%M} UTC."
    )
    if data.coverage:
        c = data.coverage[-1]
        s.text(
            f"Generation {c.index}: the base contract solved {_pct(c.base_solved, c.summary.tasks)} search tasks; "
            f"of the {c.failing} it failed, adaptive search covered {c.failing_covered} (cumulative) while the best "
            f"candidate within the adaptive run (not a sweep) covered {c.failing_single}. "
            "This is search-set coverage: an upper bound across "
            "contracts on the tasks searched, not the skill of any one contract."
        )
    else:
        s.text("No model trials recorded yet.")
    s.text("Sealed readings, never pooled (the last pair measured over pair 0; the in-distribution reading is "
           "never the headline alone):")
    for line in headline_lines(data.readings, data.readings_record):
        s.text(line)
    for g in data.generations:
        s.text(f"Generation {g['index']}: {readings_text(g)}.")
    if data.split_warnings:
        s.text("Small splits (started with --allow-small-splits): " + "; ".join(data.split_warnings) + ".")
    return s


def readings_text(generation: dict[str, Any]) -> str:
    """A generation's sealed lift over its parent pair on every headline reading, each named.

    ``sealed instances: sealed lift +0.200 (...); sealed families: none in this lineage; ...``:
    the three headline readings always (one the generation has no figure for says so), any
    other reading it measured after them.
    """
    lifts = generation.get("sealed_lifts")
    if lifts is None:  # report data built without them (an older JSON report)
        lifts = generation_lifts(generation.get("record") or {})
    readings = generation.get("readings")
    if readings is None:
        readings = generation_readings(generation.get("record") or {})
    if not lifts:
        return "not measured on the sealed split yet"
    if readings and all(figures.get("kept") for figures in readings.values()):
        return "kept its parent pair: the pair it hands on is its own, re-read, not run again (no change to measure)"
    parts = []
    for reading in READING_ORDER:
        name = reading_name(reading.value)
        entry = lifts.get(reading.value)
        if entry is None:
            if reading in HEADLINE_READINGS:
                parts.append(f"{name}: none in this lineage")
            continue
        if (readings.get(reading.value) or {}).get("kept"):
            parts.append(f"{name}: kept its parent pair (re-read, no change to measure)")
            continue
        parts.append(f"{name}: sealed lift {sealed_text(entry.get('lift'), entry.get('reason', ''))}")
    return "; ".join(parts)


def sealed_text(lift: dict | None, reason: str = "") -> str:
    """A reported lift as ``+0.200 (95% CI -0.100..+0.500) on N tasks in F families, M trials; method``, or why none."""
    if not lift or lift.get("mean") is None:
        return f"not measured ({reason or 'no figure'})"
    families = f" in {families_text(int(lift.get('n_units') or 0))}" if lift.get("unit") == "family" else ""
    return (
        f"{lift['mean']:+.3f} (95% CI {lift['lo']:+.3f}..{lift['hi']:+.3f}) on {lift.get('n_tasks', 0)} sealed "
        f"tasks{families}, {lift.get('n_trials', 0)} trials; {method_text(lift)}"
    )


def _curve(data: ReportData, with_plots: bool) -> Section:
    s = Section(id="coverage-curve", title="Cumulative coverage against attempts")
    if not data.coverage:
        return s.text("No coverage data recorded yet.")
    if with_plots:
        curves = {f"gen {c.index}": c.curve for c in data.coverage}
        tasks = {f"gen {c.index}": c.summary.tasks for c in data.coverage}
        singles = {f"gen {c.index}": c.summary.single_contract for c in data.coverage}
        s.image(plots.coverage_curve(curves, tasks, singles), "cumulative coverage against attempts")
    rows = []
    for c in data.coverage:
        marks = (
            sorted({max(1, round(c.summary.attempts * f)) for f in (0.25, 0.5, 0.75, 1.0)})
            if c.summary.attempts
            else []
        )
        for m in marks:
            rows.append([c.index, m, c.curve[min(m, len(c.curve) - 1)][1], c.summary.tasks])
    return s.table(["generation", "attempts spent", "tasks covered", "tasks"], rows)


def _single_vs_adaptive(data: ReportData, with_plots: bool) -> Section:
    s = Section(id="single-vs-adaptive", title="Best single contract against adaptive search")
    if not data.coverage:
        return s.text("No coverage data recorded yet.")
    s.text(
        "No sweep was run: the lineage does not run each candidate on all search tasks with the same attempts "
        "(benchmarks/bench_real_model.py does), so the single-contract figures below are the best candidate "
        "within the adaptive run, not a sweep - it saw only the tasks the allocator gave it."
    )
    rows = [
        [
            c.index,
            c.summary.tasks,
            c.base_solved,
            c.failing,
            c.failing_covered,
            c.failing_single,
            f"{data.contract_ref(c.failing_single_contract)} ({data.contract_edit(c.failing_single_contract) or '-'})",
            c.summary.cumulative,
            c.summary.single_contract,
        ]
        for c in data.coverage
    ]
    header = [
        "generation", "search tasks", "base solved", "failing after base", "adaptive (cumulative)",
        "best candidate in the run (not a sweep)", "that candidate", "cumulative, all tasks",
        "best candidate in the run, all tasks (not a sweep)",
    ]  # fmt: skip
    s.table(header, rows)
    if with_plots:
        c = data.coverage[-1]
        labels = ["failing after base", "adaptive search (cumulative)", "best candidate in the run (not a sweep)"]
        s.image(
            plots.bars(
                labels,
                [c.failing, c.failing_covered, c.failing_single],
                title=f"Generation {c.index}",
                ylabel="tasks",
                colours=["#bbbbbb", "C0", "C1"],
            ),
            "best candidate within the adaptive run (not a sweep) against adaptive search",
        )
    return s


def _per_contract(data: ReportData, with_plots: bool) -> Section:
    s = Section(id="coverage-per-contract", title="Coverage per contract")
    if not data.coverage:
        return s.text("No coverage data recorded yet.")
    rows = []
    for c in data.coverage:
        for contract, solved in sorted(c.summary.per_contract.items(), key=lambda kv: -kv[1]):
            attempts = sum(cells.get(contract, [0, 0, 0])[2] for cells in c.matrix.values())
            wins = sum(cells.get(contract, [0, 0, 0])[0] for cells in c.matrix.values())
            usable = sum(cells.get(contract, [0, 0, 0])[1] for cells in c.matrix.values())
            rate = f"{wins}/{usable}" if usable else "-"
            rows.append(
                [c.index, data.contract_ref(contract), data.contract_edit(contract) or "-", solved, attempts, rate]
            )
    s.table(["generation", "contract", "edit", "tasks solved", "attempts", "successes/usable"], rows)
    if with_plots:
        c = data.coverage[-1]
        items = sorted(c.summary.per_contract.items(), key=lambda kv: -kv[1])[:30]
        labels = [f"{(data.contract_edit(k) or data.contract_ref(k))[:60]} ({k[:6]})" for k, _ in items]
        s.image(
            plots.bars(
                labels,
                [v for _, v in items],
                title=f"Tasks solved per contract, generation {c.index}",
                ylabel="tasks solved",
            ),
            "coverage per contract",
        )
    return s


def _audit(data: ReportData, with_plots: bool) -> Section:
    s = Section(id="failure-audit", title="Failure classes and owners")
    if not data.audits:
        return s.text("No audits recorded yet.")
    s.table(
        ["failure class", "owner", "failed trials", "judged by rules"],
        [[a.failure_class, a.owner, a.count, a.judged_by_rules] for a in data.audits],
    )
    if with_plots:
        s.image(
            plots.failure_owners([(a.failure_class, a.owner, a.count) for a in data.audits]), "failure classes by owner"
        )
    return s


def _matrix(data: ReportData) -> Section:
    s = Section(id="task-matrix", title="Task x contract matrix")
    if not data.coverage:
        return s.text("No coverage data recorded yet.")
    c = data.coverage[-1]
    contracts = list(c.summary.per_contract)
    s.text(f"Generation {c.index}; each cell is successes/attempts (usable attempts only count as successes).")
    s.table(
        ["column", "contract", "edit"],
        [[f"C{i + 1}", data.contract_ref(h), data.contract_edit(h) or "-"] for i, h in enumerate(contracts)],
    )
    rows = []
    for task, cells in sorted(c.matrix.items(), key=lambda kv: data.task_ids.get(kv[0], kv[0])):
        rows.append(
            [data.task_ids.get(task, task[:12])]
            + [f"{cells[h][0]}/{cells[h][2]}" if h in cells else "" for h in contracts]
        )
    return s.table(["task"] + [f"C{i + 1}" for i in range(len(contracts))], rows)


def _spend(data: ReportData) -> Section:
    s = Section(id="spend", title="Tokens and wall time spent")
    if not data.spend:
        return s.text("No trials recorded yet.")
    rows = [
        [r.generation, r.stage, r.trials, r.prompt_tokens, r.completion_tokens, f"{r.wall_sec:.1f}"] for r in data.spend
    ]
    total = [
        sum(r.trials for r in data.spend),
        sum(r.prompt_tokens for r in data.spend),
        sum(r.completion_tokens for r in data.spend),
        sum(r.wall_sec for r in data.spend),
    ]
    rows.append(["all", "all", total[0], total[1], total[2], f"{total[3]:.1f}"])
    return s.table(["generation", "stage", "trials", "prompt tokens", "completion tokens", "wall seconds"], rows)


def _nodes(data: ReportData) -> Section:
    s = Section(id="trials-per-node", title="Trials per node")
    if not data.nodes:
        return s.text("No trials recorded yet.")
    total = sum(r.trials for r in data.nodes)
    rows = [[r.host, r.node or "-", _pct(r.trials, total), r.passed, f"{r.wall_sec:.1f}"] for r in data.nodes]
    return s.table(["host", "Ray node", "trials", "passed", "wall seconds"], rows)


def _jobs(data: ReportData) -> Section:
    s = Section(id="search-jobs", title="Search jobs: budget, spending, stop reason")
    if not data.search_jobs:
        return s.text("No configuration-search jobs recorded yet.")
    rows = [
        [j.generation, j.id[:16], j.status, _kv(j.budget), _kv(j.spent), j.stop_reason or "-", j.candidates]
        for j in data.search_jobs
    ]
    return s.table(["generation", "job", "status", "budget", "spent", "stop reason", "candidates"], rows)


def _lineage(data: ReportData) -> Section:
    s = Section(id="lineage", title="Contract lineage with diffs")
    if not data.contracts:
        return s.text("No contracts recorded yet.")
    for info in data.contracts:
        used = []
        if info.generations:
            used.append("generation " + ", ".join(map(str, info.generations)))
        if info.candidate_of:
            used.append("candidate in generation " + ", ".join(map(str, sorted(set(info.candidate_of)))))
        s.text(
            f"{info.ref} ({info.hash[:12]}) <- {info.parent_ref or 'root'}; "
            f"{'; '.join(used) or 'ancestor'}; edit: {info.edit or '-'}"
        )
        if info.diff:
            s.pre(info.diff)
    return s


def _splits(data: ReportData) -> Section:
    s = Section(id="splits", title="Task splits: search, selection, sealed")
    if not data.evidence:
        return s.text("No generations recorded yet.")
    s.text(
        "search: base evaluation, audit, configuration search and training; selection: every decision (successor "
        "contract, adapter promotion); sealed: only the reported lift - no decision reads it."
    )
    if data.split_warnings:
        s.text("Flagged: " + "; ".join(data.split_warnings) + " (the lineage was started with --allow-small-splits).")
    rows = [
        [ev.index, ev.splits.get("search", 0), ev.splits.get("selection", 0), ev.splits.get("sealed", 0)]
        for ev in data.evidence
    ]
    return s.table(["generation", "search tasks", "selection tasks", "sealed tasks"], rows)


def _decisions(data: ReportData) -> Section:
    s = Section(id="selection-decisions", title="Decisions on the selection split")
    rows = []
    for ev in data.evidence:
        for d in ev.decisions:
            if d["kind"] == "successor_contract":
                outcome = f"{'promoted' if d.get('promoted') else 'kept'} {data.contract_ref(d.get('contract_hash'))}"
                scores = ", ".join(
                    f"{data.contract_ref(h)}={v:.3f}" if isinstance(v, (int, float)) else f"{data.contract_ref(h)}=-"
                    for h, v in (d.get("scores") or {}).items()
                )
            else:
                lift = d.get("lift") or {}
                outcome = "promoted adapter" if d.get("promoted") else "kept parent adapter"
                scores = (
                    f"without={lift.get('parent_score'):.3f}, with={lift.get('successor_score'):.3f}"
                    if lift.get("parent_score") is not None else "-"
                )
            read = f"{len(d.get('trial_ids') or [])}{reused_text(d.get('reused'))}"
            rows.append(
                [
                    ev.index, d["kind"], d.get("decided_on", "?"), outcome, scores, read,
                    d.get("reason", "") + (f" (rule: {d['rule']})" if d.get("rule") else ""),
                ]
            )
    if not rows:
        return s.text("No decisions recorded yet.")
    s.table(["generation", "decision", "decided on", "outcome", "selection scores", "trials read", "reason"], rows)
    rates = [r for ev in data.evidence for r in ev.scores if r.split == PoolSplit.SELECTION]
    if rates:
        s.text("Selection-split pass rates per pair (95% Wilson intervals):")
        s.table(["generation", "contract", "adapter", "passed/usable", "rate", "95% interval"], _rate_rows(data, rates))
    return s


def _rate_rows(data: ReportData, rows: list) -> list[list[Any]]:
    return [
        [
            r.generation, data.contract_ref(r.contract_hash), r.adapter or "base", f"{r.score.successes}/{r.score.n}",
            f"{r.score.rate:.3f}", f"{r.score.lo:.3f}..{r.score.hi:.3f}",
        ]
        for r in rows
    ]


def _training(data: ReportData, with_plots: bool) -> Section:
    """Update's on-policy GRPO iterations: training reward, flat groups, tokens, loss, seconds."""
    s = Section(id="training-reward", title="Update: training reward per on-policy iteration")
    rows = [
        (g["index"], it)
        for g in data.generations
        for it in ((g.get("record") or {}).get("update") or {}).get("iterations") or []
    ]
    if not rows:
        return s.text("No on-policy Update iteration recorded (offline update, or none ran).")
    s.text(
        "Each iteration draws groups of rollouts on search-split tasks from the current adapter under the training "
        "contract; the mean reward is over its rollouts (search split: a training signal, not skill). A guided "
        "group is one whose rollouts all failed, joined by the task's own validated experience entry as an "
        "off-policy guide; guides are not rollouts and are not in the mean."
    )
    if with_plots:
        points = [(gen, it["iteration"], it["mean_reward"], it["flat_fraction"]) for gen, it in rows]
        s.image(plots.training_reward(points), "training reward per iteration")
    table = [
        [
            gen, it["iteration"], it.get("adapter") or "base", f"{it['mean_reward']:.3f}", it["rollouts"],
            f"{it['flat_groups']}/{it['groups']}", it.get("guided_groups", 0), it["tokens_trained"],
            "" if it.get("loss") is None else f"{it['loss']:+.4f}", f"{it['seconds']:.0f}",
            it.get("trained_adapter") or it.get("reason", ""),
        ]
        for gen, it in rows
    ]
    header = ["generation", "iteration", "drawn from", "mean reward", "rollouts", "flat groups", "guided groups",
              "tokens trained", "loss", "seconds", "trained / why not"]
    return s.table(header, table)


def _sealed(data: ReportData) -> Section:
    s = Section(id="sealed-lift", title="Sealed lift per generation and reading")
    if not data.evidence:
        return s.text("No sealed evaluation recorded yet.")
    s.text(
        "The lift of the pair each generation hands on over its parent (and over generation 0's pair), paired by task "
        "on each sealed reading apart - the three headline readings in every generation, a reading the lineage does "
        "not have said so - mean reward difference with a 95% interval by unit (families for the family readings, "
        "tasks otherwise; the method is named). Every reading's figures are in its own section below; the readings "
        "are never pooled."
    )
    rows = []
    for ev in data.evidence:
        for reading in READING_ORDER:
            entry = ev.sealed_lifts.get(reading.value)
            if entry is None:
                if reading in HEADLINE_READINGS and ev.sealed_lifts:
                    rows.append([ev.index, reading_name(reading.value), "none in this lineage", "-"])
                continue
            rows.append([
                ev.index, reading_name(reading.value), sealed_text(entry.get("lift"), entry.get("reason", "")),
                sealed_text(entry.get("vs_root"), "generation 0" if ev.index == 0 else "not measured"),
            ])
        if not ev.sealed_lifts:
            rows.append([ev.index, "-", "not measured yet", "-"])
    return s.table(["generation", "reading", "sealed lift over parent", "sealed lift over generation 0"], rows)


def _discovery_rows(data: ReportData) -> list[list[object]]:
    splits = {ev.index: ev.splits for ev in data.evidence}
    rows: list[list[object]] = []
    for generation, record in sorted(data.discovery.items()):
        if not isinstance(record, dict):
            continue
        reasons: dict[str, int] = {}
        rejected = record.get("rejected")
        for item in rejected if isinstance(rejected, list) else []:
            reason = str(item.get("reason", "?")) if isinstance(item, dict) else "?"
            reasons[reason] = reasons.get(reason, 0) + 1
        pool = splits.get(generation, {})
        admitted = record.get("admitted")
        rows.append([
            generation, record.get("proposed", ""), len(admitted) if isinstance(admitted, list) else admitted,
            ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-",
            "/".join(str(pool.get(k, 0)) for k in ("search", "selection", "sealed")),
        ])
    return rows


def _experience(data: ReportData) -> Section:
    s = Section(id="experience", title="Experience library")
    lib = data.experience
    s.text(
        f"The {experience.summary_text(lib)}: reference solutions (oracle) and the pair's own passed trials (model), "
        "all from search-split tasks, each kept only after replays with no model passed the task's verifier."
    )
    if not lib.rounds:
        return s.text("No growth round recorded yet.")
    s.table(experience.HEADER, [experience.table_cells(r) for r in lib.rounds])
    reasons = [str(r) for r in RejectionReason]
    s.text("Rejections by reason per generation (stored):")
    rows = [[g, *(counts.get(r, 0) for r in reasons)] for g, counts in lib.rejections.items()]
    s.table(["generation", *reasons], rows)
    return s


def _discovery(data: ReportData) -> Section:
    s = Section(id="discovery", title="Discovery proposals and admissions")
    if not data.discovery:
        return s.text("No Discovery proposals recorded yet.")
    s.text("Per generation: proposals, admissions, rejections by reason, and the pool after admission:")
    s.table(["generation", "proposed", "admitted", "rejected by reason", "pool (search/selection/sealed)"],
            _discovery_rows(data))
    for generation, record in sorted(data.discovery.items()):
        if not isinstance(record, dict):
            s.text(f"Generation {generation}: {record}")
            continue
        scalars = {k: v for k, v in record.items() if not isinstance(v, (list, dict))}
        s.text(f"Generation {generation}: " + ", ".join(f"{k} {v}" for k, v in scalars.items()))
        for key, value in record.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                header = list(dict.fromkeys(k for v in value for k in v))
                s.text(f"{key}:").table(header, [[v.get(h, "") for h in header] for v in value])
    return s
