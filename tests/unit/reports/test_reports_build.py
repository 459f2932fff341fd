"""Reports from a filled SQLite store: the gathered numbers, HTML / Markdown / JSON, and the CLI command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mindforge.cli.report import report_command
from mindforge.errors import InputError
from mindforge.reports import SECTION_IDS, ReportData, gather_report_data, render_report
from mindforge.store import LineageCreate, lineages, make_engine, session_scope
from mindforge.store.errors import NotFoundError
from tests.unit.reports.report_store import FilledStore, fill_store


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> FilledStore:
    return fill_store(f"sqlite:///{tmp_path_factory.mktemp('report') / 'mindforge.db'}")


@pytest.fixture(scope="module")
def data(filled: FilledStore) -> ReportData:
    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        gathered = gather_report_data(session, filled.lineage_name)
    engine.dispose()
    return gathered


def test_gathered_numbers_match_the_store(filled: FilledStore, data: ReportData) -> None:
    assert data.lineage_id == filled.lineage_id and len(data.generations) == 2
    [cov] = data.coverage  # generation 1 has sealed trials only
    assert (cov.summary.tasks, cov.base_solved, cov.failing) == (filled.search_tasks, 1, filled.failing)
    assert cov.failing_covered == filled.covered == filled.failing  # the search reached full coverage
    assert 0 < cov.failing_single < cov.failing_covered  # best single candidate below cumulative
    assert cov.curve[-1] == (filled.attempts + 2 * filled.search_tasks, filled.search_tasks)
    assert sum(cells[cov.base_contract][2] for cells in cov.matrix.values()) == 2 * filled.search_tasks
    [job] = data.search_jobs
    assert job.stop_reason == filled.stop_reason == "full_coverage" and job.spent["attempts"] == filled.attempts
    assert {a.owner for a in data.audits} == {"config", "model"}
    root = next(c for c in data.contracts if c.hash == filled.root_hash)
    assert root.generations == [0] and root.chain == ["tools: bash and finish only"]
    assert "tools.allow" in root.diff
    candidates = [c for c in data.contracts if c.candidate_of]
    assert len(candidates) == job.candidates and all(c.diff and c.chain for c in candidates)
    assert all(len(c.chain) == filled.edit_counts[c.hash] for c in candidates)  # every edit of the chain
    assert any(len(c.chain) >= 2 for c in candidates)  # the combo task needed a composed candidate
    # selection pass rates per pair; sealed ones are per reading (data.readings), never pooled by generation
    scores = [(r.generation, r.split.value, r.contract_hash) for ev in data.evidence for r in ev.scores]
    assert sorted(scores) == sorted([(0, "selection", filled.root_hash), (0, "selection", filled.successor_hash)])
    assert all(r.score.n == 4 and r.score.lo <= r.score.rate <= r.score.hi for ev in data.evidence for r in ev.scores)
    gen0, gen1 = data.generations
    assert gen0["splits"] == {"search": filled.search_tasks, "selection": 2, "sealed": 2}
    assert [d["decided_on"] for d in gen0["decisions"]] == ["selection"]
    # measured before readings existed: the whole sealed split, read as the sealed-tasks reading, its figure
    # from the stored compounding row (the percentile bootstrap by task it was measured with)
    assert list(gen0["sealed_lifts"]) == list(gen1["sealed_lifts"]) == ["tasks"] and list(gen0["readings"]) == ["tasks"]
    lift = gen0["sealed_lifts"]["tasks"]["lift"]
    assert (lift["mean"], lift["lo"], lift["hi"], lift["n_tasks"], lift["n_trials"]) == (0.25, 0.0, 0.5, 2, 8)
    kept = gen1["sealed_lifts"]["tasks"]
    assert kept["lift"] is None and "kept its parent" in kept["reason"]
    assert list(data.readings) == ["tasks"] and data.readings["tasks"].before_readings == [0, 1]
    assert not data.readings_record.recorded and data.readings_record.tasks["tasks"] == 2 and data.curriculum is None
    assert data.discovery[0]["admitted"] == 1
    # trials per node: every stored trial on exactly one node, the node id cut to 8 characters
    assert sum(r.trials for r in data.nodes) == sum(r.trials for r in data.spend)
    assert {(r.host, r.node) for r in data.nodes} == {("node-0", "0a2b3c4d"), ("node-1", "1a2b3c4d")}


def test_markdown_and_json_carry_the_same_sections_and_numbers(data: ReportData) -> None:
    md = render_report(data, "md")
    for section in SECTION_IDS:
        assert f'<a id="{section}"></a>' in md
    cov = data.coverage[0]
    assert (
        f"adaptive search covered {cov.failing_covered} (cumulative) while the best candidate within the adaptive "
        f"run (not a sweep) covered {cov.failing_single}"
        in md
    )
    assert "full_coverage" in md and "csv-merge" in md and "no sealed trials" not in md.lower()
    # every headline reading named, the one this old lineage has with its figure and method
    assert "Generation 0: sealed instances: none in this lineage; sealed families: none in this lineage; sealed " \
        "tasks: sealed lift +0.250 (95% CI +0.000..+0.500) on 2 sealed tasks, 8 trials; percentile bootstrap by " \
        "task." in md
    assert "Decisions on the selection split" in md and "| selection |" in md
    assert "data:image" not in md
    again = ReportData.model_validate_json(render_report(data, "json"))
    assert again == data
    with pytest.raises(ValueError, match="unknown report format"):
        render_report(data, "pdf")


def test_html_is_self_contained_with_plots(data: ReportData) -> None:
    html = render_report(data, "html")
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in html
    # coverage curve, single vs adaptive, per contract, audit; then the sealed-tasks reading's two plots
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 6
    tasks = html.split('<section id="sealed-tasks">')[1].split("</section>")[0]
    assert tasks.count("<img") == 2 and 'alt="sealed tasks: pass rate per generation"' in tasks
    assert "<script" not in html and 'src="http' not in html


def test_sections_say_when_there_is_nothing_yet(tmp_path: Path) -> None:
    bare = fill_store(f"sqlite:///{tmp_path / 'bare.db'}", evaluation=False, discovery=False)
    engine = make_engine(bare.db_url)
    with session_scope(engine) as session:
        lineages.create_lineage(session=session, lineage_in=LineageCreate(name="empty"))
    with session_scope(engine) as session:
        no_evaluation = gather_report_data(session, bare.lineage_name)
        empty = gather_report_data(session, "empty")
        with pytest.raises(NotFoundError):
            gather_report_data(session, "nope")
    engine.dispose()
    html = render_report(no_evaluation, "html")
    assert "No pair measured on this reading yet." in html and "No Discovery proposals recorded yet." in html
    assert "No decisions recorded yet." in html and "Not read in this lineage: it holds out no task family" in html
    assert html.count("<img") == 4  # no sealed plots
    md = render_report(empty, "md")
    assert "No model trials recorded yet." in md and "No coverage data recorded yet." in md
    assert all(f'<a id="{s}"></a>' in md for s in SECTION_IDS)


def test_report_command_writes_html_and_prints_markdown(filled: FilledStore, tmp_path: Path, monkeypatch) -> None:
    from mindforge.settings import get_settings

    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MINDFORGE_DATABASE_URL", filled.db_url)
    get_settings.cache_clear()
    app = typer.Typer()
    app.command()(report_command)
    runner = CliRunner()
    try:
        done = runner.invoke(app, [filled.lineage_name])
        assert done.exit_code == 0, done.output
        page = tmp_path / "artifacts" / "reports" / "demo-report.html"
        assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
        md = runner.invoke(app, [filled.lineage_id, "--format", "md"])
        assert md.exit_code == 0 and '<a id="coverage-curve"></a>' in md.stdout
        out = tmp_path / "r.json"
        assert runner.invoke(app, [filled.lineage_name, "-f", "json", "-o", str(out)]).exit_code == 0
        assert ReportData.model_validate_json(out.read_text()).lineage_id == filled.lineage_id
        bad = runner.invoke(app, [filled.lineage_name, "--format", "pdf"])
        assert isinstance(bad.exception, InputError) and "pdf" in str(bad.exception)
        missing = runner.invoke(app, ["no-such-lineage"])
        assert isinstance(missing.exception, InputError) and "no-such-lineage" in str(missing.exception)
    finally:
        get_settings.cache_clear()


def test_the_compounding_table_matches_the_store(filled: FilledStore, data: ReportData) -> None:
    """One row per pair (root, then each generation's successor), read from the stored sealed trials."""
    from mindforge.store import trials

    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        gens = lineages.list_generations(session=session, lineage_id=filled.lineage_id)
        records = {g.index: dict(g.record) for g in gens}
        rows_ = trials.list_trials(session=session, lineage_id=filled.lineage_id, stage="sealed")
        sealed = [r.to_record() for r in rows_]
    engine.dispose()
    rows = data.readings["tasks"].rows
    assert [(r.pair, r.handed_on_by, r.contract_hash) for r in rows] == [
        (0, None, filled.root_hash), (1, 0, filled.successor_hash), (2, 1, filled.successor_hash)
    ]

    def score(generation: int, contract: str) -> float:  # mean over sealed tasks of the mean reward, by hand
        per: dict[str, list[float]] = {}
        for r in sealed:
            if r.contract_hash == contract and r.trial_id.startswith(f"sealed-{generation}-"):
                per.setdefault(r.task_hash, []).append(r.reward or 0.0)
        return sum(sum(v) / len(v) for v in per.values()) / len(per)

    assert rows[0].sealed["score"] == pytest.approx(score(0, filled.root_hash))
    assert rows[1].sealed["score"] == pytest.approx(score(0, filled.successor_hash))
    assert rows[2].sealed["score"] == pytest.approx(score(1, filled.successor_hash))
    assert rows[1].lift_vs_prev == records[0]["compounding"]["lift_vs_prev"]
    assert rows[1].lift_vs_prev["mean"] == pytest.approx(rows[1].sealed["score"] - rows[0].sealed["score"])
    assert rows[1].lift_vs_root["baseline"] == "root" and rows[1].lift_vs_root["mean"] == rows[1].lift_vs_prev["mean"]
    assert rows[2].lift_vs_prev is None and "kept its parent pair" in rows[2].lift_vs_prev_reason
    assert [r.kept for r in rows] == [False, False, True]  # generation 1 kept its parent pair
    assert rows[1].base == rows[0].sealed and rows[2].base["score"] is None  # generation 1 ran no root trials
    # generation 1 ran no root trials: the lift over pair 0 says why instead of scoring them 0
    assert rows[2].lift_vs_root is None and "both pairs" in rows[2].lift_vs_root_reason
    assert rows[1].change["contract_edit"] and rows[1].change["successor"]["decided_on"] == "selection"
    assert rows[1].attribution["weights"]["status"] == "unchanged"  # no adapter in this lineage
    assert len({r.sealed_tasks_sha256 for r in rows}) == 1
    for i, g in enumerate(data.generations):  # the JSON carries the same figures per generation and reading
        figures = g["readings"]["tasks"]
        assert figures["sealed"] == rows[i + 1].sealed and figures["lift_vs_prev"] == rows[i + 1].lift_vs_prev
        assert figures["lift_vs_root"] == rows[i + 1].lift_vs_root and figures["kept"] == rows[i + 1].kept
    md = render_report(data, "md")
    lift = rows[1].lift_vs_prev
    assert "| 1 | gen 0 |" in md and f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n=2" in md
    assert "| 2 | gen 1 | " in md and "| = pair 1 (kept; re-read, not run again) |" in md
    assert "every generation read the same tasks" in md
