"""Domain enums shared by the core and the store: run status, task source, audit owner, trial stage and outcome.

The store's tables use them as column types (string enums stored as ``VARCHAR``); the
core (audit, search, Discovery) uses them without importing the store. The pool's split
enum lives with the splits (:class:`mindforge.evaluation.PoolSplit`). A trial's failure class and
the limit that ended it live here because both the agent (which reports them) and the
trial record (which stores them) use them.
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
    """Where a task came from (``family``: an instance a lineage drew from a task family at its start)."""

    BUNDLED = "bundled"
    IMPORTED = "imported"
    DISCOVERED = "discovered"
    FAMILY = "family"


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


class FailureClass(StrEnum):
    """Closed set of reasons a trial did not yield a clean reward, or yielded 0.

    Infrastructure and verifier errors carry no real reward: they never feed search
    scores or training. ``task_failed`` is the ordinary outcome of a run whose verifier
    gave a reward below 1.
    """

    ENV_BUILD_FAILED = "env_build_failed"
    ENV_START_FAILED = "env_start_failed"
    AGENT_TIMEOUT = "agent_timeout"
    AGENT_ERROR = "agent_error"
    VERIFIER_TIMEOUT = "verifier_timeout"
    VERIFIER_ERROR = "verifier_error"
    INFRA_ERROR = "infra_error"
    # model-driven agent (HCP harness) outcomes
    MAX_TURNS = "max_turns"
    TOKEN_BUDGET = "token_budget"
    CONTEXT_OVERFLOW = "context_overflow"
    PARSE_ERROR = "parse_error"
    EMPTY_REPLY = "empty_reply"
    TRUNCATED_REPLY = "truncated_reply"
    ENDPOINT_ERROR = "endpoint_error"
    # verifier ran cleanly and the reward is below 1
    TASK_FAILED = "task_failed"


class LimitFired(StrEnum):
    """Which limit ended a phase early, if any.

    ``pids_limit``: the sandbox held as many processes as it may (``docker_pids_limit``)
    or refused forks, and the trial did not pass: typically processes the agent left
    behind kept the verifier's own commands from starting.
    """

    BUILD_TIMEOUT = "build_timeout"
    AGENT_TIMEOUT = "agent_timeout"
    VERIFIER_TIMEOUT = "verifier_timeout"
    MAX_TURNS = "max_turns"
    TOKEN_BUDGET = "token_budget"
    CONTEXT_WINDOW = "context_window"
    PIDS_LIMIT = "pids_limit"
