"""Contract and adapter registries: idempotent registration, immutable names, lineage links."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from mindforge.hcp import derive, load_contract, loads_contract
from mindforge.settings import REPO_ROOT
from mindforge.store import (
    AdapterImmutableError,
    AdapterRevisionCreate,
    ContractIdentityError,
    ContractImmutableError,
    ContractNotRegisteredError,
    NotFoundError,
    session_scope,
)
from mindforge.store import registry as repo

ROOT = "c0" * 32  # registered by the lineage_id fixture as baseline@1.0.0
CHILD = "c1" * 32


def _adapter(name: str, sha256: str, *, lineage_id: str | None, revision: int = 0, parent_id: str | None = None):
    return AdapterRevisionCreate(
        name=name,
        base_model="Qwen/Qwen3-0.6B",
        lineage_id=lineage_id,
        revision=revision,
        parent_id=parent_id,
        path=f"adapters/{name}",
        sha256=sha256,
        rank=8,
        alpha=16.0,
        target_modules=["q_proj", "v_proj"],
        training_config={"learning_rate": 1e-5, "group_size": 4},
        trial_ids=["t-1", "t-2"],
    )


def test_register_contract_is_idempotent_and_keeps_lineage(engine: Engine, lineage_id: str) -> None:
    kwargs = dict(name="baseline", revision="1.0.1", content_hash=CHILD, parent_hash=ROOT, edit="tools.add read_file")
    with session_scope(engine) as session:
        first = repo.register_contract(session=session, toml_text="x = 1\n", **kwargs)
    with session_scope(engine) as session:
        again = repo.register_contract(session=session, toml_text="x = 1\n", **kwargs)
        assert again.hash == first.hash == CHILD
        assert len(repo.list_contracts(session=session, name="baseline")) == 2
        assert (
            repo.get_contract_by_name(session=session, name="baseline", revision="1.0.1").edit == "tools.add read_file"
        )
        assert [c.hash for c in repo.contract_ancestry(session=session, content_hash=CHILD)] == [CHILD, ROOT]
        assert repo.contract_ancestry(session=session, content_hash="ff" * 32) == []


def test_a_nul_in_a_model_written_edit_is_stored_as_a_replacement_character(engine: Engine, lineage_id: str) -> None:
    # an edit a model proposed may hold a NUL, which Postgres text refuses
    with session_scope(engine) as session:
        repo.register_contract(
            session=session, name="baseline", revision="1.0.2", content_hash=CHILD, toml_text="x = 1\n",
            parent_hash=ROOT, edit="prompt.append '\x00'",
        )
    with session_scope(engine) as session:
        row = repo.get_contract_by_name(session=session, name="baseline", revision="1.0.2")
        assert row.edit == "prompt.append '\ufffd'"


def test_require_contract_returns_the_row_or_names_the_missing_hash(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        assert repo.require_contract(session=session, content_hash=ROOT).hash == ROOT
        with pytest.raises(ContractNotRegisteredError, match=f"contract {'ff' * 32} is not registered") as err:
            repo.require_contract(session=session, content_hash="ff" * 32)
    assert isinstance(err.value, NotFoundError) and err.value.key == "ff" * 32


def test_same_name_and_revision_with_other_content_raises(engine: Engine, lineage_id: str) -> None:
    expected = r"baseline@1\.0\.0 is already registered with content hash c0c0"
    with pytest.raises(ContractImmutableError, match=expected), session_scope(engine) as session:
        repo.register_contract(
            session=session, name="baseline", revision="1.0.0", content_hash=CHILD, toml_text="changed = true\n"
        )
    with session_scope(engine) as session:
        assert repo.get_contract(session=session, content_hash=CHILD) is None


def test_same_hash_under_other_identity_raises(engine: Engine, lineage_id: str) -> None:
    with (
        pytest.raises(ContractIdentityError, match=r"registered as baseline@1\.0\.0"),
        session_scope(engine) as session,
    ):
        repo.register_contract(session=session, name="other", revision="2.0.0", content_hash=ROOT, toml_text="")


def test_register_hcp_contract_links_parent_by_ref(engine: Engine) -> None:
    baseline = load_contract(REPO_ROOT / "hcp_contracts" / "baseline.toml")
    child = derive(baseline, revision="9.9.9", edit="plan before acting", changes={"hooks.plan_first": True})
    with pytest.raises(NotFoundError, match=baseline.ref), session_scope(engine) as session:
        repo.register_hcp_contract(session=session, contract=child)  # parent not registered yet
    with session_scope(engine) as session:
        root = repo.register_hcp_contract(session=session, contract=baseline)
        stored = repo.register_hcp_contract(session=session, contract=child)
    with session_scope(engine) as session:
        assert (stored.hash, stored.parent_hash, stored.edit) == (child.content_hash, root.hash, "plan before acting")
        assert loads_contract(stored.toml_text).content_hash == child.content_hash
        assert repo.register_hcp_contract(session=session, contract=child).hash == stored.hash
    changed = derive(baseline, revision="9.9.9", edit="other edit", changes={"hooks.verify_before_finish": True})
    with pytest.raises(ContractImmutableError), session_scope(engine) as session:
        repo.register_hcp_contract(session=session, contract=changed)


def test_contract_parent_must_be_registered(engine: Engine) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.register_contract(
            session=session, name="orphan", revision="1", content_hash=CHILD, parent_hash="ab" * 32, toml_text=""
        )


def test_register_and_read_adapter(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        first = repo.register_adapter(session=session, adapter_in=_adapter("demo-r0", "a0" * 32, lineage_id=lineage_id))
        second = repo.register_adapter(
            session=session,
            adapter_in=_adapter("demo-r1", "a1" * 32, lineage_id=lineage_id, revision=1, parent_id=first.id),
        )
    with session_scope(engine) as session:
        stored = repo.get_adapter_by_name(session=session, name="demo-r1")
        assert stored.id == second.id
        assert stored.parent_id == first.id
        assert stored.target_modules == ["q_proj", "v_proj"]
        assert stored.training_config == {"learning_rate": 1e-5, "group_size": 4}
        assert stored.trial_ids == ["t-1", "t-2"]
        assert (stored.rank, stored.alpha) == (8, 16.0)
        assert repo.get_adapter(session=session, adapter_id=first.id).name == "demo-r0"
        assert [a.revision for a in repo.list_adapters(session=session, lineage_id=lineage_id)] == [0, 1]


def test_adapter_name_reuse_with_other_weights_raises(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        first = repo.register_adapter(session=session, adapter_in=_adapter("demo-r0", "a0" * 32, lineage_id=lineage_id))
    with session_scope(engine) as session:
        again = repo.register_adapter(session=session, adapter_in=_adapter("demo-r0", "a0" * 32, lineage_id=lineage_id))
        assert again.id == first.id
    with pytest.raises(AdapterImmutableError, match=r"demo-r0.*sha256"), session_scope(engine) as session:
        repo.register_adapter(session=session, adapter_in=_adapter("demo-r0", "b0" * 32, lineage_id=lineage_id))
    with session_scope(engine) as session:
        assert repo.get_adapter_by_name(session=session, name="demo-r0").sha256 == "a0" * 32


def test_adapter_revision_number_is_unique_per_lineage(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        repo.register_adapter(session=session, adapter_in=_adapter("demo-r0", "a0" * 32, lineage_id=lineage_id))
    with pytest.raises(AdapterImmutableError, match="registered as 'demo-r0'"), session_scope(engine) as session:
        repo.register_adapter(session=session, adapter_in=_adapter("demo-r0b", "a2" * 32, lineage_id=lineage_id))


def test_adapter_fields_are_validated() -> None:
    with pytest.raises(ValueError, match="rank"):
        AdapterRevisionCreate(name="x", base_model="m", path="p", sha256="s", rank=0, alpha=1.0)
