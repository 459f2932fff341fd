"""Adaptive allocation of selection trials among successor candidates: successive halving with a race.

The successor check races the search's leading contracts on the selection split within
a budget of ``budget`` attempts per selection task, shared among them. Rounds follow
successive halving (Jamieson & Talwalkar 2016, "Non-stochastic Best Arm Identification
and Hyperparameter Optimization", AISTATS; Karnin et al. 2013): with ``n`` candidates
there are ``R = ceil(log2 n)`` rounds (at least 1); round ``r`` gives each of its
``ceil(n / 2**r)`` survivors ``floor(budget / (survivors * R))`` more attempts on every
selection task (at least 1), ranks them by mean selection score and keeps the better
half; the last round keeps one, the finalist. At each round's end a Hoeffding race
(Maron & Moore 1994, "Hoeffding Races") also stops any candidate whose upper bound on its
per-trial reward lies below the leader's lower bound (union bound over every comparison,
``delta`` in all), so clear losers take no more trials. The leaders get the most trials:
with 4 candidates and a budget of 8 the finalist runs 3 attempts a task, the others 1.

The parent runs ``parent_attempts`` attempts on every task in round 0, beside the
candidates. The plan is a pure function of the stored selection trials: it finds the
first round with a trial missing and returns exactly those trials, so a retried or
resumed check re-plans the same trials (deterministic ids, run once) and a finished
round is never re-run. Only trials on ``tasks`` (the selection split) under the parent's
adapter are read; every id read is returned. Ranking on the trials the final rule then
reads is a best-of-N choice on the selection split (a little optimistic); the sealed split,
which no decision reads, is what measures the successor.

Pure: pydantic and the trial model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel, Field

from mindforge.evaluation.scoring import PairRef, score_tasks
from mindforge.trials.record import TrialRecord


class RaceConfig(BaseModel):
    """How selection trials are shared among successor candidates.

    Attributes:
        budget: attempts per selection task shared among the candidates (>= 1).
        parent_attempts: attempts per selection task of the parent pair.
        delta: total error probability of the Hoeffding race's early stops.
    """

    budget: int = Field(default=8, ge=1)
    parent_attempts: int = Field(default=2, ge=1)
    delta: float = Field(default=0.05, gt=0, lt=1)


class RaceTrial(BaseModel):
    """One selection trial the race needs: a contract (with the parent's adapter), a task, an attempt."""

    contract_hash: str
    task_hash: str
    attempt: int


class RaceRound(BaseModel):
    """A finished round.

    Attributes:
        round: its index from 0.
        attempts: attempts per task each survivor had after it.
        alive: the candidates it ran, best first after it.
        scores: candidate -> mean selection score over its scored tasks (None: none scored).
        eliminated: candidate -> why it stopped after this round.
    """

    round: int
    attempts: int
    alive: list[str]
    scores: dict[str, float | None]
    eliminated: dict[str, str] = Field(default_factory=dict)


class RacePlan(BaseModel):
    """The race's state, read from the stored trials (:func:`plan_race`).

    Attributes:
        round: the round whose trials ``trials`` are (the last round when done).
        trials: trials of that round not yet stored; empty when done.
        done: every round ran.
        finalist: the candidate that survived every round (None: no candidates, or not done).
        rounds: finished rounds.
        schedule: ``(survivors, attempts per task)`` planned per round.
        trial_ids: every trial read, sorted.
    """

    round: int = 0
    trials: list[RaceTrial] = Field(default_factory=list)
    done: bool = False
    finalist: str | None = None
    rounds: list[RaceRound] = Field(default_factory=list)
    schedule: list[tuple[int, int]] = Field(default_factory=list)
    trial_ids: list[str] = Field(default_factory=list)


def race_schedule(candidates: int, budget: int) -> list[tuple[int, int]]:
    """``(survivors, attempts per task)`` of each successive-halving round.

    Args:
        candidates: candidates raced (>= 1).
        budget: attempts per selection task shared among them.

    Returns:
        one pair per round; the attempts of a round are added to every survivor.

    Raises:
        ValueError: no candidates.
    """
    if candidates < 1:
        raise ValueError(f"a race needs at least one candidate, got {candidates}")
    rounds = max(1, math.ceil(math.log2(candidates)))
    out, alive = [], candidates
    for _ in range(rounds):
        out.append((alive, max(1, budget // (alive * rounds))))
        alive = math.ceil(alive / 2)
    return out


def finalist_attempts(candidates: int, budget: int) -> int:
    """Attempts per selection task the finalist of a race of ``candidates`` has run."""
    return sum(a for _, a in race_schedule(candidates, budget))


def _hoeffding(records: list[TrialRecord], delta: float) -> tuple[float, float]:
    """(lower, upper) Hoeffding bounds on the per-trial reward of usable ``records``."""
    rewards = [float(r.reward) for r in records if r.reward is not None and r.has_real_reward]
    if not rewards:
        return 0.0, 1.0
    mean = sum(rewards) / len(rewards)
    half = math.sqrt(math.log(2 / delta) / (2 * len(rewards)))
    return mean - half, mean + half


def _finish_round(
    index: int, attempts: int, alive: list[str], last: bool, records: list[TrialRecord], parent: PairRef,
    tasks: set[str], config: RaceConfig, comparisons: int,
) -> RaceRound:
    """Rank the round's survivors, stop clear losers (race) and keep the better half (halving)."""
    mine = {c: [r for r in records if r.contract_hash == c and r.attempt < attempts] for c in alive}
    scores = {c: score_tasks(mine[c], PairRef(contract_hash=c, adapter=parent.adapter), tasks).mean for c in alive}
    order = {c: i for i, c in enumerate(alive)}  # ties: the search's order
    ranked = sorted(alive, key=lambda c: (-(scores[c] or 0.0), order[c]))
    bounds = {c: _hoeffding(mine[c], config.delta / max(1, comparisons)) for c in alive}
    leader_low = bounds[ranked[0]][0]
    eliminated = {
        c: f"Hoeffding race after round {index}: upper bound {bounds[c][1]:.2f} below the leader's lower bound "
        f"{leader_low:.2f}"
        for c in ranked[1:]
        if bounds[c][1] < leader_low
    }
    keep = 1 if last else math.ceil(len(alive) / 2)
    for place, c in enumerate(ranked):
        if c not in eliminated and place >= keep:
            eliminated[c] = f"successive halving after round {index}: ranked {place + 1} of {len(alive)}"
    return RaceRound(round=index, attempts=attempts, alive=ranked, scores=scores, eliminated=eliminated)


def plan_race(
    records: Iterable[TrialRecord], parent: PairRef, candidates: list[str], tasks: set[str], config: RaceConfig
) -> RacePlan:
    """The race's next trials, or its finalist, from the selection trials stored so far.

    Args:
        records: selection trials (others - other tasks, other adapters - are ignored).
        parent: the generation's pair (its adapter runs every candidate).
        candidates: candidate contract hashes, best first by search evidence (the parent is dropped).
        tasks: the selection split's task hashes.
        config: budget, parent attempts, race confidence.

    Returns:
        the plan: the missing trials of the first unfinished round, or ``done`` with the finalist.
    """
    candidates = [c for c in dict.fromkeys(candidates) if c != parent.contract_hash]
    read = [r for r in records if r.task_hash in tasks and r.adapter == parent.adapter]
    read = [r for r in read if (r.contract_hash or "") in {parent.contract_hash, *candidates}]
    plan = RacePlan(trial_ids=sorted(r.trial_id for r in read))
    if not candidates or not tasks:
        plan.done = True
        return plan
    have = {(r.contract_hash or "", r.task_hash, r.attempt) for r in read}
    plan.schedule = race_schedule(len(candidates), config.budget)
    comparisons = len(candidates) * len(plan.schedule)
    alive, total = list(candidates), 0
    for index, (_planned, attempts) in enumerate(plan.schedule):
        total += attempts
        wanted = [(c, t, a) for c in alive for t in sorted(tasks) for a in range(total)]
        if index == 0:
            base = [(parent.contract_hash, t, a) for t in sorted(tasks) for a in range(config.parent_attempts)]
            wanted = base + wanted
        missing = [RaceTrial(contract_hash=c, task_hash=t, attempt=a) for c, t, a in wanted if (c, t, a) not in have]
        plan.round = index
        if missing:
            plan.trials = missing
            return plan
        last = index == len(plan.schedule) - 1
        done = _finish_round(index, total, alive, last, read, parent, tasks, config, comparisons)
        plan.rounds.append(done)
        alive = [c for c in done.alive if c not in done.eliminated]
    plan.done = True
    plan.finalist = alive[0] if alive else None
    return plan
