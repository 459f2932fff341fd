"""Report plots: matplotlib (Agg backend, no display) rendered to PNG and embedded as data URIs.

Each function takes plain numbers from :class:`~mindforge.reports.data.ReportData` and
returns a ``data:image/png;base64,...`` URI, so the HTML report is one self-contained
file readable without a server.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402 - after matplotlib.use
from matplotlib.ticker import MaxNLocator  # noqa: E402 - after matplotlib.use

#: colours of the audit owners
OWNER_COLOURS = {"infra": "#8c8c8c", "task": "#d62728", "config": "#1f77b4", "model": "#ff7f0e"}
#: what the legend says of points drawn without an error bar
NO_INTERVAL = "no interval drawn (bounds missing or on the wrong side of the point)"


def _data_uri(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def interval_of(y: float, lo: float | None, hi: float | None) -> tuple[float, float] | None:
    """``(lo, hi)`` when it is an interval that holds ``y`` (finite bounds, ``lo <= y <= hi``), else None."""
    if lo is None or hi is None or not all(math.isfinite(v) for v in (y, lo, hi)) or not lo <= y <= hi:
        return None
    return lo, hi


def points_with_intervals(
    ax, points: Sequence[tuple[float, float, float | None, float | None]], *, label: str, marker: str, colour: str
) -> None:
    """Draw points with error bars from their intervals; a point whose interval does not hold it has no bar.

    matplotlib refuses a negative error-bar length (``ValueError: 'yerr' must not contain
    negative values``), which is what a bound on the wrong side of its point gives. Such a
    point (or one without bounds) is drawn hollow, without a bar, under a legend entry
    ending in :data:`NO_INTERVAL`, so the plot shows it and says why instead of failing.

    Args:
        ax: the matplotlib axes.
        points: ``(x, y, lo, hi)``; ``lo`` and ``hi`` bound ``y``, in the units of ``y``.
        label: the legend label of the series.
        marker: matplotlib marker (``"o"``, ``"s"``).
        colour: matplotlib colour of the series.
    """
    drawn: list[tuple[float, float, float, float]] = []  # x, y, length below, length above
    bare: list[tuple[float, float]] = []
    for x, y, lo, hi in points:
        if (bounds := interval_of(y, lo, hi)) is None:
            bare.append((x, y))
        else:
            drawn.append((x, y, y - bounds[0], bounds[1] - y))
    if drawn:
        ax.errorbar(
            [p[0] for p in drawn], [p[1] for p in drawn], yerr=[[p[2] for p in drawn], [p[3] for p in drawn]],
            fmt=marker, color=colour, capsize=4, label=label,
        )
    if bare:
        ax.plot(
            [p[0] for p in bare], [p[1] for p in bare], linestyle="none", marker=marker, color=colour,
            markerfacecolor="none", label=f"{label}: {NO_INTERVAL}",
        )


def coverage_curve(curves: dict[str, list[tuple[int, int]]], tasks: dict[str, int], singles: dict[str, int]) -> str:
    """Cumulative coverage against attempts spent, one line per generation.

    Args:
        curves: label -> ``[(attempts, tasks covered), ...]``.
        tasks: label -> size of the task set (dotted ceiling line).
        singles: label -> the best candidate's coverage within the run (dashed line; not a sweep).
    """
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for position, (label, points) in enumerate(curves.items()):
        colour = f"C{position % 10}"
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.step(xs, ys, where="post", color=colour, label=f"{label}: cumulative")
        if label in singles:
            ax.axhline(
                singles[label], color=colour, linestyle="--", linewidth=1,
                label=f"{label}: best candidate in the run (not a sweep)",
            )
        if label in tasks:
            ax.axhline(tasks[label], color=colour, linestyle=":", linewidth=1, label=f"{label}: tasks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("attempts spent")
    ax.set_ylabel("tasks solved")
    ax.set_title("Cumulative coverage against attempts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _data_uri(fig)


def bars(labels: list[str], values: list[float], *, title: str, ylabel: str, colours: list[str] | None = None) -> str:
    """A simple bar chart (coverage per contract, adaptive vs single)."""
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * len(labels) + 1.2)))
    positions = list(range(len(labels)))
    ax.barh(positions, values, color=colours or ["C0"] * len(labels))
    ax.set_yticks(positions, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for position, value in zip(positions, values, strict=True):
        ax.text(value, position, f" {value:g}", va="center", fontsize=8)
    return _data_uri(fig)


def failure_owners(rows: list[tuple[str, str, int]]) -> str:
    """Failed trials per failure class, stacked by audit owner.

    Args:
        rows: ``(failure class, owner, count)``.
    """
    classes = sorted({cls for cls, _owner, _n in rows})
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.4 * len(classes) + 1.2)))
    left = [0] * len(classes)
    for owner, colour in OWNER_COLOURS.items():
        counts = [sum(n for c, o, n in rows if c == cls and o == owner) for cls in classes]
        if any(counts):
            ax.barh(classes, counts, left=left, color=colour, label=owner)
            left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("failed trials")
    ax.set_title("Failure classes by owner (audit)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _data_uri(fig)


def sealed_scores(
    points: list[tuple[int, float, float, float, str]],
    *,
    title: str = "Sealed pass rate per generation (95% Wilson intervals)",
    series: str = "sealed: ",
) -> str:
    """Sealed-split pass rate per generation and pair (or role), with 95% Wilson intervals.

    Args:
        points: ``(generation, rate, lo, hi, label)`` per evaluated pair; rate and bounds in 0..1
            (a point whose bounds do not hold it is drawn without a bar, see :func:`points_with_intervals`).
            Points of one label are one series, set a little apart from the others on x around
            its generation, which is where the x axis has its ticks.
        title: the plot's title (a reading's plot names the reading).
        series: prefix of each series' legend label.
    """
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = list(dict.fromkeys(p[4] for p in points))
    for position, label in enumerate(labels):
        shift = 0.08 * (position - (len(labels) - 1) / 2)
        mine = [(p[0] + shift, p[1], p[2], p[3]) for p in points if p[4] == label]
        points_with_intervals(ax, mine, label=f"{series}{label}", marker="o", colour=f"C{position % 10}")
    ax.set_xticks(sorted({int(p[0]) for p in points}))  # the generations, whatever the shifts
    ax.set_xlabel("generation")
    ax.set_ylabel("pass rate (passed / trials)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _data_uri(fig)


def training_reward(points: list[tuple[int, int, float, float]]) -> str:
    """Mean rollout reward and flat-group fraction per on-policy Update iteration.

    Args:
        points: ``(generation, iteration, mean_reward, flat_fraction)`` per iteration,
            rewards and fractions in 0..1.
    """
    fig, ax = plt.subplots(figsize=(8, 4))
    for gen in sorted({p[0] for p in points}):
        mine = sorted((p for p in points if p[0] == gen), key=lambda p: p[1])
        xs = [p[1] for p in mine]
        ax.plot(xs, [p[2] for p in mine], marker="o", label=f"generation {gen}: mean reward")
        ax.plot(xs, [p[3] for p in mine], linestyle="--", marker="x", label=f"generation {gen}: flat groups")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel("reward / fraction")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Update: training reward per on-policy iteration (search split)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _data_uri(fig)


def sealed_by_generation(
    points: list[tuple[int, float]],
    root_lifts: list[tuple[int, float, float | None, float | None]],
    *,
    title: str = "Sealed success by generation, one frozen sealed split",
) -> str:
    """Sealed score of each pair of the lineage (pair k: the pair generation k starts from).

    Args:
        points: ``(k, sealed score)`` per measured pair.
        root_lifts: ``(k, mean, lo, hi)`` of pair k's paired lift over pair 0 (95% interval), in
            reward units; drawn at pair 0's score plus the lift, its bounds shifted alike.
        title: the plot's title (a reading's plot names the reading).
    """
    fig, ax = plt.subplots(figsize=(8, 4))
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", color="C0", label="sealed score of pair k")
    if root_lifts:
        base = dict(points).get(0)
        if base is not None:  # pair 0's score plus the paired lift, with the lift's interval shifted alike
            shifted = [
                (k + 0.05, base + mean, None if lo is None else base + lo, None if hi is None else base + hi)
                for k, mean, lo, hi in root_lifts
            ]
            points_with_intervals(ax, shifted, label="pair 0 + paired lift (95% CI)", marker="s", colour="C1")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("pair k (0 = root; generation k-1 handed it on)")
    ax.set_ylabel("sealed score (mean reward)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _data_uri(fig)
