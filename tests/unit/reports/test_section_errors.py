"""A section that fails to render costs that section only: an error in its place, the rest intact, and exit 3.

The failing section is real: generation 0's record holds an on-policy Update iteration of
an older shape (no ``mean_reward``), which the training-reward section cannot read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mindforge.cli.report import REPORT_INCOMPLETE_EXIT, report_command
from mindforge.reports import SECTION_IDS, ReportData, render_checked, render_report
from mindforge.reports.sections import build_sections
from tests.unit.reports.sealed_store import fill_sealed

#: an Update iteration recorded without its mean reward
OLD_ITERATION = {"iteration": 0, "rollouts": 8, "groups": 2, "flat_groups": 1, "tokens_trained": 100, "seconds": 3.0}
FAILURE = "KeyError: 'mean_reward'"


def _data(iterations: list[dict]) -> ReportData:
    record = {"update": {"outcome": "trained", "iterations": iterations}}
    return ReportData(
        lineage_id="l", lineage_name="old-record", status="completed",
        generations=[{"index": 0, "status": "completed", "record": record}],
    )  # fmt: skip


def test_a_section_that_raises_is_an_error_block_and_the_other_sections_are_intact() -> None:
    broken, sound = _data([OLD_ITERATION]), _data([])
    sections = build_sections(broken, with_plots=False)
    assert [s.id for s in sections] == list(SECTION_IDS)
    failed = next(s for s in sections if s.id == "training-reward")
    assert failed.error == FAILURE and failed.title == "Section training-reward: failed to render"
    assert failed.blocks[0].kind == "error" and "'training-reward' failed to render: KeyError" in failed.blocks[0].text
    assert failed.blocks[1].kind == "pre" and "Traceback" in failed.blocks[1].text  # for a bug report
    others = [s for s in sections if s.id != "training-reward"]
    assert others == [s for s in build_sections(sound, with_plots=False) if s.id != "training-reward"]
    assert not any(s.error for s in others)

    html = render_checked(broken, "html")
    assert html.failed == {"training-reward": FAILURE}
    assert all(f'<section id="{s}">' in html.text for s in SECTION_IDS)
    part = html.text.split('<section id="training-reward">')[1].split("</section>")[0]
    assert '<p class="error" role="alert">' in part and "KeyError: &#x27;mean_reward&#x27;" in part
    assert html.text.count('class="error"') == 1 and "Status completed" in html.text
    md = render_checked(broken, "md")
    assert md.failed == html.failed and "> **Error:** The section 'training-reward' failed" in md.text
    assert render_checked(sound, "html").failed == {} and render_checked(broken, "json").failed == {}
    assert render_report(broken, "md") == md.text


@pytest.fixture
def old_store(tmp_path: Path, monkeypatch) -> str:
    """Settings on a real store whose lineage ``old-record`` has an Update iteration without its mean reward."""
    from mindforge.settings import get_settings

    db_url = f"sqlite:///{tmp_path / 'mindforge.db'}"
    record = {"update": {"outcome": "trained", "iterations": [OLD_ITERATION]}}
    fill_sealed(db_url, "old-record", [[0.0]] * 5, [[1.0]] * 5, record=record)
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MINDFORGE_DATABASE_URL", db_url)
    get_settings.cache_clear()
    yield "old-record"
    get_settings.cache_clear()


def test_report_command_writes_the_incomplete_report_names_the_section_and_exits_3(old_store: str, tmp_path: Path):
    app = typer.Typer()
    app.command()(report_command)
    runner = CliRunner()
    done = runner.invoke(app, [old_store])
    assert done.exit_code == REPORT_INCOMPLETE_EXIT == 3, done.output
    page = tmp_path / "artifacts" / "reports" / "old-record.html"
    assert f"report {page} is incomplete: section training-reward failed to render ({FAILURE})" in done.stderr
    html = page.read_text(encoding="utf-8")
    assert '<p class="error" role="alert">' in html and all(f'<section id="{s}">' in html for s in SECTION_IDS)
    md = runner.invoke(app, [old_store, "--format", "md"])
    assert md.exit_code == 3 and '<a id="sealed-lift"></a>' in md.stdout
    assert "report of old-record is incomplete: section training-reward" in md.stderr
    assert runner.invoke(app, [old_store, "--format", "json"]).exit_code == 0
    usage = runner.invoke(app, ["--help"], terminal_width=200, env={"COLUMNS": "200"}).output
    assert "3 when it was written but a section failed" in " ".join(usage.split())


def test_quickstart_prints_its_summary_then_exits_3_when_its_report_is_incomplete(old_store: str, capsys) -> None:
    from mindforge.cli.quickstart import _finish
    from mindforge.settings import get_settings

    settings = get_settings()
    with pytest.raises(typer.Exit) as ended:
        _finish(old_store, settings, "http://ui/workflows/lineage-old-record", 0.0)
    assert ended.value.exit_code == REPORT_INCOMPLETE_EXIT
    out = capsys.readouterr().out
    page = settings.artifacts / "reports" / "old-record.html"
    # the last screen: the generations table, then the sealed readings table with the figure
    assert out.index("lineage old-record: completed") < out.index("sealed readings, never pooled") < out.index("+1.000")
    assert "lineage status old-record --verbose" in out
    assert f"report: {page}\n" in out and page.exists()
    assert f"warning: report {page} is incomplete: section training-reward failed to render ({FAILURE})" in out
