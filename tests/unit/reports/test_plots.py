"""Interval plots: an error bar only from an interval that holds its point; the legend names the rest."""

from __future__ import annotations

import base64

import matplotlib.pyplot as plt

from mindforge.reports import plots


def test_a_point_outside_its_interval_is_drawn_without_a_bar_and_named_in_the_legend() -> None:
    fig, ax = plt.subplots()
    try:
        plots.points_with_intervals(
            ax,
            [(0, 0.0, 1e-17, 0.3), (1, 0.5, 0.2, 0.8), (2, 0.4, None, 0.6), (3, 1.0, 0.7, float("nan"))],
            label="sealed: c@1 base",
            marker="o",
            colour="C0",
        )
        _handles, labels = ax.get_legend_handles_labels()
        assert sorted(labels) == ["sealed: c@1 base", f"sealed: c@1 base: {plots.NO_INTERVAL}"]
        [bars] = ax.containers  # the error-bar container: only the point its interval holds
        assert list(bars.lines[0].get_xdata()) == [1]
        [bare] = [line for line in ax.lines if line.get_label().endswith(plots.NO_INTERVAL)]
        assert list(bare.get_xdata()) == [0, 2, 3] and bare.get_markerfacecolor() == "none"
    finally:
        plt.close(fig)


def test_interval_of_accepts_a_zero_width_interval_on_its_point() -> None:
    assert plots.interval_of(0.0, 0.0, 0.0) == (0.0, 0.0)
    assert plots.interval_of(1.0, 0.7, 1.0) == (0.7, 1.0)
    assert plots.interval_of(1.0, 0.7, 0.9999999999999999) is None


def test_sealed_plots_render_with_a_bound_on_the_wrong_side() -> None:
    """The points of the reported failure: a lower bound an ulp above a rate of 0."""
    for uri in (
        plots.sealed_scores([(0, 0.0, 1.4e-17, 0.215, "c@1 base"), (0, 0.286, 0.117, 0.547, "c@1 lora")]),
        plots.sealed_by_generation([(0, 0.0), (1, 1 / 3)], [(1, 1 / 3, 1 / 3 + 1e-12, 0.5)]),
    ):
        png = base64.b64decode(uri.removeprefix("data:image/png;base64,"))
        assert png.startswith(b"\x89PNG") and len(png) > 5000
