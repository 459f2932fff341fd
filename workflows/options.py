"""Activity names, timeouts, retry policies and search-attribute keys shared by the workflows.

Activities are called by stable ``verb_noun`` name with typed Input/Result models, so no
workflow imports activity code; every name here is registered by the worker
(``tests/unit/workers/test_activity_names.py`` checks both directions). All activity
timeouts live here too, next to the helpers that start activities on each queue.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import (
    RetryPolicy,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)

with workflow.unsafe.imports_passed_through():
    from mindforge.payloads.queues import (
        SA_GENERATION,
        SA_LINEAGE,
        SA_STAGE,
        SANDBOX_QUEUE,
    )

# ------------------------------------------------------------------ stable activity names
PREPARE_CURRICULUM = "prepare_curriculum"
PREPARE_LINEAGE = "prepare_lineage"
CONTINUE_LINEAGE = "continue_lineage"
SET_LINEAGE_STATUS = "set_lineage_status"
RECORD_GENERATION = "record_generation"
PLAN_EXPANSION_TRIALS = "plan_expansion_trials"
RUN_TRIALS = "run_trials"
SUMMARIZE_EXPANSION = "summarize_expansion"
AUDIT_TRIALS = "audit_trials"
GROW_EXPERIENCE = "grow_experience"
START_SEARCH = "start_search"
PLAN_SEARCH_STEP = "plan_search_step"
OBSERVE_SEARCH_STEP = "observe_search_step"
FINISH_SEARCH = "finish_search"
PLAN_SUCCESSOR_CHECK = "plan_successor_check"
CHOOSE_SUCCESSOR = "choose_successor"
PROPOSE_TASKS = "propose_tasks"
CHECK_PROPOSAL = "check_proposal"
ADMIT_TASKS = "admit_tasks"
PLAN_UPDATE = "plan_update"
PLAN_ROLLOUT_TRIALS = "plan_rollout_trials"
RECORD_ITERATION = "record_iteration"
SELECT_TRAJECTORIES = "select_trajectories"
TRAIN_ADAPTER = "train_adapter"
VALIDATE_ADAPTER = "validate_adapter"
REGISTER_ADAPTER = "register_adapter"
HAND_OFF_ADAPTER = "hand_off_adapter"
PLAN_PROMOTION_TRIALS = "plan_promotion_trials"
DECIDE_PROMOTION = "decide_promotion"
RECORD_UPDATE = "record_update"
PLAN_SEALED_TRIALS = "plan_sealed_trials"
MEASURE_SEALED_LIFT = "measure_sealed_lift"

#: every activity name the workflows call
ACTIVITY_NAMES = frozenset(
    value
    for key, value in dict(globals()).items()
    if key.isupper() and isinstance(value, str) and key != "SANDBOX_QUEUE" and not key.startswith("SA_")
)

# ------------------------------------------------------------------------------ timeouts
#: store-only (and quick HTTP) activities
STORE_TIMEOUT = timedelta(minutes=5)
#: one batch of trials on the sandbox queue
TRIALS_TIMEOUT = timedelta(hours=12)
#: drawing, writing and validating a curriculum's instances (a family image build each, three sandboxes each)
CURRICULUM_TIMEOUT = timedelta(hours=4)
#: the Discovery proposal call (one model request, with retries)
PROPOSE_TIMEOUT = timedelta(minutes=30)
#: checking one proposal: build, reference solution twice, nop, difficulty trials
CHECK_PROPOSAL_TIMEOUT = timedelta(hours=2)
#: one experience-library round: replay every candidate (each up to ``replays`` sandboxes)
EXPERIENCE_TIMEOUT = timedelta(hours=4)
#: training one adapter revision
TRAIN_TIMEOUT = timedelta(hours=24)
#: validating one adapter revision (load, forward passes)
VALIDATE_TIMEOUT = timedelta(hours=2)
#: handing a revision to every serving endpoint, and the heartbeat between endpoints
HAND_OFF_TIMEOUT = timedelta(minutes=30)
HAND_OFF_HEARTBEAT = timedelta(minutes=10)

# ------------------------------------------------------------------------ retry policies
#: error types that never retry: bad input, task and model failures
NON_RETRYABLE = [
    "InputError",
    "ContractError",
    "ContractImmutableError",
    "ContractIdentityError",
    "AdapterImmutableError",
    "AlreadyExistsError",
    "NotFoundError",
    "ValueError",
    "SplitTooSmallError",
    "StageSplitError",  # a trial's stage and its task's split disagree (mindforge.evaluation.stages)
    "OffContractError",  # an Update step off its training contract (mindforge.evaluation.on_contract)
]

#: store-only activities: quick, retried with backoff
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=10,
    non_retryable_error_types=NON_RETRYABLE,
)
#: infra failures while running trials retry with backoff; finished trials are not re-run
TRIALS_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=2),
    maximum_attempts=20,
    non_retryable_error_types=NON_RETRYABLE,
)

KEY_LINEAGE = SearchAttributeKey.for_keyword(SA_LINEAGE)
KEY_GENERATION = SearchAttributeKey.for_int(SA_GENERATION)
KEY_STAGE = SearchAttributeKey.for_keyword(SA_STAGE)


def search_attributes(
    lineage_id: str, generation: int | None = None, stage: str | None = None
) -> TypedSearchAttributes:
    """Typed search attributes that make a run findable in the Web UI."""
    pairs: list[SearchAttributePair] = [SearchAttributePair(KEY_LINEAGE, lineage_id)]
    if generation is not None:
        pairs.append(SearchAttributePair(KEY_GENERATION, generation))
    if stage is not None:
        pairs.append(SearchAttributePair(KEY_STAGE, stage))
    return TypedSearchAttributes(pairs)


def child_id(lineage_id: str, generation: int, stage: str | None = None) -> str:
    """Child workflow ids derived from the lineage id: ``<lineage>-gen-<i>[-<stage>]``."""
    base = f"{lineage_id}-gen-{generation}"
    return f"{base}-{stage}" if stage else base


def store_activity(name: str, arg, result_type=None, *, timeout: timedelta = STORE_TIMEOUT):
    """Run a store (or HTTP) activity on the orchestration queue, retried with backoff.

    Args:
        name: the activity name (one of this module's constants).
        arg: its input (a small pydantic record).
        result_type: the result's class, for the data converter; None for no result.
        timeout: start-to-close limit (default :data:`STORE_TIMEOUT`).

    Returns:
        the awaitable activity result.
    """
    return workflow.execute_activity(
        name, arg, result_type=result_type, start_to_close_timeout=timeout, retry_policy=STORE_RETRY
    )


def sandbox_activity(name: str, arg, result_type, *, timeout: timedelta, heartbeat_timeout_sec: float):
    """Run an activity on the sandbox queue (it submits Ray tasks and heartbeats while they run).

    Args:
        name: the activity name.
        arg: its input.
        result_type: the result's class.
        timeout: start-to-close limit (one of this module's ``*_TIMEOUT``).
        heartbeat_timeout_sec: seconds without a heartbeat before Temporal retries it on
            another worker (finished work is not redone).

    Returns:
        the awaitable activity result.
    """
    return workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        task_queue=SANDBOX_QUEUE,
        start_to_close_timeout=timeout,
        heartbeat_timeout=timedelta(seconds=heartbeat_timeout_sec),
        retry_policy=TRIALS_RETRY,
    )


async def run_trials(inp, heartbeat_timeout_sec: float):
    """Run one batch of trials through the ``run_trials`` activity on the sandbox queue.

    Args:
        inp: a ``RunTrialsInput`` (ids and small specs only).
        heartbeat_timeout_sec: seconds without a heartbeat before Temporal retries the
            batch on another worker (finished trials are not run again).

    Returns:
        the ``RunTrialsResult`` counts.
    """
    with workflow.unsafe.imports_passed_through():
        from mindforge.payloads import RunTrialsResult

    return await sandbox_activity(
        RUN_TRIALS, inp, RunTrialsResult, timeout=TRIALS_TIMEOUT, heartbeat_timeout_sec=heartbeat_timeout_sec
    )
