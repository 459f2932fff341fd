"""The gates' one rule: a pair replaces another on the selection split only on a gain.

Both gates (the successor race, :mod:`mindforge.evaluation.race`, and the pair gate,
:func:`mindforge.evaluation.decisions.decide_pair`) compare a pair under test with the
pair it would replace, paired by selection task (a task's score is the mean reward over
its usable attempts, :func:`mindforge.evaluation.scoring.score_tasks`). The pair under
test passes when all three hold:

1. the two pairs share at least ``min_tasks`` scored tasks; two pairs with no task in
   common **cannot be compared**, and a decision says so rather than "no lift";
2. the mean paired lift is above 0: **a tie never passes**, whatever the margin (with a
   declared non-inferiority margin a lower bound of exactly 0 - 1 vs 1 on every task -
   used to pass);
3. the lower bound of the paired percentile bootstrap interval (clustered by task,
   :func:`mindforge.evaluation.stats.bootstrap_lift`) at ``confidence`` is above
   ``-margin`` (``margin`` 0: above 0).

When several candidates are judged at once (the successor race's one or two), each is
judged at the Bonferroni level ``1 - (1 - 0.95) / m`` (Dunn 1961), so the chance that any
of the ``m`` is promoted without a gain stays at most the one-sided 2.5% of a single 95%
interval (nominal: the percentile bootstrap's own coverage at a few tasks is what
``benchmarks/bench_evidence.py`` measures).

The rule is monotone: raising one task's score of the pair under test, or lowering one of
the other pair's, never turns a pass into a failure (the bootstrap's resample indices
depend on the seed and the task count only, and a percentile of resample means is
non-decreasing in every paired difference). The race's early stop
(:mod:`mindforge.evaluation.race`) rests on that.

Pure: pydantic and numpy/scipy (through the statistics).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from mindforge.evaluation.stats import bootstrap_lift

#: the level of one gate's interval; its lower bound is a one-sided 97.5% bound
GATE_CONFIDENCE = 0.95
#: the fewest paired selection tasks a lineage may configure a gate to decide on (``--min-split-tasks``)
MIN_GATE_TASKS = 5
#: a lift or bound within this of 0 is 0 (floating-point noise of sums of per-task means is not a gain)
TIE_TOLERANCE = 1e-9


def bonferroni_confidence(candidates: int, confidence: float = GATE_CONFIDENCE) -> float:
    """The interval level at which each of ``candidates`` candidates is judged: ``1 - (1 - confidence) / m``.

    Raises:
        ValueError: fewer than one candidate.
    """
    if candidates < 1:
        raise ValueError(f"a gate judges at least one candidate, got {candidates}")
    return 1 - (1 - confidence) / candidates


def false_promotion_bound(candidates: int, confidence: float = GATE_CONFIDENCE) -> float:
    """The nominal chance that a gate judging ``candidates`` candidates promotes one without a gain (one-sided)."""
    return (1 - bonferroni_confidence(candidates, confidence)) / 2 * candidates


def gain_passes(mean: float, lo: float, margin: float = 0.0) -> bool:
    """Rules 2 and 3 on a measured lift: the mean above 0 (no tie) and the lower bound above ``-margin``."""
    return mean > TIE_TOLERANCE and lo > -margin + TIE_TOLERANCE


class LiftVerdict(BaseModel):
    """One comparison under the gates' rule (:func:`judge_lift`).

    Attributes:
        passed: the pair under test passes.
        comparable: the two pairs share at least one scored task.
        n_tasks: paired tasks.
        mean / lo / hi: the paired lift and its interval at ``confidence`` (None: not comparable).
        confidence: the interval's level.
        why: the verdict in words.
    """

    passed: bool
    comparable: bool
    n_tasks: int
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    confidence: float = GATE_CONFIDENCE
    why: str = ""


def judge_lift(
    parent: Sequence[float],
    child: Sequence[float],
    *,
    min_tasks: int,
    margin: float = 0.0,
    confidence: float = GATE_CONFIDENCE,
    resamples: int = 2000,
    seed: int = 0,
) -> LiftVerdict:
    """The gates' rule on per-task scores of the tasks both pairs scored.

    Args:
        parent: per-task scores of the pair that would be replaced, shape (k,).
        child: the pair under test's scores on the same tasks, same order, shape (k,).
        min_tasks: fewest paired tasks for a pass.
        margin: non-inferiority margin in reward units (>= 0).
        confidence: the interval's level (:func:`bonferroni_confidence` for several candidates).
        resamples / seed: bootstrap settings.

    Returns:
        the verdict; ``comparable`` False when ``k`` is 0.

    Raises:
        ValueError: unequal lengths or a negative margin.
    """
    if len(parent) != len(child):
        raise ValueError(f"need paired scores (got {len(parent)} and {len(child)})")
    if margin < 0:
        raise ValueError(f"the non-inferiority margin must be >= 0, got {margin}")
    k = len(parent)
    if not k:
        return LiftVerdict(
            passed=False, comparable=False, n_tasks=0, confidence=confidence,
            why="cannot compare: the two pairs share no scored selection task",
        )
    mean, lo, hi = bootstrap_lift(list(parent), list(child), n=resamples, seed=seed, confidence=confidence)
    out = LiftVerdict(passed=False, comparable=True, n_tasks=k, mean=mean, lo=lo, hi=hi, confidence=confidence)
    figure = f"selection lift {mean:+.3f} ({confidence:.1%} CI {lo:+.3f}..{hi:+.3f}) on {k} tasks"
    if k < min_tasks:
        out.why = f"only {k} paired selection task(s), fewer than {min_tasks}"
    elif mean <= TIE_TOLERANCE:
        out.why = f"{figure}: no gain (a tie or a loss never passes)"
    else:
        out.passed = gain_passes(mean, lo, margin)
        verdict = "above" if out.passed else "not above"
        out.why = f"{figure}: lower bound {verdict} {-margin if margin else 0.0:+.3f}"
    return out
