"""Domain enums shared by the core and the store: run status, task source, audit owner, trial stage.

The store's tables use them as column types (string enums stored as ``VARCHAR``); the
core (audit, search, Discovery) uses them without importing the store. The pool's split
enum lives with the splits (:class:`mindforge.evaluation.PoolSplit`).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Status of a lineage, a generation or a search job."""

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskSource(StrEnum):
    """Where a task came from."""

    BUNDLED = "bundled"
    IMPORTED = "imported"
    DISCOVERED = "discovered"


class AuditOwner(StrEnum):
    """Who owns a failure, per the audit: the infrastructure, the task, the harness config or the model."""

    INFRA = "infra"
    TASK = "task"
    CONFIG = "config"
    MODEL = "model"


class TrialStage(StrEnum):
    """Where a stored trial ran (its ``stage``); the split of its task follows from it.

    ``expansion``, ``search`` and ``rollout`` trials run on search tasks (the last are the
    Update's rollouts of the next pair's contract, for GRPO groups); ``selection`` trials
    run on selection tasks and feed decisions only (successor contract, adapter
    promotion); ``sealed`` trials run on sealed tasks and feed the reported lift only.
    The rule is code, not convention: :func:`mindforge.evaluation.splits.split_of_stage`
    and :func:`mindforge.evaluation.splits.check_stage_split`, called where trials are
    planned, run and stored.
    """

    EXPANSION = "expansion"
    SEARCH = "search"
    ROLLOUT = "rollout"
    SELECTION = "selection"
    SEALED = "sealed"
