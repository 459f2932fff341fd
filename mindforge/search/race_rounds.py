"""The race after each step (``observe``): verdicts, drops, halving, and who joins.

:func:`advance_race` folds a step into the race (:mod:`mindforge.search.racing` plans it):

- predictions are judged on the candidates' trials (:mod:`mindforge.search.predictions`);
- nothing is dropped before every racing entrant has run its probe attempts; then an
  entrant whose prediction was refuted leaves (AHE), one the leader beats by a test
  leaves (irace), and once the leader and its open contenders reached the round's quota
  the better half goes on (successive halving) and the quota doubles;
- the best candidate of each audit cluster by evidence joins the race while there is
  room (``max_entrants``) and it could beat the leader by more than ``indifference``;
- pairs of the best winners on the per-task Pareto front are composed and raced in turn
  (``compositions`` in all), when the composition could beat the leader were the two
  lifts independent.

Accepted model-proposed prompt edits join the race too (:func:`model_entrant`).
"""

from __future__ import annotations

import math
from collections import defaultdict

from mindforge.hcp import HCPContract
from mindforge.search.candidates import Candidate, CandidateError, CandidatePool, compose_edits, make_candidate
from mindforge.search.objective import CandidateScore, cell_tallies, pareto_front, ranked, score_candidate
from mindforge.search.predictions import judge_cells, predict
from mindforge.search.race_models import Entrant, Prediction
from mindforge.search.racing import (
    DECIDED_SDS,
    contenders,
    decision,
    prediction_for,
    refuted_keys,
)
from mindforge.search.state import SearchState, StepPlan, StepResults

#: winners on the Pareto front (by the objective) whose pairs are composed
COMPOSE_WINNERS = 3


def advance_race(new: SearchState, plan: StepPlan, results: StepResults, seen: set[str], root: HCPContract) -> None:
    """Fold a step into the race (in place, on the state ``observe`` builds; see the module docstring).

    Args:
        new: the state after the step's results were counted (``step`` not yet advanced).
        plan: the step's plan (the cells' purposes, the new candidates).
        results: the step's results.
        seen: trial ids of the results counted.
        root: the search root.
    """
    pool = CandidatePool(root, new.candidates)
    purposes = {c.trial_id: c.purpose for c in plan.cells}
    for result in results.results:
        if result.trial_id not in seen:
            continue
        purpose = purposes[result.trial_id]
        index = pool.find(result.contract_hash)
        if purpose == "race":
            new.race.trials[str(index)] = new.race.trials.get(str(index), 0) + 1
        source = new.race.sources.setdefault(purpose, [0, 0])
        source[0] += 1
        source[1] += int(result.passed)
    for candidate in plan.new_candidates:
        index = pool.find(candidate.contract_hash)
        if index is not None and str(index) not in new.predictions:
            new.predictions[str(index)] = prediction_for(new, root, candidate)
    _judge_all(new)
    if not _probed(new, pool):
        return
    _drop_refuted(new, pool)
    _halve(new, pool)
    _promote(new, pool)
    _compose(new, pool, root)


def _judge_all(new: SearchState) -> None:
    """Judge every untested prediction on the candidate's trials so far; a verdict keeps its step."""
    tallies = cell_tallies(new)
    for key, prediction in list(new.predictions.items()):
        if prediction.verdict == "untested":
            judged = judge_cells(prediction, tallies.get(int(key), {}), new.config.refute_alpha)
            if judged.verdict != "untested":
                judged = judged.model_copy(update={"step": new.step})
            new.predictions[key] = judged


def _index(pool: CandidatePool, entrant: Entrant) -> int | None:
    return pool.find(entrant.candidate.contract_hash)


def _attempts(new: SearchState, index: int) -> int:
    return sum(s.attempts for k, s in new.cells.items() if k.endswith(f":{index}"))


def _probed(new: SearchState, pool: CandidatePool) -> bool:
    """Whether every racing entrant has run its probe attempts (nothing is dropped before)."""
    for entrant in new.entrants:
        index = _index(pool, entrant)
        if entrant.status == "racing" and (index is None or _attempts(new, index) < new.config.probe_attempts):
            return False
    return True


def _drop_refuted(new: SearchState, pool: CandidatePool) -> None:
    for entrant in new.entrants:
        index = _index(pool, entrant)
        prediction = new.predictions.get(str(index)) if index is not None else None
        if entrant.status == "racing" and prediction is not None and prediction.verdict == "refuted":
            entrant.status, entrant.left_step = "refuted", new.step


def _halve(new: SearchState, pool: CandidatePool) -> None:
    """Drop entrants a test beats; once every contender reached the quota, keep the better half and double it.

    irace-style elimination (an entrant the leader beats by more than
    :data:`DECIDED_SDS` standard deviations leaves), then successive halving among the
    rest: when the leader and every entrant still open against it have run the round's
    quota of race trials, the better half by the objective goes on (never fewer than
    ``finalists``) and the quota doubles.
    """
    racing = [e for e in new.entrants if e.status == "racing" and _index(pool, e) is not None]
    if not racing:
        return
    scores = [score_candidate(new, _index(pool, e) or 0) for e in racing]
    lead = contenders(new, scores)[0]
    for i, entrant in enumerate(racing):
        if i != lead and decision(new, scores[lead], scores[i]) == "beaten":
            entrant.status, entrant.left_step = "dropped", new.step
    survivors = [i for i, e in enumerate(racing) if e.status == "racing"]
    open_ = [survivors[k] for k in contenders(new, [scores[i] for i in survivors])]
    if any(new.race.trials.get(str(_index(pool, racing[i])), 0) < new.race.quota for i in open_):
        return
    if len(open_) > 1 and len(survivors) > new.config.finalists:
        keep = max(new.config.finalists, math.ceil(len(survivors) / 2))
        for i in sorted(survivors, key=lambda i: (-scores[i].rate, i))[keep:]:
            racing[i].status, racing[i].left_step = "dropped", new.step
    if len(open_) > 1:
        new.race.round += 1
        new.race.quota *= 2


def _room(new: SearchState) -> int:
    return new.config.max_entrants - sum(e.status == "racing" for e in new.entrants)


def _could_lead(new: SearchState, pool: CandidatePool, score: CandidateScore) -> bool:
    """Whether a candidate could beat the race's leader by more than ``indifference`` (or the race has < 2)."""
    if sum(e.status == "racing" for e in new.entrants) < 2:
        return True
    return score.rate + DECIDED_SDS * score.sd >= _leader_rate(new, pool) + new.config.indifference


def _promote(new: SearchState, pool: CandidatePool) -> None:
    """The best candidate of each audit cluster by evidence joins the race (room and a chance to lead)."""
    entered = {e.candidate.harness_hash for e in new.entrants}
    tallies = cell_tallies(new)
    clusters: dict[str, list[int]] = defaultdict(list)
    for i, task in enumerate(new.tasks):
        clusters[task.cluster].append(i)
    for cluster in sorted(clusters, key=lambda c: (-len(clusters[c]), c)):
        best: tuple[float, int] | None = None
        for score in ranked(new):
            prediction = new.predictions.get(str(score.index))
            if new.candidates[score.index].harness_hash in entered or (prediction and prediction.verdict == "refuted"):
                continue
            usable = sum(tallies[score.index].get(t, (0, 0))[0] for t in clusters[cluster])
            passes = sum(tallies[score.index].get(t, (0, 0))[1] for t in clusters[cluster])
            mean = (passes + 0.5) / (usable + 1)
            if passes and (best is None or mean > best[0]):
                best = (mean, score.index)
        if best is None or _room(new) <= 0:
            continue
        score = score_candidate(new, best[1])
        if _could_lead(new, pool, score):
            candidate = new.candidates[best[1]]
            new.entrants.append(
                Entrant(
                    candidate=candidate, reason="cluster_best", joined_step=new.step,
                    prediction=new.predictions.get(str(best[1])),
                )
            )  # fmt: skip
            entered.add(candidate.harness_hash)


def _leader_rate(new: SearchState, pool: CandidatePool) -> float:
    racing = [i for e in new.entrants if e.status == "racing" and (i := _index(pool, e)) is not None]
    return max((score_candidate(new, i).rate for i in racing), default=0.0)


def _compose(new: SearchState, pool: CandidatePool, root: HCPContract) -> None:
    """Pairs of the best winners on the Pareto front, composed, join the race (``compositions`` in all).

    The parents are the candidates best on at least one failing task (GEPA's per-task
    front, so a specialist's tasks are not lost), the best by the objective first.

    A pair is composed when the composition could beat the race's leader by more than
    ``indifference`` were the two lifts independent: ``1 - (1 - a)(1 - b)``, from the
    parts' rates ``a`` and ``b`` - two edits that each lift a different handful of tasks
    a little are not worth a race.
    """
    refuted = refuted_keys(new)
    front = set(pareto_front(new))
    scored = [
        s for s in ranked(new) if s.index in front and not refuted & set(new.candidates[s.index].edit_keys)
    ][:COMPOSE_WINNERS]
    entered = {e.candidate.harness_hash for e in new.entrants}
    leader = _leader_rate(new, pool)
    for a_pos, score_a in enumerate(scored):
        for score_b in scored[a_pos + 1 :]:
            a, b = score_a.index, score_b.index
            if new.race.compositions >= new.config.compositions or _room(new) <= 0:
                return
            if 1 - (1 - score_a.rate) * (1 - score_b.rate) < leader + new.config.indifference:
                continue
            try:
                edits = compose_edits(new.candidates[a].edits, new.candidates[b].edits)
                candidate = make_candidate(root, edits, origin="compose", step=new.step)
            except CandidateError:
                continue
            if pool.duplicate_of(candidate) is not None or candidate.harness_hash in entered:
                continue
            parts = [new.predictions.get(str(i)) for i in (a, b)]
            general = any(p is None or p.scope == "general" for p in parts)
            named = sorted({t for p in parts if p is not None for t in p.tasks})
            prediction = predict(candidate, new.tasks, root, general=general, named=None if general else named)
            new.entrants.append(
                Entrant(candidate=candidate, reason="compose", joined_step=new.step, prediction=prediction)
            )
            entered.add(candidate.harness_hash)
            new.race.compositions += 1


def model_entrant(
    new: SearchState, root: HCPContract, candidate: Candidate, cluster: str
) -> tuple[Entrant, Prediction]:
    """The entrant of an accepted model-proposed prompt edit and its prediction: the tasks of its cluster."""
    named = [i for i, t in enumerate(new.tasks) if t.cluster == cluster]
    prediction = predict(candidate, new.tasks, root, named=named or None)
    return Entrant(candidate=candidate, reason="model", joined_step=new.step, prediction=prediction), prediction
