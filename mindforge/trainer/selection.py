"""Trajectory selection for GRPO: from a generation's trials to groups with a learning signal.

A *group* is the attempts of one task under one pair (contract + adapter): GRPO's
advantages are relative to the group's mean (DeepSeekMath, Shao et al. 2024), so a group
carries a signal only when its rewards differ. Every choice is counted in a
:class:`SelectionReport`, which goes into the generation's record:

1. trials on tasks outside the **search** split (selection and sealed tasks) are set
   aside first: they decide and measure, and must never be trained on;
2. trials without a **real reward** are dropped, by reason: no verifier reward
   (``reward`` None: environment, verifier or infrastructure errors), an infrastructure
   or endpoint failure, an audit that puts the failure on the infrastructure or the
   task, a non-model agent, or no model turn to train on
   (:func:`mindforge.audit.usable_for_training`); a missing reward is never read as 0;
3. groups with fewer than two usable attempts have nothing to compare (``singleton``);
   groups whose rewards are all equal have zero advantage everywhere (``no_signal``),
   except, with **off-policy guidance** (``guides``), a group whose attempts all scored
   below its task's guide: the guide joins it and gives it the contrast
   (:mod:`mindforge.trainer.guidance`; LUFFY's mixed-policy groups), counted as
   ``guided_groups``;
4. per-task contribution is **capped**: at most ``max_groups_per_task`` groups of a task
   (the most contrasted first) and ``max_trials_per_group`` attempts per group (kept
   balanced between high and low rewards), so a few tasks attempted under many
   contracts cannot dominate the batch.

Pure: pydantic and the trial model only (the audit predicate is imported on use).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from mindforge.payloads.training import GuideRef, SelectedGroup, SelectionReport
from mindforge.trainer.curriculum import has_signal
from mindforge.trials.record import NO_REWARD_CLASSES, TrialRecord


def group_id_for(task_hash: str, contract_hash: str, adapter: str) -> str:
    """The stable id of the group of one task under one pair."""
    return f"{task_hash[:16]}/{contract_hash[:12]}/{adapter or 'base'}"


def drop_reason(record: TrialRecord, audit: Any | None = None) -> str | None:
    """Why a trial cannot be trained on, or None when it can.

    Args:
        record: the trial.
        audit: its :class:`mindforge.audit.AuditResult`, if audited.

    Returns:
        a reason key of :attr:`SelectionReport.dropped_by_reason`, or None.
    """
    from mindforge.audit import INFRA_CLASSES, usable_for_scoring, usable_for_training

    if record.reward is None or record.failure_class in NO_REWARD_CLASSES:
        return "no_reward"
    if record.failure_class in INFRA_CLASSES:
        return "infra_failure"
    if not usable_for_scoring(record, audit):
        return "audit_excluded"
    if record.agent != "model":
        return "not_model"
    if not usable_for_training(record, audit):
        return "no_model_turns"
    return None


def _balanced(trials: list[TrialRecord], cap: int) -> list[TrialRecord]:
    """At most ``cap`` attempts, alternating from the highest and the lowest rewards.

    Attempts are taken in attempt order within each end, so the choice is deterministic
    and a capped group keeps its contrast.
    """
    if len(trials) <= cap:
        return trials
    ordered = sorted(trials, key=lambda r: (-(r.reward or 0.0), r.attempt, r.trial_id))
    high, low = 0, len(ordered) - 1
    picked: list[TrialRecord] = []
    while len(picked) < cap:
        picked.append(ordered[high])
        high += 1
        if len(picked) < cap:
            picked.append(ordered[low])
            low -= 1
    return sorted(picked, key=lambda r: (r.attempt, r.trial_id))


def select_groups(
    records: Iterable[TrialRecord],
    not_search: set[str],
    *,
    max_groups_per_task: int = 2,
    max_trials_per_group: int = 16,
    audits: Mapping[str, Any] | None = None,
    guides: Mapping[str, GuideRef] | None = None,
) -> SelectionReport:
    """Build GRPO groups from a generation's trials, counting every drop.

    Args:
        records: the generation's trials (search-side stages; others are set aside).
        not_search: content hashes of the lineage's selection and sealed tasks.
        max_groups_per_task: most groups (pairs) one task may contribute (>= 1).
        max_trials_per_group: most attempts one group may contribute (>= 2).
        audits: trial id -> :class:`mindforge.audit.AuditResult` for audited trials.
        guides: task hash -> the guide of that task (off-policy guidance); a flat group
            of the task whose rewards are all below the guide's keeps at most
            ``max_trials_per_group - 1`` attempts (first by attempt) and the guide.

    Returns:
        the report; ``groups`` ordered by task hash, then contract, then adapter.

    Raises:
        ValueError: a cap below its minimum.
    """
    if max_groups_per_task < 1 or max_trials_per_group < 2:
        raise ValueError("max_groups_per_task must be >= 1 and max_trials_per_group >= 2")
    audits = audits or {}
    guides = guides or {}
    report = SelectionReport(max_groups_per_task=max_groups_per_task, max_trials_per_group=max_trials_per_group)
    reasons: Counter[str] = Counter()
    set_aside: set[str] = set()
    grouped: dict[tuple[str, str, str], list[TrialRecord]] = defaultdict(list)
    for record in records:
        report.trials_seen += 1
        if record.task_hash in not_search:
            report.non_search_trials += 1
            set_aside.add(record.task_hash)
            continue
        reason = drop_reason(record, audits.get(record.trial_id))
        if reason is not None:
            reasons[reason] += 1
            continue
        grouped[(record.task_hash, record.contract_hash or "", record.adapter)].append(record)
    report.non_search_tasks = len(set_aside)
    report.dropped_by_reason = dict(sorted(reasons.items()))
    report.dropped_no_reward = sum(reasons.values())
    report.candidate_groups = len(grouped)

    by_task: dict[str, list[list[TrialRecord]]] = defaultdict(list)
    guided: dict[str, list[TrialRecord]] = {}
    for key in sorted(grouped):
        trials = sorted(grouped[key], key=lambda r: (r.attempt, r.trial_id))
        guide = guides.get(key[0])
        if len(trials) < 2:
            report.dropped_singleton += 1
        elif len({r.reward for r in trials}) > 1:
            by_task[key[0]].append(trials)
        elif (
            guide is not None and key[0] not in guided
            and has_signal([r.reward or 0.0 for r in trials], guide.reward)
        ):
            guided[key[0]] = trials
        else:
            report.dropped_no_signal += 1
    for task_hash, trials in guided.items():
        if task_hash in by_task:  # the task has a group with contrast of its own
            report.dropped_no_signal += 1
            continue
        kept = trials[: max_trials_per_group - 1]
        report.capped_trials += len(trials) - len(kept)
        report.groups.append(_group(task_hash, kept, guides[task_hash]))
    report.guided_groups = len(report.groups)
    for task_hash in sorted(by_task):
        # most contrasted groups first; ties keep the sorted (contract, adapter) order
        ranked = sorted(by_task[task_hash], key=lambda g: -statistics.pstdev(r.reward or 0.0 for r in g))
        report.capped_groups += max(0, len(ranked) - max_groups_per_task)
        for trials in ranked[:max_groups_per_task]:
            kept = _balanced(trials, max_trials_per_group)
            report.capped_trials += len(trials) - len(kept)
            report.groups.append(_group(task_hash, kept))
    report.groups.sort(key=lambda g: (g.task_hash, g.contract_hash, g.adapter))
    report.kept_groups = len(report.groups)
    report.kept_trials = sum(len(g.trial_ids) for g in report.groups)
    report.kept_tasks = len({g.task_hash for g in report.groups})
    return report


def _group(task_hash: str, kept: list[TrialRecord], guide: GuideRef | None = None) -> SelectedGroup:
    """The selected group of ``kept`` attempts of one task under one pair (and its guide)."""
    first = kept[0]
    return SelectedGroup(
        group_id=group_id_for(task_hash, first.contract_hash or "", first.adapter),
        task_hash=task_hash,
        task_id=first.task_id,
        contract_hash=first.contract_hash or "",
        adapter=first.adapter,
        trial_ids=[r.trial_id for r in kept],
        rewards=[float(r.reward) for r in kept if r.reward is not None],
        guide=guide,
    )
