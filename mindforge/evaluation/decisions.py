"""Decisions on the selection split: the successor contract and the adapter promotion gate.

Every decision reads only trials on ``selection`` tasks and records which split and
which trial ids it read (``decided_on``, ``trial_ids``), so a report can show that no
sealed trial ever took part in one. The sealed split is for measurement only
(:mod:`mindforge.evaluation.lift`).

Pure: pydantic, numpy (through the statistics) and the trial model.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from mindforge.evaluation.gate import (
    GATE_CONFIDENCE,
    TIE_TOLERANCE,
    LiftVerdict,
    bonferroni_confidence,
    false_promotion_bound,
    gain_passes,
    judge_lift,
)
from mindforge.evaluation.lift import LiftReport, paired_lift
from mindforge.evaluation.scoring import PairRef, score_tasks
from mindforge.evaluation.splits import PoolSplit
from mindforge.trials.record import TrialRecord


class SuccessorChoice(BaseModel):
    """The outcome of :func:`choose_successor`.

    Attributes:
        decided_on: the split the decision read (always ``selection``).
        contract_hash: the chosen contract (the parent when nothing is promoted).
        promoted: True when a candidate replaced the parent.
        cannot_compare: no candidate shared a scored selection task with the parent.
        reason: why, in words.
        lift: ``(mean, lo, hi)`` of the chosen candidate's selection lift, or None.
        n_tasks: selection tasks the decision used.
        scores: contract hash -> mean selection score over its scored tasks.
        considered: per candidate: ``n_tasks``, ``lift`` and ``passed``, or ``skipped`` (why).
        candidates: the candidates raced (``m``; the parent left out).
        confidence: the level each candidate's interval was judged at (Bonferroni over ``m``).
        trial_ids: every trial the decision read, sorted.
        reused: the trials it read that an earlier generation ran: ``{"generation", "contract_hash",
            "adapter", "trials"}`` per generation and pair (recorded by the activity that reads the store).
        rule: the rule applied, with its error for the number of candidates, in words.
        race: how the selection trials were run (:class:`mindforge.evaluation.race.RacePlan` as
            JSON: looks, what settled each candidate, trials run of the full race).
    """

    decided_on: PoolSplit = PoolSplit.SELECTION
    contract_hash: str
    promoted: bool
    cannot_compare: bool = False
    reason: str
    lift: tuple[float, float, float] | None = None
    n_tasks: int = 0
    scores: dict[str, float | None] = Field(default_factory=dict)
    considered: dict[str, dict] = Field(default_factory=dict)
    candidates: int = 0
    confidence: float = GATE_CONFIDENCE
    trial_ids: list[str] = Field(default_factory=list)
    reused: list[dict] = Field(default_factory=list)
    rule: str = ""
    race: dict = Field(default_factory=dict)


def successor_rule(min_tasks: int, candidates: int = 1) -> str:
    """The successor gate's rule in words, with its error for ``candidates`` raced (decision record and report)."""
    m = max(1, candidates)
    level = bonferroni_confidence(m)
    judged = (
        "its 95% interval" if m == 1
        else f"its {level:.1%} interval (Bonferroni over the {m} candidates raced)"
    )
    return (
        f"promote the raced candidate (the parent's adapter) whose paired selection lift over the parent has a mean "
        f"above 0 and a lower bound of {judged} above 0 on at least {min_tasks} paired selection tasks, the highest "
        f"lower bound first; otherwise keep the parent. A tie never passes. The chance that a candidate without a "
        f"gain is promoted is at most {false_promotion_bound(m):.1%} (nominal, one-sided, over all {m} raced)"
    )


def _kept_reason(considered: dict[str, dict]) -> str:
    """Why the parent is kept: no candidate, none comparable, none with enough evidence, or no gain."""
    if not considered:
        return "no candidate contract besides the parent reached selection; the parent is kept"
    if all(c.get("cannot_compare") for c in considered.values()):
        return "cannot compare: no candidate shares a scored selection task with the parent; the parent is kept"
    measured = [c for c in considered.values() if "lift" in c]
    if not measured:
        skipped = sorted({c["skipped"] for c in considered.values()})
        why = ", ".join(skipped)
        return f"no candidate had evidence on selection ({len(considered)} skipped: {why}); the parent is kept"
    return f"no candidate's selection lift passes the gate ({len(measured)} measured: {measured[0]['why']}); " \
        "the parent is kept"


def choose_successor(
    records: Iterable[TrialRecord],
    parent: PairRef,
    candidates: list[str],
    selection_tasks: set[str],
    *,
    min_tasks: int = 5,
    resamples: int = 2000,
    seed: int = 0,
) -> SuccessorChoice:
    """Pick the next generation's contract; promote a candidate only on a gain on selection.

    Rule (:func:`successor_rule`, :func:`mindforge.evaluation.gate.judge_lift`): each of the
    ``m`` candidates runs with the parent's adapter on the selection tasks; it needs at
    least ``min_tasks`` tasks scored under both it and the parent, a mean paired lift above
    0 and a lower bound above 0 of its paired bootstrap interval at the Bonferroni level
    ``1 - 0.05 / m``. Among qualifying candidates the highest lower bound wins (then the
    higher mean, then the smaller hash); otherwise the parent is kept. Only trials on
    ``selection_tasks`` are read. The race (:func:`mindforge.evaluation.race.plan_race`)
    stops only when this decision is settled, so a race cut short decides as the full race would.

    Args:
        records: trials (only the parent's and candidates' on selection tasks are read).
        parent: the generation's pair.
        candidates: the candidate contract hashes raced (run with ``parent.adapter``).
        selection_tasks: the lineage's selection-split task hashes.
        min_tasks: fewest paired tasks for a decision.
        resamples / seed: bootstrap settings.

    Returns:
        the choice, with the per-candidate evidence and every trial id read.
    """
    records = [r for r in records if r.task_hash in selection_tasks]
    raced = [c for c in dict.fromkeys(candidates) if c != parent.contract_hash]
    confidence = bonferroni_confidence(max(1, len(raced)))
    base = score_tasks(records, parent, selection_tasks)
    read = set(base.trial_ids)
    scores: dict[str, float | None] = {parent.contract_hash: base.mean}
    considered: dict[str, dict] = {}
    best: tuple[tuple[float, float], str, LiftVerdict] | None = None
    for contract in sorted(raced):
        cand = score_tasks(records, PairRef(contract_hash=contract, adapter=parent.adapter), selection_tasks)
        read |= set(cand.trial_ids)
        scores[contract] = cand.mean
        tasks = sorted(set(base.scores) & set(cand.scores))
        verdict = judge_lift(
            [base.scores[t] for t in tasks], [cand.scores[t] for t in tasks], min_tasks=min_tasks,
            confidence=confidence, resamples=resamples, seed=seed,
        )
        if not verdict.comparable:
            considered[contract] = {"n_tasks": 0, "cannot_compare": True, "skipped": verdict.why}
            continue
        if len(tasks) < min_tasks:
            considered[contract] = {"n_tasks": len(tasks), "skipped": f"fewer than {min_tasks} scored selection tasks"}
            continue
        considered[contract] = {
            "n_tasks": len(tasks), "lift": [verdict.mean, verdict.lo, verdict.hi], "passed": verdict.passed,
            "why": verdict.why,
        }
        key = (verdict.lo or 0.0, verdict.mean or 0.0)  # ties: the first in sorted order (smaller hash) stays
        if verdict.passed and (best is None or key > best[0]):
            best = (key, contract, verdict)
    evidence = {
        "scores": scores, "considered": considered, "trial_ids": sorted(read), "candidates": len(raced),
        "confidence": confidence, "rule": successor_rule(min_tasks, len(raced)),
    }
    if best is None:
        cannot = bool(considered) and all(c.get("cannot_compare") for c in considered.values())
        return SuccessorChoice(
            contract_hash=parent.contract_hash, promoted=False, cannot_compare=cannot,
            reason=_kept_reason(considered), **evidence,
        )
    _key, contract, verdict = best
    lift = (float(verdict.mean or 0.0), float(verdict.lo or 0.0), float(verdict.hi or 0.0))
    return SuccessorChoice(
        contract_hash=contract, promoted=True, reason=verdict.why, lift=lift, n_tasks=verdict.n_tasks, **evidence,
    )


class PromotionDecision(BaseModel):
    """The pair gate's outcome (:func:`decide_promotion`, :func:`decide_pair`).

    Attributes:
        decided_on: the split the decision read (always ``selection``).
        promoted: True when the pair under test goes into the next generation.
        cannot_compare: the two pairs share no scored selection task (no decision could be made).
        reason: why, in words.
        rule: the rule applied, in words (what the report states).
        margin: the non-inferiority margin (reward units; 0 = the lower bound must be above 0).
        min_tasks: the fewest paired selection tasks the gate decides on.
        lift: the selection lift of the pair under test over the pair it would replace (for the
            pair gate: the trained pair over the kept pair).
        trial_ids: every trial the decision read, sorted.
        reused: the trials it read that an earlier generation ran: ``{"generation", "contract_hash",
            "adapter", "trials"}`` per generation and pair (recorded by the activity that reads the store).
    """

    decided_on: PoolSplit = PoolSplit.SELECTION
    promoted: bool
    cannot_compare: bool = False
    reason: str
    rule: str = ""
    margin: float = 0.0
    min_tasks: int = 1
    lift: LiftReport
    trial_ids: list[str] = Field(default_factory=list)
    reused: list[dict] = Field(default_factory=list)


def promotion_rule(margin: float, min_tasks: int) -> str:
    """The promotion gate's rule in words (stated in the decision record and the report)."""
    bound = "above 0" if margin == 0 else f"above -{margin:g} (a declared non-inferiority margin of {margin:g})"
    return (
        f"promote when the paired selection lift's mean is above 0 and its 95% lower bound is {bound} on at least "
        f"{min_tasks} paired selection task(s): a tie never passes, whatever the margin, and two pairs with no "
        "selection task in common cannot be compared. Without a margin the chance of a promotion without a gain is "
        "at most 2.5% (nominal, one-sided)"
    )


def decide_promotion(
    records: Iterable[TrialRecord],
    without: PairRef,
    with_adapter: PairRef,
    selection_tasks: set[str],
    *,
    min_tasks: int,
    margin: float = 0.0,
    resamples: int = 2000,
    seed: int = 0,
) -> PromotionDecision:
    """Promote a pair over another only on a gain on selection, by a stated rule.

    Rule (:func:`promotion_rule`, :mod:`mindforge.evaluation.gate`): the pair under test
    (``with_adapter``) and the pair it would replace (``without``) run the same selection
    tasks; the pair under test is promoted when the mean paired lift is above 0 (a tie never
    passes, margin or not) and the paired bootstrap lift's 95% lower bound is above
    ``-margin`` (``margin`` 0: above 0, superiority; a positive margin is a declared
    non-inferiority margin) on at least ``min_tasks`` paired tasks. Two pairs with no task
    scored under both cannot be compared: the decision says so (``cannot_compare``) and
    promotes nothing. The gate's power at the configured trials is
    :mod:`mindforge.evaluation.power`.

    Args:
        records: trials (only the two pairs' on selection tasks are read).
        without / with_adapter: the pair that would be replaced, and the pair under test.
        selection_tasks: the lineage's selection-split task hashes.
        min_tasks: the fewest paired tasks for a promotion (the spec's ``splits.min_tasks``).
        margin: the non-inferiority margin in reward units (>= 0).
        resamples / seed: bootstrap settings of the interval.

    Returns:
        the decision, with the rule in words, the lift it read and its trial ids.

    Raises:
        ValueError: a negative margin.
    """
    if margin < 0:
        raise ValueError(f"the non-inferiority margin must be >= 0, got {margin}")
    lift = paired_lift(
        [r for r in records if r.task_hash in selection_tasks],
        without,
        with_adapter,
        selection_tasks,
        measured_on=PoolSplit.SELECTION,
        resamples=resamples,
        seed=seed,
    )
    kept = "; the pair it would replace is kept"
    cannot = False
    if not selection_tasks:
        promoted, reason = False, f"no evidence: {lift.reason}{kept}"
    elif lift.mean is None or lift.lo is None:
        cannot = True
        promoted, reason = False, f"cannot compare: the two pairs share no scored selection task ({lift.reason}){kept}"
    elif lift.n_tasks < min_tasks:
        promoted, reason = False, f"only {lift.n_tasks} paired selection task(s), fewer than {min_tasks}{kept}"
    else:
        figure = f"selection lift {lift.mean:+.3f} (95% CI {lift.lo:+.3f}..{lift.hi:+.3f}) on {lift.n_tasks} tasks"
        promoted = gain_passes(lift.mean, lift.lo, margin)
        if all(v["parent"] == 0 and v["successor"] == 0 for v in lift.per_task.values()):
            reason = f"no evidence: both pairs score 0 on all {lift.n_tasks} selection tasks{kept}"
        elif lift.mean <= TIE_TOLERANCE:
            reason = f"{figure}: no gain (a tie or a loss never passes){kept}"
        else:
            verdict = "above" if promoted else "not above"
            reason = f"{figure}: lower bound {verdict} {-margin if margin else 0.0:+.3f}" + ("" if promoted else kept)
    return PromotionDecision(
        promoted=promoted, cannot_compare=cannot, reason=reason, rule=promotion_rule(margin, min_tasks), margin=margin,
        min_tasks=min_tasks, lift=lift, trial_ids=lift.trial_ids,
    )


def pair_rule(margin: float, min_tasks: int) -> str:
    """The pair gate's rule in words (:func:`decide_pair`)."""
    return (
        "hand on the trained pair (the training contract with the new adapter) only over the kept pair (the pair "
        "handed on otherwise: the successor check's contract with the parent's adapter), so that the adapter's own "
        "gain decides: " + promotion_rule(margin, min_tasks).removeprefix("promote when ")
    )


def decide_pair(
    records: Iterable[TrialRecord],
    kept: PairRef,
    trained: PairRef,
    selection_tasks: set[str],
    *,
    min_tasks: int,
    margin: float = 0.0,
    resamples: int = 2000,
    seed: int = 0,
) -> PromotionDecision:
    """The pair gate: hand on the trained pair (training contract, new adapter) only on its own gain on selection.

    One paired decision, by :func:`decide_promotion`'s rule, of the trained pair against the
    *kept* pair - what the next generation gets when the new adapter is not promoted: the
    contract Expansion's successor check decided (or the parent's) with the parent's adapter.
    Judged against the parent pair instead, a new harness's lift would carry an adapter that
    changes nothing; against the kept pair only what the adapter adds counts.

    Args:
        records: selection trials (only the pairs' on ``selection_tasks`` are read).
        kept: the pair handed on when the trained pair is not.
        trained: the training contract naming the new adapter.
        selection_tasks: the selection split's task hashes.
        min_tasks / margin / resamples / seed: as :func:`decide_promotion`.

    Returns:
        the decision (its ``lift`` is the trained pair's over the kept pair).

    Raises:
        ValueError: a negative margin.
    """
    out = decide_promotion(
        records, kept, trained, selection_tasks, min_tasks=min_tasks, margin=margin, resamples=resamples, seed=seed
    )
    out.rule = pair_rule(margin, min_tasks)
    out.reason = out.reason.replace("the pair it would replace is kept", "the kept pair is handed on")
    return out
