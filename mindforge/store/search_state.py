"""Configuration-search state and candidates in the store: what an activity does around plan/observe.

A step, as an activity runs it::

    state = load_state(session=s, job_id=job)                # last committed step
    plan = plan_step(state)
    register_candidates(session=s, job_id=job, root=root, candidates=plan.new_candidates)
    ... run plan.cells, skipping trial ids already stored ...
    state = observe(state, results)
    commit_state(session=s, job_id=job, state=state)         # in one transaction

Every write is idempotent (contracts by hash, candidates by (job, hash), trials by id),
so repeating any part after a crash stores nothing twice. Functions only flush; the
caller's session scope commits.
"""

from __future__ import annotations

from sqlmodel import Session

from mindforge.domain import RunStatus
from mindforge.hcp import HCPContract, dump_contract
from mindforge.search.candidates import Candidate, materialize_chain
from mindforge.search.state import SearchState
from mindforge.store import registry as registry_repo
from mindforge.store import search as search_repo
from mindforge.store.errors import NotFoundError


def register_contract(session: Session, contract: HCPContract, parent_hash: str | None) -> None:
    """Register one contract (idempotent)."""
    registry_repo.register_contract(
        session=session,
        name=contract.mindforge.name,
        revision=contract.mindforge.revision,
        content_hash=contract.content_hash,
        toml_text=dump_contract(contract),
        parent_hash=parent_hash,
        edit=contract.mindforge.edit,
    )


def register_candidates(*, session: Session, job_id: str, root: HCPContract, candidates: list[Candidate]) -> int:
    """Register the contracts of the candidates' edit chains and record them as the job's candidates.

    The root must already be registered (it is the generation's contract).

    Returns:
        how many candidates were new to the job.
    """
    added = 0
    for candidate in candidates:
        parent = root.content_hash
        for contract in materialize_chain(root, candidate.edits):
            register_contract(session, contract, parent)
            parent = contract.content_hash
        added += search_repo.add_search_candidate(
            session=session,
            job_id=job_id,
            contract_hash=candidate.contract_hash,
            parent_hash=candidate.parent_hash,
            edit=materialize_chain(root, candidate.edits)[-1].mindforge.edit,
            step=candidate.step,
        )
    return added


def commit_state(*, session: Session, job_id: str, state: SearchState) -> None:
    """Store the state after a step, with spending, status and (once stopped) the stop reason."""
    search_repo.save_search_state(
        session=session,
        job_id=job_id,
        state=state.model_dump(mode="json"),
        spent=state.spent.model_dump(mode="json") | {"candidates": len(state.candidates), "steps": state.step},
        status=RunStatus.COMPLETED if state.done else RunStatus.RUNNING,
        stop_reason=state.stop_reason,
    )


def load_state(*, session: Session, job_id: str) -> SearchState | None:
    """The job's last committed state, or None before the first commit.

    Raises:
        NotFoundError: no such job.
    """
    job = search_repo.get_search_job(session=session, job_id=job_id)
    if job is None:
        raise NotFoundError("search job", job_id)
    return SearchState.model_validate(job.state) if job.state else None


def require_state(*, session: Session, job_id: str) -> SearchState:
    """The job's last committed state, for a step of a search that has started.

    Raises:
        NotFoundError: no such job, or no state committed yet.
    """
    state = load_state(session=session, job_id=job_id)
    if state is None:
        raise NotFoundError("committed state of search job", job_id)
    return state
