"""Continuing a stored lineage: the state a run that adds generations starts from (``continue_lineage``).

A nightly run (a Temporal Schedule made by ``mindforge schedule extend``) or ``mindforge
lineage extend`` adds generations to a lineage that already ran, instead of starting a
new one: the next generation's index follows the last completed one, it starts from that
generation's successor pair, generation 0's pair stays the root, and the pool - its
three splits and the frozen sealed tasks - is the one in the store (nothing is
re-assigned). A generation that started but did not complete is run again under its own
index, so its finished trials are found by their deterministic ids and not run twice.
"""

from __future__ import annotations

from typing import Any

from mindforge.domain import RunStatus
from mindforge.errors import MindForgeError
from mindforge.payloads import ContinueLineageInput, LineageInput, LineageSpec
from mindforge.store import lineages
from mindforge.trials.record import utcnow


class LineageNotContinuableError(MindForgeError):
    """The lineage cannot be continued: unknown, still running, or without a completed generation."""


def stored_spec(spec: dict[str, Any]) -> LineageSpec:
    """The :class:`LineageSpec` of a stored lineage (the keys ``prepare_lineage`` added beside it dropped)."""
    return LineageSpec.model_validate({k: v for k, v in spec.items() if k in LineageSpec.model_fields})


def _same_run(extension: dict[str, Any], inp: ContinueLineageInput) -> bool:
    """Whether a recorded extension was made by the run asking (a retried activity), not an earlier one.

    ``mindforge lineage extend`` and the main job start every extension under the same
    workflow id (``lineage-<name>``); only the run id tells them apart. (Before the run id
    was recorded, a second extension under the same id matched the first one's record and
    re-ran its generation instead of adding one.)
    """
    if not inp.workflow_id or extension.get("workflow_id") != inp.workflow_id:
        return False
    return extension.get("run_id", "") == inp.run_id


def continuation(session, inp: ContinueLineageInput) -> LineageInput:
    """The :class:`LineageInput` that runs ``inp.generations`` more generations of a stored lineage.

    Records the extension in the stored spec (``generations`` becomes the new total;
    ``extensions`` lists each one, with the workflow id and run id that made it).
    Idempotent for a retried activity of one workflow run; a later run under the same
    workflow id (``lineage extend`` again) is a new extension.

    Args:
        session: an open store session (the caller's scope commits).
        inp: the lineage and how many generations to add.

    Returns:
        the state: stored spec with ``generations`` = next index + ``inp.generations``,
        ``next_generation``, the last successor pair, the root pair, ``prepared=True``.

    Raises:
        LineageNotContinuableError: no such lineage, it is running or paused under
            another workflow, or no generation of it completed.
    """
    lin = lineages.get_lineage(session=session, lineage_id=inp.lineage_id)
    if lin is None:
        raise LineageNotContinuableError(f"no lineage {inp.lineage_id!r} in the store to continue")
    extensions = list(lin.spec.get("extensions") or [])
    mine = next((e for e in extensions if _same_run(e, inp)), None)
    if mine is None and lin.status in (RunStatus.RUNNING, RunStatus.PAUSED):
        raise LineageNotContinuableError(
            f"lineage {inp.lineage_id!r} is {lin.status.value}: a run of it has not ended (continue it once it has)"
        )
    gens = lineages.list_generations(session=session, lineage_id=inp.lineage_id)
    done = [g for g in gens if g.status == RunStatus.COMPLETED]
    if not done:
        raise LineageNotContinuableError(f"lineage {inp.lineage_id!r} has no completed generation to continue from")
    last = max(done, key=lambda g: g.index)
    first = min(gens, key=lambda g: g.index)
    root = (first.record.get("compounding") or {}).get("parent") or {}
    spec = stored_spec(lin.spec)
    if mine is None:
        mine = {
            "workflow_id": inp.workflow_id, "run_id": inp.run_id, "from_generation": last.index + 1,
            "generations": inp.generations, "at": utcnow().isoformat(),
        }
        extensions.append(mine)
        total = mine["from_generation"] + inp.generations
        lin.spec = {**lin.spec, "generations": total, "extensions": extensions}
        session.add(lin)
        session.flush()
    spec.generations = mine["from_generation"] + mine["generations"]
    return LineageInput(
        lineage_id=inp.lineage_id,
        spec=spec,
        next_generation=mine["from_generation"],
        contract_hash=last.record.get("contract_hash") or last.contract_hash or "",
        adapter=last.record.get("adapter") or "",
        root_contract_hash=root.get("contract_hash") or first.contract_hash or "",
        root_adapter=root.get("adapter") or "",
        prepared=True,
    )
