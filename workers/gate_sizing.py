"""The gates re-sized at each generation: what they can detect at the parent's measured selection rate.

The selection split is drawn once, at lineage start, and sized there against an assumed
parent (``--power-baseline``); as the parent improves its pass rate moves, and with it what
a gate can detect. ``record_generation`` (:mod:`workers.lineage_activities`) records, as
each generation starts, every gate's power and detectable lift at the parent's measured
rate and the attempts a task that would give it the target power
(:func:`mindforge.evaluation.sizing.resize_gates`); ``lineage status`` and the report print
it. The attempts themselves stay as the lineage was started with.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from mindforge.audit import usable_for_scoring
from mindforge.evaluation import PairRef, PoolSplit
from mindforge.evaluation.pair_trials import STAGE_OF_SPLIT
from mindforge.evaluation.power import configured_gates
from mindforge.evaluation.sizing import resize_gates
from mindforge.payloads import LineageSpec, Stage
from mindforge.store import lineages, pool, trials


def gate_power_record(session, lineage_id: str, generation: int, parent: PairRef) -> dict[str, Any]:
    """The generation's gates re-sized at its parent's measured selection rate (``record["gate_power"]``).

    The parent's rate is its pass rate over the usable selection trials earlier generations
    ran of it (the gate that handed it on); generation 0's parent has none yet. The gates
    are the ones the lineage runs as configured (as ``lineage start`` prints them:
    :func:`mindforge.evaluation.power.configured_gates`) on the selection split as it is now
    (:func:`mindforge.evaluation.sizing.resize_gates`).

    Returns:
        :class:`mindforge.evaluation.sizing.GatesAtRate` as JSON, or ``{}`` when the lineage
        runs no gate (or its stored spec is not a lineage spec).
    """
    lin = lineages.get_lineage(session=session, lineage_id=lineage_id)
    try:
        spec = LineageSpec.model_validate((lin.spec if lin else None) or {})
    except ValidationError:
        return {}
    ev = spec.evaluation
    selection = len(pool.list_pool(session=session, lineage_id=lineage_id, split=PoolSplit.SELECTION))
    gates = configured_gates(
        selection,
        successor=Stage.EXPANSION in spec.stages and spec.expansion.search.enabled,
        promotion=Stage.UPDATE in spec.stages,
        attempts=ev.attempts, min_tasks=ev.splits.min_tasks, candidates=ev.successor_candidates,
        race_budget=ev.race_budget, margin=spec.update.promotion_margin,
    )
    if not gates:
        return {}
    rows = trials.list_trials(session=session, lineage_id=lineage_id, stage=STAGE_OF_SPLIT[PoolSplit.SELECTION].value)
    records = [r.to_record() for r in rows if (r.generation_index or 0) < generation]
    usable = [r for r in records if parent.matches(r) and usable_for_scoring(r)]
    rate = sum(1 for r in usable if (r.reward or 0.0) >= 1.0) / len(usable) if usable else None
    note = "" if usable else "the parent has no selection trial yet: the gates are as sized at lineage start"
    return resize_gates(
        gates, rate, generation=generation, parent_trials=len(usable), seed=ev.seed, note=note
    ).model_dump(mode="json")
