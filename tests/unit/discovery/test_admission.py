"""Materialising proposals, ids, splits, static rejections through check_proposal, and admission
into a real SQLite store (no Docker: the proposals here never reach validation)."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest
from sqlmodel import select

from mindforge.discovery.admission import (
    check_proposal,
    discovered_dir,
    make_provenance,
    unique_task_id,
)
from mindforge.discovery.checks import PoolIndex
from mindforge.discovery.materialise import (
    DiscoveredTaskLimits,
    materialise,
    move_task_dir,
)
from mindforge.discovery.records import (
    AdmittedTask,
    PairInfo,
    ProposalVerdict,
    RejectReason,
)
from mindforge.discovery.schema import TaskProposal
from mindforge.errors import InputError
from mindforge.evaluation import SplitConfig
from mindforge.settings import REPO_ROOT
from mindforge.store import (
    LineageCreate,
    PoolMembership,
    PoolSplit,
    StoredTask,
    TaskSource,
    init_db,
    session_scope,
)
from mindforge.store.discovered import admit_to_store
from mindforge.store.lineages import create_lineage
from mindforge.tasks.hashing import content_hash
from mindforge.tasks.loader import load_task, load_tasks
from tests.unit.discovery.sample_proposals import READS_SOLUTION, VALID, near_duplicate

PROPOSAL = TaskProposal.model_validate(VALID)


def test_materialised_task_loads_with_fixed_limits(tmp_path):
    root = materialise(PROPOSAL, tmp_path / "staging", task_id="g2-region-totals")
    task = load_task(root)
    assert task.id == "g2-region-totals" and task.warnings == []
    assert task.instruction == VALID["instruction"]
    cfg = task.config
    assert (cfg.metadata.category, cfg.metadata.difficulty) == ("data-processing", "medium")
    assert cfg.environment.network_mode.value == "no-network"
    assert cfg.agent.timeout_sec == DiscoveredTaskLimits().agent_timeout_sec
    assert tomllib.loads((root / "task.toml").read_text())["metadata"]["proposed_id"] == "region-totals"
    assert (root / "environment" / "data" / "sales.csv").read_text() == VALID["files"]["data/sales.csv"]
    assert (root / "tests" / "test_outputs.py").is_file() and task.has_solution
    for rel in ("tests/test.sh", "solution/solve.sh"):
        assert os.stat(root / rel).st_mode & stat.S_IXUSR, rel
    with pytest.raises(InputError, match="already exists"):
        materialise(PROPOSAL, tmp_path / "staging", task_id="g2-region-totals")
    with pytest.raises(InputError, match="not a task id"):
        materialise(PROPOSAL, tmp_path / "staging", task_id="../evil")


def test_same_proposal_gives_the_same_content_hash_under_any_id(tmp_path):
    a = materialise(PROPOSAL, tmp_path, task_id="g1-region-totals")
    b = materialise(PROPOSAL, tmp_path, task_id="g1-region-totals-2")
    assert content_hash(a) == content_hash(b)


def test_move_task_dir_is_idempotent_and_refuses_other_content(tmp_path):
    src = materialise(PROPOSAL, tmp_path / "staging")
    digest = content_hash(src)
    dest = move_task_dir(src, tmp_path / "final" / "region-totals")
    assert not src.exists() and content_hash(dest) == digest
    assert move_task_dir(src, dest) == dest  # a retry after the move
    again = materialise(PROPOSAL, tmp_path / "staging")
    move_task_dir(again, dest)  # same content already there: the staged copy goes
    assert not again.exists()
    other = materialise(TaskProposal.model_validate(READS_SOLUTION), tmp_path / "staging", task_id="region-totals")
    with pytest.raises(InputError, match="other content"):
        move_task_dir(other, dest)


def test_unique_task_id():
    assert unique_task_id("sum", 3, set()) == "g3-sum"
    assert unique_task_id("sum", 3, {"g3-sum", "g3-sum-2"}) == "g3-sum-3"


@pytest.mark.parametrize(
    ("item", "reason"),
    [(near_duplicate(), RejectReason.DUPLICATE_INSTRUCTION), (READS_SOLUTION, RejectReason.TESTS_READ_SOLUTION)],
)
def test_check_proposal_rejects_static_defects_before_building(tmp_path, item, reason):
    """engine=None: a proposal that fails a static check never reaches Docker."""
    pool = PoolIndex.from_tasks(load_tasks([REPO_ROOT / "tasks"]))
    root = materialise(TaskProposal.model_validate(item), tmp_path)
    verdict = check_proposal(root, pool, None, None, tmp_path / "artifacts", make_agent=None)
    assert verdict.reason == reason and not verdict.accepted
    assert verdict.validation_verdict is None and verdict.content_hash == content_hash(root)


def test_check_proposal_rejects_a_directory_that_does_not_load(tmp_path):
    root = materialise(PROPOSAL, tmp_path)
    (root / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    verdict = check_proposal(root, PoolIndex(), None, None, tmp_path, make_agent=None)
    assert verdict.reason == RejectReason.INVALID and "agent.timeout_sec" in verdict.detail


def test_admit_to_store_registers_moves_and_is_idempotent(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'db' / 'mf.db'}")
    artifacts = tmp_path / "artifacts"
    root = materialise(PROPOSAL, tmp_path / "staging", task_id="g1-region-totals")
    digest = content_hash(root)
    pair = PairInfo(contract_hash="ab" * 32, contract_ref="baseline@1.0.0", model="m", adapter="lin-r1")
    verdict = ProposalVerdict(
        task_id=root.name,
        path=str(root),
        content_hash=digest,
        validation_verdict="valid",
        oracle_rewards=[1.0, 1.0],
        nop_reward=0.0,
    )
    admitted = AdmittedTask(
        task_id=root.name, proposed_id="region-totals", path=str(root), content_hash=digest, category="data-processing",
        declared_difficulty="medium", split=PoolSplit.SELECTION,
        provenance=make_provenance(verdict, proposed_id="region-totals", pair=pair, generation=1, run_id="discovery-x"),
    )
    with session_scope(engine) as session:
        lineage_id = create_lineage(session=session, lineage_in=LineageCreate(name="disc")).id
    for _ in range(2):  # the second call is a retry
        with session_scope(engine) as session:
            [done] = admit_to_store(session, lineage_id, 1, [admitted], artifact_root=artifacts)
    assert done.path == str(discovered_dir(artifacts, lineage_id, "g1-region-totals"))
    assert not root.exists() and content_hash(Path(done.path)) == digest
    with session_scope(engine) as session:
        stored = session.exec(select(StoredTask)).all()
        members = session.exec(select(PoolMembership)).all()
        assert [(s.id, s.task_id, s.source, s.path) for s in stored] == [
            (digest, "g1-region-totals", TaskSource.DISCOVERED, done.path)
        ]
        prov = stored[0].provenance
        assert prov["generation"] == 1 and prov["lineage_id"] == lineage_id
        assert prov["proposed_by"]["adapter"] == "lin-r1" and prov["proposed_by"]["contract_hash"] == "ab" * 32
        assert prov["validation"]["oracle_rewards"] == [1.0, 1.0] and prov["content_hash"] == digest
        assert [(m.task_hash, m.split, m.added_generation) for m in members] == [(digest, PoolSplit.SELECTION, 1)]
    engine.dispose()


def test_an_admitted_task_can_never_be_sealed(tmp_path):
    """The sealed split is frozen at lineage start: admission places no task there, and the store refuses one."""
    from mindforge.discovery.records import ProposalBatch
    from mindforge.discovery.run import DiscoveryConfig, admission_record
    from mindforge.evaluation import SplitConfig, admission_config
    from mindforge.store.errors import SealedSplitFrozenError

    staged, verdict = _staged(tmp_path, VALID, "g2-region-totals")
    pair = PairInfo(contract_hash="cd" * 32, contract_ref="baseline@1.0.0", model="m")
    batch = ProposalBatch(run_id="discovery-s", generation=2, pair=pair, requested=1, proposed=1, staged=[staged])
    # most of the pool sealed and the task pinned there: admission still places it elsewhere
    lineage_splits = SplitConfig(
        selection_fraction=0.3, sealed_fraction=0.6, overrides={"g2-region-totals": PoolSplit.SEALED}
    )
    config = DiscoveryConfig(count=1, generation=2, splits=admission_config(lineage_splits), split_key="lin")
    record = admission_record(batch, [verdict], config)
    assert [a.split for a in record.admitted] == [PoolSplit.SEARCH]

    engine = init_db(f"sqlite:///{tmp_path / 'db' / 'mf.db'}")
    sealed = record.admitted[0].model_copy(update={"split": PoolSplit.SEALED})
    with session_scope(engine) as session:
        lineage_id = create_lineage(session=session, lineage_in=LineageCreate(name="frozen")).id
    with pytest.raises(SealedSplitFrozenError, match="sealed split is frozen"), session_scope(engine) as session:
        admit_to_store(session, lineage_id, 2, [sealed], artifact_root=tmp_path / "artifacts")
    assert Path(sealed.path).exists()  # nothing moved
    with session_scope(engine) as session:
        assert session.exec(select(PoolMembership)).all() == []
    engine.dispose()


def _staged(tmp_path, item: dict, task_id: str):
    from mindforge.discovery.records import StagedProposal

    prop = TaskProposal.model_validate(item)
    root = materialise(prop, tmp_path / "staging", task_id=task_id)
    staged = StagedProposal(
        task_id=task_id, proposed_id=prop.task_id, path=str(root), category=prop.category,
        declared_difficulty=prop.difficulty,
    )
    verdict = ProposalVerdict(
        task_id=task_id, path=str(root), content_hash=content_hash(root), validation_verdict="valid"
    )
    return staged, verdict


def test_admission_record_dedupes_parallel_verdicts_and_splits(tmp_path):
    """Verdicts as parallel checks would return them: both copies accepted; only the first is admitted."""
    from mindforge.discovery.records import ProposalBatch
    from mindforge.discovery.run import DiscoveryConfig, admission_record

    first, v1 = _staged(tmp_path, VALID, "g4-region-totals")
    copy_, v2 = _staged(tmp_path, {**VALID, "task_id": "region-totals-again"}, "g4-region-totals-again")
    other, v3 = _staged(tmp_path, READS_SOLUTION, "g4-uppercase-names")
    v3 = v3.model_copy(update={"reason": RejectReason.TESTS_READ_SOLUTION, "detail": "reads /solution"})
    pair = PairInfo(contract_hash="cd" * 32, contract_ref="baseline@1.0.0", model="m")
    batch = ProposalBatch(
        run_id="discovery-t", generation=4, pair=pair, requested=4, proposed=4, staged=[first, copy_, other]
    )
    splits = SplitConfig(selection_fraction=0.2, sealed_fraction=0.2)
    config = DiscoveryConfig(count=4, generation=4, splits=splits, split_key="lin")
    record = admission_record(batch, [v3, v2, v1], config)
    assert [a.task_id for a in record.admitted] == ["g4-region-totals"]
    assert record.admitted[0].split == PoolSplit.SEARCH  # one task: round(1 * 0.2) == 0 on each other split
    assert record.admitted[0].provenance["generation"] == 4
    assert {(r.task_id, r.reason) for r in record.rejected} == {
        ("region-totals-again", RejectReason.DUPLICATE_TESTS),
        ("uppercase-names", RejectReason.TESTS_READ_SOLUTION),
    }
    assert record.reason_counts() == {"duplicate_tests": 1, "tests_read_solution": 1}
    with pytest.raises(ValueError, match="no verdict"):
        admission_record(batch, [v1], config)
