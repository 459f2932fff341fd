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

from mindforge.evaluation.lift import LiftReport, paired_lift
from mindforge.evaluation.scoring import PairRef, score_tasks
from mindforge.evaluation.splits import PoolSplit
from mindforge.evaluation.stats import bootstrap_lift
from mindforge.trials.record import TrialRecord


class SuccessorChoice(BaseModel):
    """The outcome of :func:`choose_successor`.

    Attributes:
        decided_on: the split the decision read (always ``selection``).
        contract_hash: the chosen contract (the parent when nothing is promoted).
        promoted: True when a candidate replaced the parent.
        reason: why, in words.
        lift: ``(mean, lo, hi)`` of the chosen candidate's selection lift, or None.
        n_tasks: selection tasks the decision used.
        scores: contract hash -> mean selection score over its scored tasks.
        considered: per candidate: ``n_tasks``, ``lift`` or ``skipped`` (why).
        trial_ids: every trial the decision read, sorted.
        rule: the rule applied, in words.
        race: how the selection trials were shared among the candidates
            (:class:`mindforge.evaluation.race.RacePlan` as JSON), when they were raced.
    """

    decided_on: PoolSplit = PoolSplit.SELECTION
    contract_hash: str
    promoted: bool
    reason: str
    lift: tuple[float, float, float] | None = None
    n_tasks: int = 0
    scores: dict[str, float | None] = Field(default_factory=dict)
    considered: dict[str, dict] = Field(default_factory=dict)
    trial_ids: list[str] = Field(default_factory=list)
    rule: str = ""
    race: dict = Field(default_factory=dict)


def successor_rule(min_tasks: int) -> str:
    """The successor gate's rule in words (stated in the decision record and the report)."""
    return (
        "promote the race's finalist when its paired selection lift over the parent (with the parent's adapter) "
        f"has a 95% lower bound above 0 on at least {min_tasks} paired selection task(s); otherwise keep the parent"
    )


def _kept_reason(considered: dict[str, dict]) -> str:
    """Why the parent is kept: no candidate, no candidate with enough evidence, or no lift above 0."""
    if not considered:
        return "no candidate contract besides the parent reached selection; the parent is kept"
    measured = sum(1 for c in considered.values() if "lift" in c)
    if not measured:
        skipped = sorted({c["skipped"] for c in considered.values()})
        why = ", ".join(skipped)
        return f"no candidate had evidence on selection ({len(considered)} skipped: {why}); the parent is kept"
    return f"no candidate's selection lift has a 95% lower bound above 0 ({measured} measured); the parent is kept"


def choose_successor(
    records: Iterable[TrialRecord],
    parent: PairRef,
    candidates: list[str],
    selection_tasks: set[str],
    *,
    min_tasks: int = 5,
    finalists: list[str] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> SuccessorChoice:
    """Pick the next generation's contract; promote a candidate only on selection evidence.

    Rule: each candidate runs with the parent's adapter on the selection tasks the parent
    ran on. It needs at least ``min_tasks`` tasks scored under both, and its paired
    bootstrap lift over the parent must have a 95% lower bound above 0. Among qualifying
    candidates the highest lower bound wins (then the higher mean, then the smaller
    hash); otherwise the parent is kept. Only trials on ``selection_tasks`` are read.

    Args:
        records: trials (only the parent's and candidates' on selection tasks are read).
        parent: the generation's pair.
        candidates: candidate contract hashes (run with ``parent.adapter``).
        selection_tasks: the lineage's selection-split task hashes.
        min_tasks: fewest paired tasks for a decision.
        finalists: when given, only these candidates may be promoted (the race's
            finalist, :func:`mindforge.evaluation.race.plan_race`); the others' trials
            are still read and recorded, marked ``skipped``.
        resamples / seed: bootstrap settings.

    Returns:
        the choice, with the per-candidate evidence and every trial id read.
    """
    records = [r for r in records if r.task_hash in selection_tasks]
    base = score_tasks(records, parent, selection_tasks)
    read = set(base.trial_ids)
    scores: dict[str, float | None] = {parent.contract_hash: base.mean}
    considered: dict[str, dict] = {}
    best: tuple[tuple[float, float], str, tuple[float, float, float], int] | None = None
    for contract in sorted(set(candidates) - {parent.contract_hash}):
        cand = score_tasks(records, PairRef(contract_hash=contract, adapter=parent.adapter), selection_tasks)
        read |= set(cand.trial_ids)
        scores[contract] = cand.mean
        tasks = sorted(set(base.scores) & set(cand.scores))
        if finalists is not None and contract not in finalists:
            considered[contract] = {"n_tasks": len(tasks), "skipped": "stopped by the race before the final round"}
            continue
        if len(tasks) < min_tasks:
            considered[contract] = {"n_tasks": len(tasks), "skipped": f"fewer than {min_tasks} scored selection tasks"}
            continue
        lift = bootstrap_lift([base.scores[t] for t in tasks], [cand.scores[t] for t in tasks], n=resamples, seed=seed)
        considered[contract] = {"n_tasks": len(tasks), "lift": list(lift)}
        key = (lift[1], lift[0])  # ties: the first in sorted order (smaller hash) stays
        if lift[1] > 0 and (best is None or key > best[0]):
            best = (key, contract, lift, len(tasks))
    evidence = {
        "scores": scores, "considered": considered, "trial_ids": sorted(read), "rule": successor_rule(min_tasks)
    }
    if best is None:
        return SuccessorChoice(
            contract_hash=parent.contract_hash, promoted=False, reason=_kept_reason(considered), **evidence
        )
    _key, contract, lift, count = best
    return SuccessorChoice(
        contract_hash=contract,
        promoted=True,
        reason=f"selection lift {lift[0]:+.3f} (95% CI {lift[1]:+.3f}..{lift[2]:+.3f}) on {count} tasks",
        lift=lift,
        n_tasks=count,
        **evidence,
    )


class PromotionDecision(BaseModel):
    """The adapter promotion gate's outcome (:func:`decide_promotion`).

    Attributes:
        decided_on: the split the decision read (always ``selection``).
        promoted: True when the new adapter goes into the next generation's pair.
        reason: why, in words.
        rule: the rule applied, in words (what the report states).
        margin: the non-inferiority margin (reward units; 0 = the lower bound must be above 0).
        min_tasks: the fewest paired selection tasks the gate decides on.
        lift: the selection lift of the pair with the new adapter over the pair without it.
        trial_ids: every trial the decision read, sorted.
        versus_harness: the pair gate's second check, when the successor check promoted a
            new harness: ``{"trained", "harness", "n_tasks"}`` (mean selection scores on
            the tasks both ran), else None.
    """

    decided_on: PoolSplit = PoolSplit.SELECTION
    promoted: bool
    reason: str
    rule: str = ""
    margin: float = 0.0
    min_tasks: int = 1
    lift: LiftReport
    trial_ids: list[str] = Field(default_factory=list)
    versus_harness: dict[str, float | int] | None = None


def promotion_rule(margin: float, min_tasks: int) -> str:
    """The promotion gate's rule in words (stated in the decision record and the report)."""
    bound = "above 0" if margin == 0 else f"above -{margin:g} (a declared non-inferiority margin of {margin:g})"
    return (
        f"promote when the paired selection lift's 95% lower bound is {bound} on at least {min_tasks} paired "
        "selection task(s); never when both pairs score 0 on every selection task"
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
    """Promote a new adapter revision only on selection evidence, by a stated rule.

    Rule (:func:`promotion_rule`): the pair with the new adapter (``with_adapter``) and the
    pair without it (``without``: the same contract with the parent's adapter) run the
    same selection tasks; the adapter is promoted when the paired bootstrap lift's 95%
    lower bound is above ``-margin`` (``margin`` 0: above 0, superiority; a positive
    margin is a declared non-inferiority margin) on at least ``min_tasks`` paired tasks.
    A comparison in which both pairs score 0 on every paired task is no evidence and
    never promotes, whatever the margin; no task scored under both is no evidence either.
    The gate's power at the configured trials is :mod:`mindforge.evaluation.power`.

    Args:
        records: trials (only the two pairs' on selection tasks are read).
        without / with_adapter: the pairs compared.
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
    kept = "; the parent adapter is kept"
    if lift.mean is None or lift.lo is None:
        promoted, reason = False, f"no evidence: {lift.reason}{kept}"
    elif lift.n_tasks < min_tasks:
        promoted, reason = False, f"only {lift.n_tasks} paired selection task(s), fewer than {min_tasks}{kept}"
    elif all(v["parent"] == 0 and v["successor"] == 0 for v in lift.per_task.values()):
        promoted, reason = False, f"no evidence: both pairs score 0 on all {lift.n_tasks} selection tasks{kept}"
    else:
        figure = f"selection lift {lift.mean:+.3f} (95% CI {lift.lo:+.3f}..{lift.hi:+.3f}) on {lift.n_tasks} tasks"
        bound = -margin if margin else 0.0
        promoted = lift.lo > bound
        verdict = "above" if promoted else "not above"
        reason = f"{figure}: lower bound {verdict} {bound:+.3f}" + ("" if promoted else kept)
    return PromotionDecision(
        promoted=promoted, reason=reason, rule=promotion_rule(margin, min_tasks), margin=margin, min_tasks=min_tasks,
        lift=lift, trial_ids=lift.trial_ids,
    )


def pair_rule(margin: float, min_tasks: int) -> str:
    """The pair gate's rule in words (:func:`decide_pair`)."""
    return (
        promotion_rule(margin, min_tasks).replace("promote when", "hand on the trained pair when", 1)
        + "; when the successor check promoted a new harness, the trained pair must also score at least as well "
        "as that harness with the parent's adapter"
    )


def decide_pair(
    records: Iterable[TrialRecord],
    parent: PairRef,
    trained: PairRef,
    selection_tasks: set[str],
    *,
    harness: PairRef | None = None,
    min_tasks: int,
    margin: float = 0.0,
    resamples: int = 2000,
    seed: int = 0,
) -> PromotionDecision:
    """The pair gate: hand on the trained pair (training contract, new adapter) only on selection evidence.

    One paired decision against the parent pair (contract and adapter as the generation
    started), by :func:`decide_promotion`'s rule; then, when Expansion's successor check
    already promoted a new harness (``harness``: that contract with the parent's adapter),
    the trained pair's mean selection score over the tasks both ran must be at least the
    harness's, so a new adapter never costs what the harness gained.

    Args:
        records: selection trials (only the pairs' on ``selection_tasks`` are read).
        parent: the generation's parent pair.
        trained: the training contract naming the new adapter.
        selection_tasks: the selection split's task hashes.
        harness: the successor check's new harness with the parent's adapter, or None.
        min_tasks / margin / resamples / seed: as :func:`decide_promotion`.

    Returns:
        the decision (its ``lift`` is the trained pair's over the parent pair).

    Raises:
        ValueError: a negative margin.
    """
    records = [r for r in records if r.task_hash in selection_tasks]
    out = decide_promotion(
        records, parent, trained, selection_tasks, min_tasks=min_tasks, margin=margin, resamples=resamples, seed=seed
    )
    out.rule = pair_rule(margin, min_tasks)
    if harness is None or (harness.contract_hash, harness.adapter) == (parent.contract_hash, parent.adapter):
        return out
    mine, theirs = score_tasks(records, trained, selection_tasks), score_tasks(records, harness, selection_tasks)
    common = sorted(set(mine.scores) & set(theirs.scores))
    ours = sum(mine.scores[t] for t in common) / len(common) if common else 0.0
    other = sum(theirs.scores[t] for t in common) / len(common) if common else 0.0
    out.versus_harness = {"trained": ours, "harness": other, "n_tasks": len(common)}
    out.trial_ids = sorted(set(out.trial_ids) | set(theirs.trial_ids))
    if out.promoted and ours < other:
        out.promoted = False
        out.reason += (
            f"; but it scores {ours:.3f} against the successor harness's {other:.3f} (parent's adapter) on "
            f"{len(common)} selection tasks: the parent's adapter is kept"
        )
    return out
