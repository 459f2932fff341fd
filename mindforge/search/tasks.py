"""Bridges between trial records, audits and the search: failing tasks in, cell results out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from mindforge.audit import AuditResult, usable_for_scoring
from mindforge.domain import AuditOwner
from mindforge.search.state import CellResult, PlannedCell, SearchTask
from mindforge.trials.record import TrialRecord

#: owners whose verdict is most useful to guide the search, best first
_OWNER_RANK = {AuditOwner.CONFIG: 0, AuditOwner.MODEL: 1, AuditOwner.INFRA: 2, AuditOwner.TASK: 3}


def search_tasks_from_audits(
    records: Iterable[TrialRecord],
    audits: dict[str, AuditResult],
    *,
    exclude_owners: frozenset[AuditOwner] = frozenset({AuditOwner.TASK}),
) -> list[SearchTask]:
    """The tasks still failing after the base evaluation, each with one representative audit.

    A task fails when none of its trials passed. Its representative audit is the most
    specific one: config-owned verdicts first (they point at an edit), then model, infra
    and task; ties go to the earliest trial. Tasks whose representative owner is in
    ``exclude_owners`` (by default broken or flaky tasks) are left out: no harness edit
    fixes them.

    Args:
        records: the base evaluation's trials (all attempts of all tasks).
        audits: trial id -> audit of every failed trial.
        exclude_owners: owners whose tasks are not searched.

    Returns:
        the failing tasks, in the order their tasks first appear in ``records``.
    """
    by_task: dict[str, list[TrialRecord]] = defaultdict(list)
    for record in records:
        by_task[record.task_hash].append(record)
    out: list[SearchTask] = []
    for task_hash, trials in by_task.items():
        if any(r.passed for r in trials):
            continue
        audited = [(r, audits[r.trial_id]) for r in trials if r.trial_id in audits]
        if not audited:
            continue
        record, audit = min(audited, key=lambda pair: _OWNER_RANK[pair[1].owner])
        if audit.owner in exclude_owners:
            continue
        hints = [f"tool:{tool}" for tool in audit.evidence.get("tools", [])]
        out.append(
            SearchTask(
                task_hash=task_hash,
                task_id=record.task_id,
                cluster=f"{audit.owner.value}:{audit.rule}",
                rule=audit.rule,
                owner=audit.owner.value,
                failure_class=audit.failure_class.value,
                hints=hints,
                limits_fired=list(audit.evidence.get("limits_fired", [])),
                detail=str(audit.evidence.get("detail", ""))[:300],
            )
        )
    return out


def cell_result_from_record(record: TrialRecord, cell: PlannedCell, audit: AuditResult | None = None) -> CellResult:
    """The result of a planned cell from its (stored or fresh) trial record.

    Args:
        record: the trial run for ``cell`` (``trial_id`` must match).
        cell: the planned cell.
        audit: the trial's audit, when it failed and was audited.

    Raises:
        ValueError: the record is not the cell's trial.
    """
    if record.trial_id != cell.trial_id:
        raise ValueError(f"record {record.trial_id} is not the trial of cell {cell.trial_id}")
    return CellResult(
        trial_id=cell.trial_id,
        task_hash=cell.task_hash,
        contract_hash=cell.contract_hash,
        attempt=cell.attempt,
        reward=record.reward,
        usable=usable_for_scoring(record, audit),
        tokens=record.prompt_tokens + record.completion_tokens,
        wall_sec=record.timings.total_sec,
        rule=audit.rule if audit is not None and not record.passed else "",
    )
