"""Domain enums shared by the core and the store: run status, task source, audit owner.

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
