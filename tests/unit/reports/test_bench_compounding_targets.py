"""bench_compounding's two targets, read off the compounding rows (met, not met, not measured)."""

from __future__ import annotations

from benchmarks.bench_compounding import targets
from mindforge.reports.compounding import CompoundingRow


def _rows(scores: list[float], lo: float) -> list[CompoundingRow]:
    rows = [CompoundingRow(pair=k, sealed={"score": s}) for k, s in enumerate(scores)]
    rows[-1].lift_vs_root = {"mean": scores[-1] - scores[0], "lo": lo, "hi": 0.6, "n_tasks": 12}
    return rows


def test_both_targets_met_and_not_met() -> None:
    met = targets(_rows([0.1, 0.2, 0.3, 0.4], lo=0.05))
    assert met[0].startswith("pair 3 beats pair 0 on sealed (95% lower bound > 0): met: +0.300 [+0.050, +0.600] n=12")
    assert met[1] == "pair 3 sealed mean above pair 1's: met: 0.400 vs 0.200"
    missed = targets(_rows([0.1, 0.3, 0.3, 0.3], lo=0.0))
    assert ": NOT met: +0.200 [+0.000" in missed[0] and "NOT met: 0.300 vs 0.300" in missed[1]


def test_a_lift_without_figure_is_not_measured() -> None:
    rows = [CompoundingRow(pair=0, sealed={"score": 0.0}), CompoundingRow(pair=1, lift_vs_root_reason="no trials")]
    first, second = targets(rows)
    assert first == "pair 1 beats pair 0 on sealed: not measured (no trials)" and "not measured" in second
