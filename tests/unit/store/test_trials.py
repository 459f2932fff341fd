"""Trials and audits: a retried insert stores nothing twice, records round-trip, filters work."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import select

from mindforge.store import AuditOwner, Trial, make_engine, session_scope
from mindforge.store import trials as repo
from mindforge.store.lineages import create_generation
from mindforge.trials.record import FailureClass, LimitFired, PhaseTimings, TrialRecord

CONTRACT = "c0" * 32
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _record(lineage_id: str, task: str, attempt: int, reward: float | None, **extra: object) -> TrialRecord:
    trial_id = repo.make_trial_id(
        lineage_id=lineage_id,
        generation_index=0,
        stage="expansion",
        task_hash=f"h-{task}",
        contract_hash=CONTRACT,
        adapter="",
        attempt=attempt,
    )
    fields: dict[str, object] = dict(
        trial_id=trial_id,
        run_id="run-1",
        task_id=task,
        task_hash=f"h-{task}",
        agent="model",
        contract_hash=CONTRACT,
        attempt=attempt,
        reward=reward,
        started_at=T0 + timedelta(minutes=attempt),
    )
    fields.update(extra)
    return TrialRecord(**fields)


def _count(engine: Engine) -> int:
    with session_scope(engine) as session:
        return len(session.exec(select(Trial.trial_id)).all())


def test_make_trial_id_is_deterministic_and_discriminating() -> None:
    base = dict(
        lineage_id="L", generation_index=0, stage="expansion", task_hash="h", contract_hash="c", adapter="", attempt=0
    )
    assert repo.make_trial_id(**base) == repo.make_trial_id(**dict(base))
    variants = [
        dict(base, **{key: value})
        for key, value in [
            ("lineage_id", "M"),
            ("generation_index", 1),
            ("stage", "eval"),
            ("task_hash", "g"),
            ("contract_hash", None),
            ("adapter", "demo-r1"),
            ("attempt", 1),
        ]
    ]
    ids = {repo.make_trial_id(**v) for v in variants} | {repo.make_trial_id(**base)}
    assert len(ids) == len(variants) + 1
    assert repo.make_trial_id(**base).startswith("t-")


def test_same_trial_twice_leaves_one_row(engine: Engine, lineage_id: str) -> None:
    record = _record(lineage_id, "fix-invoice-totals", 0, 1.0)
    with session_scope(engine) as session:
        assert repo.insert_trial(
            session=session, record=record, lineage_id=lineage_id, generation_index=0, stage="expansion"
        )
    # the retried activity produced a different result for the same attempt: the first one stays
    retried = record.model_copy(update={"reward": 0.0, "failure_class": FailureClass.TASK_FAILED})
    with session_scope(engine) as session:
        assert not repo.insert_trial(
            session=session, record=retried, lineage_id=lineage_id, generation_index=0, stage="expansion"
        )
        assert repo.trial_exists(session=session, trial_id=record.trial_id)
        assert not repo.trial_exists(session=session, trial_id="t-unknown")
        assert repo.get_trial(session=session, trial_id=record.trial_id).reward == 1.0
    assert _count(engine) == 1


def test_concurrent_inserts_of_one_trial_store_one_row(engine: Engine, db_url: str, lineage_id: str) -> None:
    record = _record(lineage_id, "race", 0, 0.5)
    engines = [make_engine(db_url) for _ in range(4)]
    results: list[bool] = []
    barrier = threading.Barrier(len(engines))

    def worker(own: Engine) -> None:
        barrier.wait()
        with session_scope(own) as session:
            results.append(
                repo.insert_trial(session=session, record=record, lineage_id=lineage_id, generation_index=0, stage="x")
            )

    threads = [threading.Thread(target=worker, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for own in engines:
        own.dispose()
    assert sorted(results) == [False, False, False, True]
    assert _count(engine) == 1


def test_trial_round_trips_every_record_field(engine: Engine, lineage_id: str) -> None:
    record = _record(
        lineage_id,
        "log-5xx-report",
        2,
        None,
        adapter="demo-r0",
        reward_details={"tests": 0.5},
        failure_class=FailureClass.VERIFIER_TIMEOUT,
        failure_detail="pytest ran past 600 s",
        limit_fired=LimitFired.VERIFIER_TIMEOUT,
        timings=PhaseTimings(build_sec=1.5, start_sec=0.25, agent_sec=30.0, verify_sec=600.0, teardown_sec=0.5),
        prompt_tokens=1200,
        completion_tokens=340,
        num_turns=7,
        artifacts={"transcript": "trials/x/transcript.json"},
        finished_at=T0 + timedelta(minutes=12),
    )
    with session_scope(engine) as session:
        repo.insert_trial(session=session, record=record, lineage_id=lineage_id, generation_index=0, stage="eval")
    with session_scope(engine) as session:
        row = repo.get_trial(session=session, trial_id=record.trial_id)
        assert (row.lineage_id, row.generation_index, row.stage) == (lineage_id, 0, "eval")
        assert row.failure_class is FailureClass.VERIFIER_TIMEOUT
        assert row.to_record() == record


def test_a_nul_in_failure_detail_is_stored_as_a_replacement_character(engine: Engine, lineage_id: str) -> None:
    # verifier output may hold NUL bytes, which Postgres text refuses (the whole INSERT fails)
    record = _record(lineage_id, "a", 0, 0.0, failure_detail="tests: b'\x00\x01' != b''")
    with session_scope(engine) as session:
        assert repo.insert_trial(session=session, record=record, lineage_id=lineage_id, generation_index=0)
    with session_scope(engine) as session:
        assert repo.get_trial(session=session, trial_id=record.trial_id).failure_detail == "tests: b'\ufffd\x01' != b''"


def test_lineage_trial_needs_its_generation(engine: Engine, lineage_id: str) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.insert_trial(
            session=session, record=_record(lineage_id, "a", 0, 1.0), lineage_id=lineage_id, generation_index=7
        )


def test_trial_outside_a_lineage(engine: Engine) -> None:
    record = TrialRecord(
        trial_id="validate-1", run_id="validate", task_id="a", task_hash="h-a", agent="oracle", reward=1.0
    )
    with session_scope(engine) as session:
        assert repo.insert_trial(session=session, record=record, stage="validation")
        assert [t.trial_id for t in repo.list_trials(session=session, run_id="validate")] == ["validate-1"]


def test_list_trials_filters(engine: Engine, lineage_id: str) -> None:
    records = [
        _record(lineage_id, "a", 0, 1.0),
        _record(lineage_id, "a", 1, 0.0, failure_class=FailureClass.TASK_FAILED),
        _record(lineage_id, "b", 2, None, failure_class=FailureClass.INFRA_ERROR),
    ]
    with session_scope(engine) as session:
        create_generation(session=session, lineage_id=lineage_id, index=1)
        assert (
            repo.insert_trials(
                session=session, records=records, lineage_id=lineage_id, generation_index=0, stage="expansion"
            )
            == 3
        )
        other = _record(lineage_id, "a", 3, 1.0)
        repo.insert_trial(session=session, record=other, lineage_id=lineage_id, generation_index=1, stage="expansion")
    with session_scope(engine) as session:

        def ids(**filters: object) -> list[str]:
            return [t.trial_id for t in repo.list_trials(session=session, lineage_id=lineage_id, **filters)]

        assert ids() == [r.trial_id for r in records] + [other.trial_id]
        assert ids(generation_index=0, passed=True) == [records[0].trial_id]
        assert ids(generation_index=0, passed=False) == [records[1].trial_id, records[2].trial_id]
        assert ids(task_hash="h-b") == [records[2].trial_id]
        assert ids(failure_class=FailureClass.TASK_FAILED) == [records[1].trial_id]
        assert ids(stage="search") == []
        assert ids(limit=2) == [records[0].trial_id, records[1].trial_id]


def test_audit_once_per_trial(engine: Engine, lineage_id: str) -> None:
    failed = _record(lineage_id, "a", 0, 0.0, failure_class=FailureClass.MAX_TURNS)
    infra = _record(lineage_id, "b", 1, None, failure_class=FailureClass.ENV_BUILD_FAILED)
    with session_scope(engine) as session:
        repo.insert_trials(
            session=session, records=[failed, infra], lineage_id=lineage_id, generation_index=0, stage="expansion"
        )
        assert repo.record_audit(
            session=session,
            trial_id=failed.trial_id,
            failure_class=FailureClass.MAX_TURNS,
            owner=AuditOwner.CONFIG,
            evidence={"turns": 40},
            judged_by="rules",
        )
        assert repo.record_audit(
            session=session,
            trial_id=infra.trial_id,
            failure_class=FailureClass.ENV_BUILD_FAILED,
            owner=AuditOwner.INFRA,
            evidence={"log": "apt-get failed"},
            judged_by="judge:qwen3",
        )
    with session_scope(engine) as session:
        assert not repo.record_audit(
            session=session,
            trial_id=failed.trial_id,
            failure_class=FailureClass.TASK_FAILED,
            owner=AuditOwner.MODEL,
            evidence={},
            judged_by="rules",
        )
        audit = repo.get_audit(session=session, trial_id=failed.trial_id)
        assert (audit.owner, audit.failure_class, audit.evidence) == (
            AuditOwner.CONFIG,
            FailureClass.MAX_TURNS,
            {"turns": 40},
        )
        assert [a.trial_id for a in repo.list_audits(session=session, lineage_id=lineage_id)] == [
            failed.trial_id,
            infra.trial_id,
        ]
        assert [a.judged_by for a in repo.list_audits(session=session, owner=AuditOwner.INFRA)] == ["judge:qwen3"]
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.record_audit(
            session=session,
            trial_id="t-missing",
            failure_class=FailureClass.AGENT_ERROR,
            owner=AuditOwner.MODEL,
            evidence={},
            judged_by="rules",
        )
