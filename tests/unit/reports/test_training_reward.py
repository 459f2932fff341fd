"""The report's training-reward section and the status line read the Update's iteration records."""

from __future__ import annotations

from mindforge.cli.lineage_status import _update_text
from mindforge.reports import ReportData, render_report

ITERATIONS = [
    {"iteration": 0, "adapter": "", "trained_adapter": "lin-g0-r0-i0", "mean_reward": 0.25, "rollouts": 16,
     "flat_groups": 1, "groups": 3, "flat_fraction": 1 / 3, "guided_groups": 1, "tokens_trained": 812, "loss": -0.012,
     "seconds": 41.0},
    {"iteration": 1, "adapter": "lin-g0-r0-i0", "trained_adapter": "", "mean_reward": 0.375, "rollouts": 16,
     "flat_groups": 2, "groups": 2, "flat_fraction": 1.0, "tokens_trained": 0, "loss": None, "seconds": 12.0,
     "reason": "every group was flat"},
]


def _data() -> ReportData:
    data = ReportData(lineage_id="lin", lineage_name="lin", status="completed")
    data.generations = [{"index": 0, "record": {"update": {"outcome": "promoted", "iterations": ITERATIONS}}}]
    return data


def test_the_report_plots_and_tabulates_every_iteration():
    html = render_report(_data(), "html")
    section = html.split('<section id="training-reward">')[1].split("</section>")[0]
    assert section.count('<img src="data:image/png;base64,') == 1
    md = render_report(_data(), "md")
    assert "| 0 | 0 | base | 0.250 | 16 | 1/3 | 1 | 812 | -0.0120 | 41 | lin-g0-r0-i0 |" in md
    assert "| 0 | 1 | lin-g0-r0-i0 | 0.375 | 16 | 2/2 | 0 | 0 |  | 12 | every group was flat |" in md


def test_the_status_cell_lists_the_iterations():
    text = _update_text({"outcome": "promoted", "iterations": ITERATIONS})
    assert text.splitlines() == [
        "promoted",
        "it 0: reward 0.25 on 16, flat 1/3 (1 guided), 812 tokens, loss -0.012, 41 s",
        "it 1: reward 0.38 on 16, flat 2/2, 0 tokens, 12 s",
    ]
