"""Continuing a stored lineage (``continue_lineage``) on a real SQLite store: next index, last pair, root, refusals."""

from __future__ import annotations

import pytest

from mindforge.payloads import ContinueLineageInput, EvaluationSpec, LineageSpec
from mindforge.store import init_db, lineages, registry, session_scope
from mindforge.store.models import Lineage, RunStatus
from tests.conftest import REPO
from workers.lineage_continue import LineageNotContinuableError, continuation


def test_continuation_starts_after_the_last_completed_generation_from_its_successor_pair(tmp_path):
    from mindforge.hcp import load_contract

    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    engine = init_db(f"sqlite:///{tmp_path / 'mf.db'}")
    spec = LineageSpec(name="night", tasks=["/t"], contract_path="/c.toml", generations=2, evaluation=EvaluationSpec())
    with session_scope(engine) as s:
        s.add(Lineage(id="night", name="night", spec={**spec.model_dump(mode="json"), "split_warnings": []}))
        s.flush()
        registry.register_hcp_contract(session=s, contract=contract)
        for index in (0, 1, 2):
            lineages.create_generation(session=s, lineage_id="night", index=index, contract_hash=contract.content_hash)
        root = {"contract_hash": contract.content_hash, "adapter": ""}
        lineages.update_generation(session=s, lineage_id="night", index=0, status=RunStatus.COMPLETED,
                                   record={"contract_hash": "a" * 64, "adapter": "", "compounding": {"parent": root}})
        lineages.update_generation(session=s, lineage_id="night", index=1, status=RunStatus.COMPLETED,
                                   record={"contract_hash": "b" * 64, "adapter": "night-g1-r1"})
        lineages.update_generation(session=s, lineage_id="night", index=2, status=RunStatus.FAILED)
        lineages.update_lineage(session=s, lineage_id="night", status=RunStatus.RUNNING)
    ask = ContinueLineageInput(lineage_id="night", generations=2, workflow_id="lineage-night-1", run_id="run-a")
    with pytest.raises(LineageNotContinuableError, match="is running"), session_scope(engine) as s:
        continuation(s, ask)
    with session_scope(engine) as s:
        lineages.update_lineage(session=s, lineage_id="night", status=RunStatus.FAILED)
    for _ in range(2):  # a retried activity of the same run gets the same answer and records one extension
        with session_scope(engine) as s:
            got = continuation(s, ask)
        assert (got.next_generation, got.spec.generations) == (2, 4)  # the failed generation 2 runs again
        assert (got.contract_hash, got.adapter) == ("b" * 64, "night-g1-r1")
        assert (got.root_contract_hash, got.root_adapter) == (contract.content_hash, "") and got.prepared
    with session_scope(engine) as s:
        lin = lineages.get_lineage(session=s, lineage_id="night")
        assert lin.spec["generations"] == 4 and len(lin.spec["extensions"]) == 1
    # a later run under the same workflow id (``lineage extend`` again) adds generations after the last completed
    with session_scope(engine) as s:
        lineages.create_generation(session=s, lineage_id="night", index=3, contract_hash=contract.content_hash)
        for index in (2, 3):
            lineages.update_generation(session=s, lineage_id="night", index=index, status=RunStatus.COMPLETED,
                                       record={"contract_hash": "c" * 64, "adapter": f"night-g{index}-r1"})
        lineages.update_lineage(session=s, lineage_id="night", status=RunStatus.COMPLETED)
    again = ask.model_copy(update={"generations": 1, "run_id": "run-b"})
    with session_scope(engine) as s:
        got = continuation(s, again)
    assert (got.next_generation, got.spec.generations, got.adapter) == (4, 5, "night-g3-r1")
    with session_scope(engine) as s:
        lin = lineages.get_lineage(session=s, lineage_id="night")
        assert lin.spec["generations"] == 5 and len(lin.spec["extensions"]) == 2
    with pytest.raises(LineageNotContinuableError, match="no lineage"), session_scope(engine) as s:
        continuation(s, ContinueLineageInput(lineage_id="nope"))
    engine.dispose()
