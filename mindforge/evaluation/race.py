"""The successor race: the search's best one or two contracts race the parent on selection, and stop when settled.

**The full race** (a fixed size): the parent pair runs ``parent_attempts`` attempts of
every selection task and each of the ``m`` candidates (contracts run with the parent's
adapter, best first by search pass rate) ``candidate_attempts(m, budget)`` =
``max(1, budget // m)``. The decision is the gate's (:mod:`mindforge.evaluation.gate`,
:func:`mindforge.evaluation.decisions.choose_successor`): a candidate may replace the
parent when its paired selection lift over the parent has a mean above 0 and a lower bound
above 0 at the Bonferroni level ``1 - 0.05 / m`` on at least ``min_tasks`` paired tasks;
among those, the highest lower bound wins.

**Looks and curtailment.** The full race's cells - ``(attempt, task)``, attempt-major over
the sorted tasks, so every task is paired before any gets a second attempt - are cut into
at most ``looks`` consecutive looks. After each look, for each candidate, the rule is
evaluated at the two extremes of every way the rest of the full race could end (Eisenberg
& Simon's curtailment of a fixed-size test; Jennison & Turnbull 2000, ch. 10): its
remaining trials all failing and the parent's all passing, and the reverse. A task's score
is a mean over usable attempts, so every completion's score lies between those extremes
(an attempt that errors is left out, which moves the mean less than a 0 or a 1 would), and
the rule is monotone in every paired difference; so when both extremes give one verdict,
every completion does, and the candidate is **settled**. A task whose side has no usable
attempt yet but trials to come may end paired or not: every subset of such tasks (at most
:data:`MAX_UNDETERMINED`) is tried, and with more the candidate stays open. A settled
candidate runs no more trials; the race is over when every candidate is settled and at most
one that passes remains whose lower bound can still beat another's. A decision on the trials
of a race cut short is the full race's decision, because the stored scores are themselves one
of the completions bounded above (``tests/unit/evaluation/test_race_curtailment.py`` checks
it on simulated trials). ``early_stop`` False runs the full race.

The plan is a pure function of the stored selection trials: it settles what it can and
returns the missing trials of the first look that an open racer still needs, so a retried
or resumed race re-plans the same trials (deterministic ids, run once). Every stored trial
of a racer on ``tasks`` under the parent's adapter is read - also those run in an earlier
generation, so a pair measured before is not run again - and every id read is returned.

Pure: pydantic, numpy/scipy (through the gate) and the trial model.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from pydantic import BaseModel, Field

from mindforge.evaluation.gate import bonferroni_confidence, judge_lift
from mindforge.evaluation.scoring import PairRef
from mindforge.trials.record import TrialRecord

#: tasks that may or may not end paired (a side with no usable attempt yet) the early stop still enumerates
MAX_UNDETERMINED = 3


class RaceConfig(BaseModel):
    """The full race's size, its looks and the gate it decides by.

    Attributes:
        budget: attempts per selection task shared among the candidates (each runs ``budget // m``, at least 1).
        parent_attempts: attempts per selection task of the parent pair.
        looks: the most looks the full race is cut into (each a round of the workflow).
        early_stop: stop a candidate (and the race) once its verdict is settled (curtailment).
        min_tasks / resamples / seed: the gate's (:func:`mindforge.evaluation.decisions.choose_successor`).
    """

    budget: int = Field(default=4, ge=1)
    parent_attempts: int = Field(default=2, ge=1)
    looks: int = Field(default=8, ge=1)
    early_stop: bool = True
    min_tasks: int = Field(default=5, ge=1)
    resamples: int = Field(default=2000, ge=1)
    seed: int = 0


class RaceTrial(BaseModel):
    """One selection trial the race needs: a contract (with the parent's adapter), a task, an attempt."""

    contract_hash: str
    task_hash: str
    attempt: int


class Settled(BaseModel):
    """A candidate's verdict over every completion of the full race (:func:`settle`).

    Attributes:
        passes: True / False when every completion gives that verdict; None while open.
        lo_min / lo_max: the range of its lower bound over the completions (None: not comparable).
    """

    passes: bool | None = None
    lo_min: float | None = None
    lo_max: float | None = None


class RacePlan(BaseModel):
    """The race's state, read from the stored trials (:func:`plan_race`).

    Attributes:
        candidates: the contracts raced, best first by search evidence (the parent left out).
        candidate_attempts / parent_attempts: attempts per task in the full race.
        confidence: the interval level each candidate is judged at (Bonferroni over ``candidates``).
        looks: looks of the full race; look: the look whose trials ``trials`` are (the last one run when done).
        trials: that look's missing trials; empty when done.
        done: the outcome is settled (or the full race ran).
        settled: candidate -> ``passes`` / ``fails`` / ``loses`` (passes, but another's lower bound is
            surely higher) / ``open``.
        full_trials: trials of the full race (parent and candidates; stored ones included).
        run_trials: of those, stored (in this generation or an earlier one).
        stopped_early: done with trials of the full race never run.
        trial_ids: every trial read, sorted.
    """

    candidates: list[str] = Field(default_factory=list)
    candidate_attempts: int = 0
    parent_attempts: int = 0
    confidence: float = 0.95
    looks: int = 0
    look: int = 0
    trials: list[RaceTrial] = Field(default_factory=list)
    done: bool = False
    settled: dict[str, str] = Field(default_factory=dict)
    full_trials: int = 0
    run_trials: int = 0
    stopped_early: bool = False
    trial_ids: list[str] = Field(default_factory=list)


def candidate_attempts(candidates: int, budget: int) -> int:
    """Attempts per selection task each of ``candidates`` candidates runs in the full race (``budget // m``, >= 1).

    Raises:
        ValueError: no candidates.
    """
    if candidates < 1:
        raise ValueError(f"a race needs at least one candidate, got {candidates}")
    return max(1, budget // candidates)


def race_looks(tasks: list[str], attempts: int, looks: int) -> list[list[tuple[int, str]]]:
    """The full race's ``(attempt, task)`` cells, attempt-major, cut into at most ``looks`` near-equal looks."""
    cells = [(a, t) for a in range(attempts) for t in sorted(tasks)]
    n = max(1, min(looks, len(cells)))
    bounds = [i * len(cells) // n for i in range(n + 1)]
    return [cells[bounds[i] : bounds[i + 1]] for i in range(n)]


class _Side(BaseModel):
    """One pair's usable rewards on one task and the attempts of the full race still to come."""

    total: float = 0.0
    usable: int = 0
    remaining: int = 0

    def bounds(self) -> tuple[float, float]:
        """(lowest, highest) score any completion gives (the attempts to come all 0, or all 1)."""
        if not self.usable:
            return 0.0, 1.0
        n = self.usable + self.remaining
        return self.total / n, (self.total + self.remaining) / n


def _sides(read: list[TrialRecord], contract: str, tasks: list[str], attempts: int) -> dict[str, _Side]:
    """Per task: the usable rewards of ``contract``'s stored trials and its full-race attempts not stored yet."""
    from mindforge.audit import usable_for_scoring

    out = {t: _Side(remaining=attempts) for t in tasks}
    stored: set[tuple[str, int]] = set()
    for r in read:
        if (r.contract_hash or "") != contract or r.task_hash not in out:
            continue
        stored.add((r.task_hash, r.attempt))
        if usable_for_scoring(r) and r.reward is not None:
            out[r.task_hash].total += float(r.reward)
            out[r.task_hash].usable += 1
    for t, side in out.items():
        side.remaining = sum(1 for a in range(attempts) if (t, a) not in stored)
    return out


def settle(parent: dict[str, _Side], candidate: dict[str, _Side], config: RaceConfig, confidence: float) -> Settled:
    """A candidate's verdict over every completion of the full race, when all of them agree.

    Args:
        parent / candidate: per task, each side's stored usable rewards and attempts to come.
        config: the gate's settings.
        confidence: the candidate's interval level.

    Returns:
        ``passes`` True/False when settled (with the range of its lower bound), None while open.
    """
    paired, maybe = [], []
    for t in sorted(candidate):
        sides = (parent[t], candidate[t])
        if all(s.usable for s in sides):
            paired.append(t)
        elif all(s.usable or s.remaining for s in sides):
            maybe.append(t)
    if len(maybe) > MAX_UNDETERMINED:
        return Settled()
    verdicts: set[tuple[bool, bool]] = set()
    lows: list[float] = []
    for size in range(len(maybe) + 1):
        for extra in itertools.combinations(maybe, size):
            tasks = sorted([*paired, *extra])
            p_bounds = [parent[t].bounds() for t in tasks]
            c_bounds = [candidate[t].bounds() for t in tasks]
            for p_side, c_side in ((1, 0), (0, 1)):  # worst case for the candidate, then best case
                v = judge_lift(
                    [b[p_side] for b in p_bounds], [b[c_side] for b in c_bounds], min_tasks=config.min_tasks,
                    confidence=confidence, resamples=config.resamples, seed=config.seed,
                )
                verdicts.add((v.passed, v.comparable))  # "cannot compare" is a verdict of its own
                if v.lo is not None:
                    lows.append(v.lo)
    if len(verdicts) != 1:
        return Settled()
    return Settled(passes=verdicts.pop()[0], lo_min=min(lows, default=None), lo_max=max(lows, default=None))


def _states(verdicts: dict[str, Settled]) -> dict[str, str]:
    """Candidate -> ``passes`` / ``fails`` / ``loses`` / ``open`` from the settled verdicts."""
    states = {c: "open" if v.passes is None else "passes" if v.passes else "fails" for c, v in verdicts.items()}
    passing = [c for c, s in states.items() if s == "passes"]
    for c in passing:
        top = verdicts[c].lo_max
        if any(o != c and top is not None and (verdicts[o].lo_min or 0.0) > top for o in passing):
            states[c] = "loses"
    return states


def plan_race(
    records: Iterable[TrialRecord], parent: PairRef, candidates: list[str], tasks: set[str], config: RaceConfig
) -> RacePlan:
    """The race's next trials, or ``done``, from the selection trials stored so far.

    Args:
        records: selection trials (others - other tasks, other adapters, other contracts - are ignored).
        parent: the generation's pair (its adapter runs every candidate).
        candidates: candidate contract hashes, best first by search evidence (the parent is dropped).
        tasks: the selection split's task hashes.
        config: the full race's size, its looks and the gate's settings.

    Returns:
        the plan: the missing trials of the first look an open racer needs, or ``done``.
    """
    candidates = [c for c in dict.fromkeys(candidates) if c != parent.contract_hash]
    read = [r for r in records if r.task_hash in tasks and r.adapter == parent.adapter]
    read = [r for r in read if (r.contract_hash or "") in {parent.contract_hash, *candidates}]
    plan = RacePlan(candidates=candidates, trial_ids=sorted(r.trial_id for r in read))
    if not candidates or not tasks:
        plan.done = True
        return plan
    ordered = sorted(tasks)
    m = len(candidates)
    plan.candidate_attempts, plan.parent_attempts = candidate_attempts(m, config.budget), config.parent_attempts
    plan.confidence = bonferroni_confidence(m)
    attempts = {parent.contract_hash: config.parent_attempts, **{c: plan.candidate_attempts for c in candidates}}
    sides = {c: _sides(read, c, ordered, a) for c, a in attempts.items()}
    plan.full_trials = sum(a for a in attempts.values()) * len(ordered)
    plan.run_trials = plan.full_trials - sum(s.remaining for side in sides.values() for s in side.values())
    if config.early_stop:
        verdicts = {c: settle(sides[parent.contract_hash], sides[c], config, plan.confidence) for c in candidates}
        plan.settled = _states(verdicts)
    else:
        plan.settled = {c: "open" for c in candidates}
    undecided = [c for c, s in plan.settled.items() if s in ("open", "passes")]
    running = [] if len(undecided) == 1 and plan.settled[undecided[0]] == "passes" else undecided
    looks = race_looks(ordered, max(attempts.values()), config.looks)
    plan.looks = len(looks)
    stored = {(r.contract_hash or "", r.task_hash, r.attempt) for r in read}
    racers = [parent.contract_hash, *running] if running else []
    for index, look in enumerate(looks):
        missing = [
            RaceTrial(contract_hash=c, task_hash=t, attempt=a)
            for c in racers for a, t in look if a < attempts[c] and (c, t, a) not in stored
        ]
        if missing:
            plan.look, plan.trials = index, missing
            return plan
        if any((c, t, a) in stored for c in attempts for a, t in look):
            plan.look = index  # the last look with a stored trial
    plan.done = True
    plan.stopped_early = plan.run_trials < plan.full_trials
    return plan

