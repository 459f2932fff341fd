"""Edits that state what they will change, and verdicts read from their trials (AHE).

Every candidate of the racing search states a :class:`~mindforge.search.race_models.Prediction`
when it is made: the failing tasks it will turn into passes and the pass rate it claims
there. An operator edit predicts the tasks whose audit points at it most strongly (the
affinity table of :mod:`mindforge.search.affinity`), at a rate that grows with the
affinity level (:data:`CLAIMED_RATE`); an edit the audit does not point at, and the
seeds that come from data (the lineage's library, the previous generation's entrants),
predict a general lift over every failing task at the lowest claimed rate. A model's
prompt edit predicts the tasks of the cluster it was asked for.

The verdict is read from trial outcomes alone (:func:`judge`, :func:`judge_records`):

- ``confirmed``: a named task passed under the candidate;
- ``refuted``: every usable trial on the named tasks failed, and ``n`` failures in a row
  at the claimed rate are less likely than ``alpha``: ``(1 - min_rate) ** n <= alpha``
  (a one-sided binomial test of "the rate is at least ``min_rate``" at level ``alpha``);
- ``untested``: neither yet.

A refuted edit is not offered again in that search, and an operator whose edits keep
being refuted loses prior weight in exploration (:func:`operator_factors`).

Source: Agentic Harness Engineering (AHE): every harness edit states a prediction the
run can prove wrong, and edits whose predictions fail are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from mindforge.audit import usable_for_scoring
from mindforge.hcp import HCPContract
from mindforge.search.affinity import affinity, task_affinity_table
from mindforge.search.candidates import Candidate
from mindforge.search.race_models import Prediction, Verdict
from mindforge.search.state import SearchTask
from mindforge.trials.record import TrialRecord

#: affinity level -> the pass rate an edit claims on the tasks it names
CLAIMED_RATE: dict[int, float] = {0: 0.1, 1: 0.2, 2: 0.4}


def _tags(candidate: Candidate, root: HCPContract) -> frozenset[str]:
    return frozenset().union(*(e.tags(root) for e in candidate.edits))


def predict(
    candidate: Candidate,
    tasks: Sequence[SearchTask],
    root: HCPContract,
    *,
    general: bool = False,
    named: Sequence[int] | None = None,
) -> Prediction:
    """The prediction a candidate states when it is made.

    Args:
        candidate: the candidate (its edits' tags are matched against each task's audit).
        tasks: the search's failing tasks, in the state's order.
        root: the search root (edit tags depend on it).
        general: state a general lift over every task (data seeds and compositions
            with a general part), whatever the audit says.
        named: the tasks it names, when the caller knows them (a model proposal names
            the cluster it was asked for); stated at affinity level 1.

    Returns:
        a targeted prediction over the tasks where the candidate's affinity is highest
        (when that level is at least 1), else a general one over every task.
    """
    if named is not None and not general:
        chosen, level = sorted(set(named)), 1
    elif general:
        chosen, level = [], 0
    else:
        tags = _tags(candidate, root)
        levels = [affinity(task_affinity_table(t), tags) for t in tasks]
        level = max(levels, default=0)
        chosen = [i for i, lv in enumerate(levels) if lv == level] if level >= 1 else []
    if not chosen:
        return Prediction(
            scope="general", tasks=list(range(len(tasks))), classes=["*"], level=0, min_rate=CLAIMED_RATE[0]
        )
    classes = sorted({tasks[i].cluster for i in chosen})
    return Prediction(scope="targeted", tasks=chosen, classes=classes, level=level, min_rate=CLAIMED_RATE[level])


def verdict_of(trials: int, passes: int, min_rate: float, alpha: float) -> Verdict:
    """The verdict of ``passes`` in ``trials`` usable trials on the named tasks (see the module docstring).

    Raises:
        ValueError: ``passes`` outside ``0..trials``, or ``min_rate`` / ``alpha`` outside (0, 1).
    """
    if not 0 <= passes <= trials:
        raise ValueError(f"{passes} passes in {trials} trials")
    if not (0 < min_rate < 1 and 0 < alpha < 1):
        raise ValueError(f"min_rate {min_rate} and alpha {alpha} must lie in (0, 1)")
    if passes:
        return "confirmed"
    if trials and trials * math.log1p(-min_rate) <= math.log(alpha):
        return "refuted"
    return "untested"


def trials_to_refute(min_rate: float, alpha: float) -> int:
    """The fewest failures in a row that refute a claim of ``min_rate`` at level ``alpha``."""
    return math.ceil(math.log(alpha) / math.log1p(-min_rate))


def judge(prediction: Prediction, outcomes: Iterable[tuple[int, bool]], alpha: float) -> Prediction:
    """The prediction with its counts and verdict from trial outcomes.

    Args:
        prediction: what the candidate stated.
        outcomes: ``(task index, passed)`` of every usable trial of the candidate.
        alpha: the refutation level.

    Returns:
        a copy with ``trials``, ``passes`` and ``verdict`` set (``step`` unchanged).
    """
    named = set(prediction.tasks)
    trials = passes = 0
    for task, passed in outcomes:
        if task in named:
            trials += 1
            passes += int(passed)
    verdict = verdict_of(trials, passes, prediction.min_rate, alpha)
    return prediction.model_copy(update={"trials": trials, "passes": passes, "verdict": verdict})


def judge_cells(prediction: Prediction, cells: Mapping[int, tuple[int, int]], alpha: float) -> Prediction:
    """:func:`judge` from a candidate's cell tallies (task index -> (usable trials, passes)).

    The tallies are the trial outcomes counted per task (``SearchState.cells``), so the
    verdict is the one :func:`judge` gives on those outcomes.
    """
    trials = sum(cells.get(t, (0, 0))[0] for t in prediction.tasks)
    passes = sum(cells.get(t, (0, 0))[1] for t in prediction.tasks)
    verdict = verdict_of(trials, passes, prediction.min_rate, alpha)
    return prediction.model_copy(update={"trials": trials, "passes": passes, "verdict": verdict})


def judge_records(
    prediction: Prediction,
    records: Iterable[TrialRecord],
    *,
    contract_hash: str,
    task_hashes: Sequence[str],
    alpha: float,
) -> Prediction:
    """:func:`judge` read straight from stored trial records.

    Args:
        prediction: what the candidate stated (task indices into ``task_hashes``).
        records: trial records; only the candidate's (``contract_hash``) whose reward
            is real (:func:`mindforge.audit.usable_for_scoring`) count.
        contract_hash: the candidate contract.
        task_hashes: the search's failing tasks, in the state's order.
        alpha: the refutation level.
    """
    index = {h: i for i, h in enumerate(task_hashes)}
    outcomes = [
        (index[r.task_hash], r.passed)
        for r in records
        if r.contract_hash == contract_hash and r.task_hash in index and usable_for_scoring(r)
    ]
    return judge(prediction, outcomes, alpha)


def operator_factors(verdicts: Iterable[tuple[str, Verdict]]) -> dict[str, float]:
    """Operator -> prior weight in exploration, from the verdicts of its single-edit candidates.

    ``(confirmed + 1) / (confirmed + refuted + 1)``: 1 while none was refuted, a third
    after two refutations and no confirmation; never 0 (a prior, never a wall).

    Args:
        verdicts: ``(edit op, verdict)`` of each single-edit candidate's prediction.
    """
    counts: dict[str, list[int]] = {}
    for op, verdict in verdicts:
        entry = counts.setdefault(op, [0, 0])
        entry[0] += verdict == "confirmed"
        entry[1] += verdict == "refuted"
    return {op: (c + 1) / (c + r + 1) for op, (c, r) in counts.items()}
