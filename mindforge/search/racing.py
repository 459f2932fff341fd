"""The racing search (``SearchConfig.strategy = "race"``): a shortlist raced on shared tasks.

Each step (:func:`plan_race_cells`):

1. **Probes.** Every racing entrant gets ``probe_attempts`` attempts before any entrant is
   dropped (the lagging entrant first; an entrant promoted from exploration counts the
   attempts it already had).
2. **The race.** Race trials follow one common task order (``SearchState.common_order``):
   an entrant's k-th race trial runs the k-th task of that order within its stratum, so
   entrants are compared on the same tasks (paired). A general entrant runs the whole
   order; a targeted one the tasks its prediction names, and every ``other_every``-th
   trial the others (the two strata of its rate, :mod:`mindforge.search.objective`).
   Race trials go to the contenders only (:func:`contenders`): the leader and every
   entrant not yet decided against it - neither clearly beaten nor within
   ``indifference`` of it (the indifference zone of racing). A clearly beaten entrant
   leaves (irace-style elimination); once every contender reached the round's quota,
   the better half by the objective goes on (never fewer than ``finalists``) and the
   quota doubles (successive halving). A race with no open contender is settled and
   spends nothing.
3. **Exploration.** A share of an open race's cells after the probes (from
   ``explore_share`` up to ``max_explore_share`` as the audit's predictions are
   confirmed, :func:`explore_share`), and every cell a settled race leaves, explore the rest
   of the edit space on the tasks nothing solved yet:
   cell posteriors with the audit's affinity as a weak prior and Thompson draws or
   upper bounds (``selection``, :func:`mindforge.search.arms.pick_adaptive`), skipping
   entrants and refuted edits, an operator's prior scaled by its predictions' record.

After each step :func:`mindforge.search.race_rounds.advance_race` (called by ``observe``)
judges the predictions, drops refuted and beaten entrants, halves a round whose quota the
contenders reached, and lets new entrants in.

Sources: successive halving (Karnin et al. 2013; Jamieson & Talwalkar 2016, as in
Hyperband), racing on shared instances (F-Race, Birattari et al. 2002; irace,
Lopez-Ibanez et al. 2016), Thompson sampling (Russo et al. 2018), GEPA's per-task Pareto
front (Agrawal et al. 2025) and AHE's edit predictions.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

from mindforge.hcp import HCPContract
from mindforge.search.arms import Arms, pick_adaptive
from mindforge.search.candidates import Candidate
from mindforge.search.objective import CandidateScore, score_candidate
from mindforge.search.predictions import operator_factors, predict
from mindforge.search.race_models import Prediction, Purpose
from mindforge.search.state import SearchState

#: a planned cell before its attempt index: (task index, candidate, purpose)
Pick = tuple[int, Candidate, Purpose]
#: standard deviations of the difference that make a comparison decided
DECIDED_SDS = 2.0


def prediction_for(state: SearchState, root: HCPContract, candidate: Candidate) -> Prediction:
    """The prediction a candidate states: stored, its entrant's, or read from the audit."""
    index = next((i for i, c in enumerate(state.candidates) if c.contract_hash == candidate.contract_hash), None)
    if index is not None and str(index) in state.predictions:
        return state.predictions[str(index)]
    entrant = next((e for e in state.entrants if e.candidate.contract_hash == candidate.contract_hash), None)
    if entrant is not None and entrant.prediction is not None:
        return entrant.prediction
    return predict(candidate, state.tasks, root)


def race_task(state: SearchState, prediction: Prediction, k: int, tried: dict[int, int] | None = None) -> int:
    """The task of an entrant's ``k``-th race trial (0-based): the common order within its stratum.

    A general entrant runs the common order itself, so general entrants (the library and
    its variants, earlier entrants) meet the same tasks in the same order. A targeted
    entrant runs the tasks its prediction names, every ``other_every``-th trial the others;
    within a stratum it takes the task nothing solved yet that it tried least (``tried``:
    task -> its attempts there), the common order breaking ties, so its rate on the stratum
    is read on tasks the search still needs.
    """
    order = state.common_order or list(range(len(state.tasks)))
    named = set(prediction.tasks)
    if prediction.scope == "general" or len(named) >= len(order):
        return order[k % len(order)]
    every = state.config.other_every
    others = [t for t in order if t not in named]
    stratum = others if others and (k + 1) % every == 0 else [t for t in order if t in named]
    tried = tried or {}
    position = {t: i for i, t in enumerate(order)}
    return min(stratum, key=lambda t: (str(t) in state.solved, tried.get(t, 0), position[t]))


def contenders(state: SearchState, scores: list[CandidateScore]) -> list[int]:
    """Indices (into ``scores``) of the entrants whose comparison with the leader is open, leader first.

    Against the leader (the best by the objective) another entrant is decided when it is
    clearly beaten (the difference exceeds :data:`DECIDED_SDS` standard deviations) or
    within ``indifference`` of the leader at that confidence (the indifference zone of
    racing: what is left to learn would not change the entrant by more than that). The
    rest, with the leader, are the contenders; none beside the leader means the race is
    settled. Empty when there are no scores.
    """
    if not scores:
        return []
    lead = max(range(len(scores)), key=lambda i: (scores[i].rate, -i))
    open_ = [i for i in range(len(scores)) if i != lead and decision(state, scores[lead], scores[i]) is None]
    return [lead, *open_] if open_ else [lead]


def decision(state: SearchState, leader: CandidateScore, other: CandidateScore) -> str | None:
    """``beaten``, ``equivalent`` or None (open) for ``other`` against the leader."""
    gap, sd = leader.rate - other.rate, math.hypot(leader.sd, other.sd)
    if gap - DECIDED_SDS * sd > 0:
        return "beaten"
    if gap + DECIDED_SDS * sd < state.config.indifference:
        return "equivalent"
    return None


class _Step:
    """One planning step's view: entrants' indices, predictions and cells planned so far."""

    def __init__(self, state: SearchState, arms: Arms) -> None:
        self.state, self.arms = state, arms
        self.planned: dict[tuple[int, str], int] = {}
        self.race_planned: dict[str, int] = defaultdict(int)
        self.all_planned: dict[str, int] = defaultdict(int)
        self._predictions: dict[str, Prediction] = {}

    def index(self, candidate: Candidate) -> int | None:
        return self.arms.pool.find(candidate.contract_hash)

    def prediction(self, candidate: Candidate) -> Prediction:
        if candidate.contract_hash not in self._predictions:
            self._predictions[candidate.contract_hash] = prediction_for(self.state, self.arms.root, candidate)
        return self._predictions[candidate.contract_hash]

    def race_count(self, candidate: Candidate) -> int:
        index = self.index(candidate)
        seen = self.state.race.trials.get(str(index), 0) if index is not None else 0
        return seen + self.race_planned[candidate.contract_hash]

    def attempts(self, candidate: Candidate) -> int:
        """Attempts of the candidate so far (any purpose), with those planned this step."""
        index = self.index(candidate)
        seen = 0
        if index is not None:
            seen = sum(s.attempts for k, s in self.state.cells.items() if k.endswith(f":{index}"))
        return seen + self.all_planned[candidate.contract_hash]

    def tried(self, candidate: Candidate) -> dict[int, int]:
        """Task -> the candidate's attempts there, with those planned this step."""
        index = self.index(candidate)
        out: dict[int, int] = defaultdict(int)
        if index is not None:
            for key, stats in self.state.cells.items():
                task, cand = (int(part) for part in key.split(":"))
                if cand == index:
                    out[task] += stats.attempts
        for (task, contract), n in self.planned.items():
            if contract == candidate.contract_hash:
                out[task] += n
        return out

    def race_pick(self, candidate: Candidate) -> Pick:
        task = race_task(self.state, self.prediction(candidate), self.race_count(candidate), self.tried(candidate))
        self.race_planned[candidate.contract_hash] += 1
        self.count(task, candidate)
        return task, candidate, "race"

    def count(self, task: int, candidate: Candidate) -> None:
        key = (task, candidate.contract_hash)
        self.planned[key] = self.planned.get(key, 0) + 1
        self.all_planned[candidate.contract_hash] += 1


def _explore_cells(rest: int, share: float, rng: random.Random) -> int:
    """Cells of ``rest`` for exploration: ``rest * share`` rounded up or down at random (unbiased)."""
    exact = rest * share
    return math.floor(exact) + int(rng.random() < exact - math.floor(exact))


def explore_share(state: SearchState) -> float:
    """The share of an open race's cells that explore, from how well the audit has predicted so far.

    ``explore_share + (max_explore_share - explore_share) * c / (c + r + 1)``, where ``c``
    and ``r`` count the confirmed and refuted predictions of candidates that never raced
    (exploration's, whose predictions come from the audit): where the audit points at
    edits that work (each task unlocked by its own edit), exploration earns more of the
    budget; where it points at decoys, the race keeps it.
    """
    entered = {e.candidate.harness_hash for e in state.entrants}
    verdicts = [
        p.verdict for i, p in state.predictions.items() if state.candidates[int(i)].harness_hash not in entered
    ]
    confirmed, refuted = verdicts.count("confirmed"), verdicts.count("refuted")
    low, high = state.config.explore_share, max(state.config.max_explore_share, state.config.explore_share)
    return low + (high - low) * confirmed / (confirmed + refuted + 1)


def _skipped(state: SearchState) -> frozenset[str]:
    """Harness hashes exploration leaves alone: refuted candidates' (never offered again in this search)."""
    return frozenset(
        state.candidates[int(i)].harness_hash for i, p in state.predictions.items() if p.verdict == "refuted"
    )


def _factors(state: SearchState) -> dict[str, float]:
    return operator_factors(
        (state.candidates[int(i)].edits[0].op, p.verdict)
        for i, p in state.predictions.items()
        if len(state.candidates[int(i)].edits) == 1
    )


def plan_race_cells(
    state: SearchState, arms: Arms, unsolved: list[int], n_cells: int, rng: random.Random
) -> list[Pick]:
    """The step's cells under ``race`` (see the module docstring); empty when nothing is left to try."""
    step = _Step(state, arms)
    racing = [e.candidate for e in state.entrants if e.status == "racing"]
    probe = state.config.probe_attempts
    picks: list[Pick] = []
    while len(picks) < n_cells:
        behind = [c for c in racing if step.attempts(c) < probe]
        if not behind:
            break
        picks.append(step.race_pick(min(behind, key=step.attempts)))
    rest = n_cells - len(picks)
    if rest <= 0:
        return picks
    scored = [(c, i) for c in racing if (i := step.index(c)) is not None]
    open_ = contenders(state, [score_candidate(state, i) for _c, i in scored])
    running = [scored[k][0] for k in open_] if len(open_) > 1 else []
    needed = sum(max(0, state.race.quota - step.race_count(c)) for c in running)
    for _ in range(min(needed, rest - _explore_cells(rest, explore_share(state), rng))):
        behind = [c for c in running if step.race_count(c) < state.race.quota]
        picks.append(step.race_pick(min(behind, key=step.race_count)))
    explored = pick_adaptive(
        state, arms, unsolved, n_cells - len(picks), rng,
        skip=_skipped(state), skip_edits=frozenset(refuted_keys(state)), factors=_factors(state),
        planned=step.planned,
    )  # fmt: skip
    for task, cand in explored:
        step.count(task, cand)
        picks.append((task, cand, "explore"))
    ahead = running or racing
    while len(picks) < n_cells and ahead:  # nothing left to explore: the race runs ahead
        picks.append(step.race_pick(min(ahead, key=step.race_count)))
    return picks


def refuted_keys(new: SearchState) -> set[str]:
    """Keys of the single edits whose own prediction was refuted (never offered again in this search)."""
    return {
        new.candidates[int(i)].edits[0].key
        for i, p in new.predictions.items()
        if p.verdict == "refuted" and len(new.candidates[int(i)].edits) == 1
    }


