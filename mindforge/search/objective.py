"""The search's objective: a candidate's pass rate on the search split, one posterior per candidate.

A candidate is scored by its pass rate over the failing tasks of the search split,
pooled over tasks: a Beta posterior over its usable trials, prior
``Beta(`` :data:`OBJECTIVE_PRIOR` ``)`` (a skeptical prior: most edits do not turn a
failing task into a pass). Trials are not always spread evenly over the tasks - a
targeted candidate is tried mostly on the tasks its prediction names - so the rate is
stratified by the prediction: ``w * E[rate on the named tasks] + (1 - w) * E[rate on the
others]``, each stratum with its own Beta posterior, ``w`` the named tasks' share of the
failing tasks; off its named tasks a targeted candidate claims no lift, so that stratum's
prior is stronger and lower (:data:`OFF_TARGET_PRIOR`). For a general prediction (every
task) this is the pooled Beta posterior.
Solved tasks stay in the pool: a winner keeps getting evidence.

Coverage (tasks solved by any candidate) is reported beside it
(:mod:`mindforge.search.coverage`), never optimised.

The Pareto front keeps the specialists: for each task, the candidates with the best
per-task posterior among those that passed it (GEPA's per-instance front, Agrawal et al.
2025); a candidate best on at least one task is on the front.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from mindforge.search.state import SearchState

#: Beta prior (alpha, beta) of a candidate's rate on the tasks its prediction names (every
#: task for a general prediction): mean 1/30, worth six trials - most edits lift nothing
OBJECTIVE_PRIOR = (0.2, 5.8)
#: Beta prior of a targeted candidate's rate on the tasks its prediction does not name:
#: mean 1/100, worth ten trials - it claims no lift there, where the base failed every task
OFF_TARGET_PRIOR = (0.3, 29.7)


class CandidateScore(BaseModel):
    """One candidate's standing on the objective.

    Attributes:
        index: the candidate's index in the state.
        contract_hash: its contract.
        trials / passes: usable trials and passes on the failing tasks (all purposes).
        rate: posterior mean of its stratified pass rate (the objective).
        sd: posterior standard deviation of that rate.
        tasks_passed: failing tasks (indices) it passed at least once.
    """

    index: int
    contract_hash: str
    trials: int
    passes: int
    rate: float
    sd: float
    tasks_passed: list[int]


def cell_tallies(state: SearchState) -> dict[int, dict[int, tuple[int, int]]]:
    """The state's cells regrouped: candidate index -> task index -> (usable trials, passes)."""
    out: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        out[cand][task] = (stats.usable, stats.successes)
    return out


def _beta(passes: int, trials: int, prior: tuple[float, float] = OBJECTIVE_PRIOR) -> tuple[float, float]:
    """Posterior mean and variance of a stratum with ``passes`` of ``trials``."""
    a, b = prior[0] + passes, prior[1] + trials - passes
    n = a + b
    return a / n, a * b / (n * n * (n + 1))


def score_candidate(state: SearchState, index: int, cells: dict[int, tuple[int, int]] | None = None) -> CandidateScore:
    """The objective of candidate ``index`` (see the module docstring).

    Args:
        state: the search state.
        index: the candidate's index in ``state.candidates``.
        cells: its tallies (task -> (usable, passes)) when already computed.
    """
    cells = cells if cells is not None else cell_tallies(state).get(index, {})
    n_tasks = max(len(state.tasks), 1)
    prediction = state.predictions.get(str(index))
    named = set(prediction.tasks) if prediction is not None and prediction.scope == "targeted" else set()
    everything = set(range(len(state.tasks)))
    strata = [(named, OBJECTIVE_PRIOR), (everything - named, OFF_TARGET_PRIOR)]
    if not named:
        strata = [(everything, OBJECTIVE_PRIOR)]
    rate = var = 0.0
    for stratum, prior in strata:
        weight = len(stratum) / n_tasks
        trials = sum(cells.get(t, (0, 0))[0] for t in stratum)
        passes = sum(cells.get(t, (0, 0))[1] for t in stratum)
        mean, variance = _beta(passes, trials, prior)
        rate += weight * mean
        var += weight * weight * variance
    return CandidateScore(
        index=index,
        contract_hash=state.candidates[index].contract_hash,
        trials=sum(u for u, _ in cells.values()),
        passes=sum(s for _, s in cells.values()),
        rate=rate,
        sd=var**0.5,
        tasks_passed=sorted(t for t, (_u, s) in cells.items() if s),
    )


def scores(state: SearchState) -> list[CandidateScore]:
    """Every candidate's score, in the state's order."""
    tallies = cell_tallies(state)
    return [score_candidate(state, i, tallies.get(i, {})) for i in range(len(state.candidates))]


def ranked(state: SearchState) -> list[CandidateScore]:
    """Candidates that passed at least one trial, best first: rate, then trials, then order."""
    return sorted((s for s in scores(state) if s.passes), key=lambda s: (-s.rate, -s.trials, s.index))


def pareto_front(state: SearchState) -> list[int]:
    """Indices of the candidates best on at least one failing task (ties all kept), in order.

    Per task, candidates that passed it are compared by their posterior mean pass rate
    on that task alone.
    """
    best: dict[int, tuple[float, set[int]]] = {}
    for cand, cells in cell_tallies(state).items():
        for task, (usable, passes) in cells.items():
            if not passes:
                continue
            mean = _beta(passes, usable)[0]
            top = best.get(task)
            if top is None or mean > top[0] + 1e-12:
                best[task] = (mean, {cand})
            elif abs(mean - top[0]) <= 1e-12:
                top[1].add(cand)
    return sorted(set().union(*(c for _m, c in best.values())))
