"""Search jobs resume from their last committed state; candidates are unique per job."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from mindforge.store import NotFoundError, RunStatus, session_scope
from mindforge.store import search as repo
from mindforge.store.registry import register_contract

ROOT = "c0" * 32
CHILD = "c1" * 32


def test_search_job_create_is_idempotent_with_an_id(engine: Engine, lineage_id: str) -> None:
    budget = {"trials": 450, "jobs": 69}
    with session_scope(engine) as session:
        job = repo.create_search_job(
            session=session, lineage_id=lineage_id, generation_index=0, budget=budget, job_id="g0-s"
        )
    with session_scope(engine) as session:
        again = repo.create_search_job(
            session=session, lineage_id=lineage_id, generation_index=0, budget={"trials": 1}, job_id="g0-s"
        )
        assert again.id == job.id
        assert again.budget == budget
        assert again.status is RunStatus.PENDING
        fresh = repo.create_search_job(session=session, lineage_id=lineage_id, generation_index=0, budget={})
        assert fresh.id != job.id
        assert len(repo.list_search_jobs(session=session, lineage_id=lineage_id, generation_index=0)) == 2


def test_search_job_needs_its_generation(engine: Engine, lineage_id: str) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.create_search_job(session=session, lineage_id=lineage_id, generation_index=3, budget={})


def test_save_state_then_resume(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        job = repo.create_search_job(session=session, lineage_id=lineage_id, generation_index=0, budget={"trials": 10})
        created = job.updated_at
        repo.save_search_state(
            session=session,
            job_id=job.id,
            state={"step": 1, "frontier": [ROOT]},
            spent={"trials": 4},
            status=RunStatus.RUNNING,
        )
    with session_scope(engine) as session:
        repo.save_search_state(
            session=session,
            job_id=job.id,
            state={"step": 2, "frontier": []},
            spent={"trials": 10},
            status=RunStatus.COMPLETED,
            stop_reason="budget",
        )
    with session_scope(engine) as session:
        stored = repo.get_search_job(session=session, job_id=job.id)
        assert stored.state == {"step": 2, "frontier": []}
        assert stored.spent == {"trials": 10}
        assert (stored.status, stored.stop_reason) == (RunStatus.COMPLETED, "budget")
        assert stored.updated_at >= created
        with pytest.raises(NotFoundError, match="search job"):
            repo.save_search_state(session=session, job_id="missing", state={}, spent={})


def test_candidates_are_unique_per_job(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        register_contract(
            session=session,
            name="baseline",
            revision="1.0.1",
            content_hash=CHILD,
            parent_hash=ROOT,
            edit="hooks.plan_first = true",
            toml_text="",
        )
        job = repo.create_search_job(session=session, lineage_id=lineage_id, generation_index=0, budget={})
        assert repo.add_search_candidate(
            session=session, job_id=job.id, contract_hash=ROOT, parent_hash=None, edit="", step=0
        )
        assert repo.add_search_candidate(
            session=session,
            job_id=job.id,
            contract_hash=CHILD,
            parent_hash=ROOT,
            edit="hooks.plan_first = true",
            step=1,
        )
    with session_scope(engine) as session:
        assert not repo.add_search_candidate(
            session=session, job_id=job.id, contract_hash=CHILD, parent_hash=ROOT, edit="other", step=5
        )
        candidates = repo.list_search_candidates(session=session, job_id=job.id)
        assert [(c.contract_hash, c.step, c.edit) for c in candidates] == [
            (ROOT, 0, ""),
            (CHILD, 1, "hooks.plan_first = true"),
        ]
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.add_search_candidate(
            session=session, job_id=job.id, contract_hash="ee" * 32, parent_hash=None, edit="", step=2
        )
