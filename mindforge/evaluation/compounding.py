"""One generation's row of the compounding table: each pair's sealed success, its lifts, and their attribution.

Every generation runs, on the lineage's frozen sealed split and with the same attempts,
the pair it starts from (pair g), the pair it hands on (pair g+1), generation 0's pair
(after generation 0) and - when both the contract and the adapter changed - the
*harness-only* pair: the new contract's harness with the old adapter (the contract the
configuration search chose, before the Update named its new adapter in it). From those
trials :func:`measure_generation` gives:

- each pair's sealed score (mean over sealed tasks of the task's mean reward, the one
  scorer :func:`mindforge.evaluation.scoring.score_tasks`) and pass counts;
- ``lift_vs_prev``: pair g+1 over pair g, and ``lift_vs_root``: pair g+1 over pair 0,
  both paired by task with a 95% interval (:func:`mindforge.evaluation.lift.paired_lift`):
  by unit when the reading names its units (families, or tasks:
  :mod:`mindforge.evaluation.intervals`), else the percentile bootstrap by task;
- the attribution of ``lift_vs_prev`` into its *harness* part (harness-only pair over
  pair g: new contract, old adapter against old contract, old adapter) and its *weights*
  part (pair g+1 over the harness-only pair: new contract, new adapter against new
  contract, old adapter). A part whose two pairs are one pair is ``unchanged``; a part
  whose pair was not run is ``not_run`` with the reason; only measured parts carry a figure.

The question is the one the source paper leaves open: does recursive improvement
compound across generations on tasks no stage ever searched or trained on.

Pure: pydantic and the trial model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

from mindforge.evaluation.lift import Baseline, paired_lift
from mindforge.evaluation.scoring import PairRef, score_tasks
from mindforge.evaluation.splits import PoolSplit
from mindforge.trials.record import TrialRecord

#: what an attribution part is: measured on both pairs, nothing changed, or a pair that was not run
PartStatus = Literal["measured", "unchanged", "not_run"]


class PairSealed(BaseModel):
    """One pair's result on the sealed split in one generation.

    Attributes:
        contract_hash / adapter: the pair.
        score: mean over the scored sealed tasks of the task's mean reward (None: no
            usable attempt).
        n_tasks: sealed tasks with a usable attempt; n_trials: usable attempts.
        passed: usable attempts with reward 1.
        excluded_trials: attempts without a real reward (not scored 0).
        run_in: the generations that ran the trials read (a pair's sealed trials run once per
            lineage: a generation later than these *re-reads* them, it does not run them again);
            empty when not known.
    """

    contract_hash: str
    adapter: str = ""
    score: float | None = None
    n_tasks: int = 0
    n_trials: int = 0
    passed: int = 0
    excluded_trials: int = 0
    run_in: list[int] = Field(default_factory=list)

    @property
    def pair(self) -> PairRef:
        """The pair as a :class:`PairRef`."""
        return PairRef(contract_hash=self.contract_hash, adapter=self.adapter)


class AttributionPart(BaseModel):
    """One part of a generation's sealed lift.

    Attributes:
        status: ``measured`` (``lift`` is the paired figure), ``unchanged`` (the part's
            two pairs are one pair: that side did not change) or ``not_run``.
        lift: ``LiftReport.summary()`` when measured.
        reason: in words, for ``unchanged`` and ``not_run``.
    """

    status: PartStatus
    lift: dict[str, float | int | str | None] | None = None
    reason: str = ""


class GenerationCompounding(BaseModel):
    """A generation's sealed measurements (the ``compounding`` key of its record).

    Attributes:
        generation: the generation index g.
        sealed_tasks: the sealed task hashes, sorted (the frozen split: identical in every
            generation of a lineage); sealed_tasks_sha256: sha256 of them joined by ``,``.
        attempts: sealed attempts per task and pair.
        parent / successor / root / harness: pair g, pair g+1, pair 0 (None in generation
            0, where it is pair g) and the harness-only pair (None unless run).
        lift_vs_prev / lift_vs_root: summaries of pair g+1 over pair g and over pair 0
            (in generation 0 both are the same figure); None with the reason when absent.
        attribution: ``{"harness": AttributionPart, "weights": AttributionPart}``.
    """

    generation: int
    sealed_tasks: list[str] = Field(default_factory=list)
    sealed_tasks_sha256: str = ""
    attempts: int = 0
    parent: PairSealed
    successor: PairSealed
    root: PairSealed | None = None
    harness: PairSealed | None = None
    lift_vs_prev: dict[str, float | int | str | None] | None = None
    lift_vs_prev_reason: str = ""
    lift_vs_root: dict[str, float | int | str | None] | None = None
    lift_vs_root_reason: str = ""
    attribution: dict[str, AttributionPart] = Field(default_factory=dict)


def tasks_digest(tasks: Iterable[str]) -> str:
    """sha256 hex of the sorted task hashes joined by ``,`` (the identity of a frozen sealed split)."""
    return hashlib.sha256(",".join(sorted(tasks)).encode()).hexdigest()


def _key(pair: PairRef | None) -> tuple[str, str] | None:
    return (pair.contract_hash, pair.adapter) if pair is not None else None


def pair_sealed(
    records: list[TrialRecord], pair: PairRef, tasks: set[str], generation_of: dict[str, int] | None = None
) -> PairSealed:
    """One pair's sealed score and counts over ``tasks``; with ``generation_of``, the generations that ran them."""
    from mindforge.audit import usable_for_scoring

    scores = score_tasks(records, pair, tasks)
    passed = sum(
        1 for r in records
        if r.task_hash in tasks and pair.matches(r) and usable_for_scoring(r) and (r.reward or 0.0) >= 1.0
    )
    run_in = sorted({generation_of[t] for t in scores.trial_ids if t in generation_of}) if generation_of else []
    return PairSealed(
        contract_hash=pair.contract_hash, adapter=pair.adapter, score=scores.mean, n_tasks=len(scores.scores),
        n_trials=scores.usable_trials, passed=passed, excluded_trials=scores.excluded_trials, run_in=run_in,
    )


def measure_generation(
    records: Iterable[TrialRecord],
    tasks: set[str],
    *,
    generation: int,
    parent: PairRef,
    successor: PairRef,
    root: PairRef | None = None,
    harness: PairRef | None = None,
    attempts: int = 0,
    resamples: int = 2000,
    seed: int = 0,
    generation_of: dict[str, int] | None = None,
    units: Mapping[str, str] | None = None,
    unit: str = "task",
) -> GenerationCompounding:
    """A generation's compounding row from its sealed trials.

    Args:
        records: the generation's sealed trials (other pairs' are ignored).
        tasks: the sealed task hashes.
        generation: g.
        parent / successor: pair g and pair g+1.
        root: pair 0 (None in generation 0).
        harness: the harness-only pair (new contract, old adapter); None when the
            contract did not change. It may equal ``successor`` (the adapter did not change).
        attempts: sealed attempts per task and pair (recorded).
        resamples / seed: bootstrap settings.
        generation_of: trial id -> the generation that ran it (each pair's ``run_in``); None: not recorded.
        units / unit: each task's unit and what a unit is (:func:`mindforge.evaluation.lift.paired_lift`;
            None: the percentile bootstrap by task).

    Returns:
        the row; lifts are None (with a reason) where no task could be paired.
    """
    records = list(records)
    harness = harness if harness is not None else parent

    def lift(base: PairRef, top: PairRef, baseline: Baseline = "parent"):
        return paired_lift(
            records, base, top, tasks, measured_on=PoolSplit.SEALED, baseline=baseline, resamples=resamples, seed=seed,
            units=units, unit=unit,
        )

    def figure(report) -> tuple[dict | None, str]:
        return (report.summary(), "") if report.mean is not None else (None, report.reason or "not measured")

    out = GenerationCompounding(
        generation=generation, sealed_tasks=sorted(tasks), sealed_tasks_sha256=tasks_digest(tasks), attempts=attempts,
        parent=pair_sealed(records, parent, tasks, generation_of),
        successor=pair_sealed(records, successor, tasks, generation_of),
        root=pair_sealed(records, root, tasks, generation_of) if root is not None else None,
    )
    changed = _key(parent) != _key(successor)
    if not changed:
        out.lift_vs_prev_reason = "the generation kept its parent pair: there is no change to measure"
    else:
        out.lift_vs_prev, out.lift_vs_prev_reason = figure(lift(parent, successor))
    if root is None or _key(root) == _key(parent):
        out.lift_vs_root, out.lift_vs_root_reason = out.lift_vs_prev, out.lift_vs_prev_reason
        if out.lift_vs_root is not None:
            out.lift_vs_root = {**out.lift_vs_root, "baseline": "root"}
    elif _key(root) == _key(successor):
        out.lift_vs_root_reason = "the pair handed on is generation 0's pair"
    else:
        out.lift_vs_root, out.lift_vs_root_reason = figure(lift(root, successor, "root"))
    out.attribution = _attribution(out, records, tasks, parent, successor, harness, lift, generation_of)
    return out


def _attribution(
    out, records, tasks, parent, successor, harness, lift, generation_of=None
) -> dict[str, AttributionPart]:
    """The harness part (harness-only over parent) and the weights part (successor over harness-only)."""
    if _key(parent) == _key(successor):
        same = AttributionPart(status="unchanged", reason="the generation kept its parent pair")
        return {"harness": same, "weights": same}
    whole = AttributionPart(status="measured", lift=out.lift_vs_prev) if out.lift_vs_prev else AttributionPart(
        status="not_run", reason=out.lift_vs_prev_reason
    )
    if _key(harness) == _key(parent):
        unchanged = AttributionPart(status="unchanged", reason="the contract's harness is unchanged")
        return {"harness": unchanged, "weights": whole}
    if _key(harness) == _key(successor):
        return {"harness": whole, "weights": AttributionPart(status="unchanged", reason="the adapter is unchanged")}
    out.harness = pair_sealed(records, harness, tasks, generation_of)
    if not out.harness.n_trials:
        why = "the harness-only pair (new contract, old adapter) has no usable sealed trial"
        return {name: AttributionPart(status="not_run", reason=why) for name in ("harness", "weights")}
    parts = {}
    for name, (base, top) in {"harness": (parent, harness), "weights": (harness, successor)}.items():
        report = lift(base, top)
        parts[name] = (
            AttributionPart(status="measured", lift=report.summary()) if report.mean is not None
            else AttributionPart(status="not_run", reason=report.reason)
        )
    return parts
