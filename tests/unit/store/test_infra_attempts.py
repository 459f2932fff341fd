"""Infrastructure attempts: a fault-ended run is kept apart from the trials, once per activity attempt."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from mindforge.store import session_scope
from mindforge.store import trials as repo
from mindforge.store.infra_attempts import list_infra_attempts, record_infra_attempt
from mindforge.trials.record import FailureClass, TrialRecord, is_retryable_infra


def _faulted(cls: FailureClass = FailureClass.ENDPOINT_ERROR, reward: float | None = None) -> TrialRecord:
    return TrialRecord(
        trial_id="t-1", run_id="r", task_id="a", task_hash="h-a", agent="model", reward=reward,
        failure_class=cls, failure_detail="APIConnectionError: Connection error.", worker="host/node/1",
    )


def test_a_fault_is_stored_once_per_attempt_and_never_as_a_trial(engine: Engine, lineage_id: str) -> None:
    rec = _faulted()
    with session_scope(engine) as s:
        kw = dict(session=s, record=rec, lineage_id=lineage_id, generation_index=0, stage="expansion")
        assert record_infra_attempt(**kw, activity_attempt=1)
        assert not record_infra_attempt(**kw, activity_attempt=1)  # a retried write stores nothing twice
        assert record_infra_attempt(**kw, activity_attempt=2)
    with session_scope(engine) as s:
        rows = list_infra_attempts(session=s, lineage_id=lineage_id)
        assert [(r.trial_id, r.activity_attempt, r.failure_class) for r in rows] == [
            ("t-1", 1, FailureClass.ENDPOINT_ERROR),
            ("t-1", 2, FailureClass.ENDPOINT_ERROR),
        ]
        assert not repo.trial_exists(session=s, trial_id="t-1")


def test_a_scored_trial_is_not_an_infrastructure_attempt(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as s, pytest.raises(ValueError, match="not an infrastructure attempt"):
        record_infra_attempt(
            session=s, record=_faulted(FailureClass.TASK_FAILED, 0.0), lineage_id=lineage_id,
            generation_index=0, stage="expansion", activity_attempt=1,
        )


@pytest.mark.parametrize(
    ("cls", "reward", "retry"),
    [
        (FailureClass.ENDPOINT_ERROR, None, True),
        (FailureClass.INFRA_ERROR, None, True),
        (FailureClass.ENV_START_FAILED, None, True),
        (FailureClass.ENV_BUILD_FAILED, None, False),  # the task's image does not build: it will not next time
        (FailureClass.VERIFIER_ERROR, None, False),  # the task's verifier is broken
        (FailureClass.TASK_FAILED, 0.0, False),
    ],
)
def test_which_faults_run_again(cls: FailureClass, reward: float | None, retry: bool) -> None:
    assert is_retryable_infra(_faulted(cls, reward)) is retry
