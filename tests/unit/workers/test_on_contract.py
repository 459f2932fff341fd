"""The on-contract guard on a real SQLite store: a pair gate whose trained pair runs under another
harness than the one Update trained under is a non-retryable ``OffContractError``, never a
fallback; the kept pair it is compared with keeps its own harness (the gate decides contract
and adapter as one); the successor contract that only names the new adapter is the same harness."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from mindforge.evaluation import PairRef
from mindforge.evaluation.on_contract import OffContractError, check_same_harness, harness_key
from mindforge.hcp import derive, load_contract
from mindforge.payloads import EvaluationSpec, PlanPromotionInput, RuntimeSpec, UpdateSpec
from mindforge.store import engine as se
from mindforge.store import init_db, registry
from tests.conftest import REPO
from workers.update_activities import UpdateActivities, successor_contract


@pytest.fixture
def contracts():
    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    other = derive(base, revision="9.9.9-other", edit="system prompt", changes={"resources.system_prompt": "Be terse."})
    return base, other, successor_contract(base, "lin-g0-r0")


def test_an_adapter_derivation_keeps_the_harness_and_a_prompt_edit_does_not(contracts):
    base, other, with_adapter = contracts
    assert with_adapter.content_hash != base.content_hash
    assert harness_key(with_adapter) == harness_key(base) != harness_key(other)
    check_same_harness("promotion gate", base, with_adapter)
    with pytest.raises(OffContractError, match="promotion gate: runs under contract"):
        check_same_harness("promotion gate", base, other)


def _gate(trained_under: str, without: str, with_adapter: str) -> PlanPromotionInput:
    return PlanPromotionInput(
        lineage_id="lin", generation=0, runtime=RuntimeSpec(), evaluation=EvaluationSpec(), update=UpdateSpec(),
        without=PairRef(contract_hash=without), with_adapter=PairRef(contract_hash=with_adapter, adapter="lin-g0-r0"),
        trained_under=trained_under,
    )


def test_a_gate_off_the_training_contract_is_refused_at_the_activity_boundary(tmp_path, contracts):
    base, other, with_adapter = contracts
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    with se.session_scope(engine) as s:
        for c in contracts:
            registry.register_hcp_contract(session=s, contract=c)
    acts = UpdateActivities(engine, tmp_path / "artifacts")
    try:
        # trained under the baseline, the trained pair gated under another harness: refused, not run
        with pytest.raises(ApplicationError) as excinfo:
            asyncio.run(ActivityEnvironment().run(
                acts.plan_promotion_trials, _gate(base.content_hash, base.content_hash, other.content_hash)
            ))
        assert excinfo.value.type == "OffContractError" and excinfo.value.non_retryable is True
        assert base.content_hash[:12] in str(excinfo.value) and other.content_hash[:12] in str(excinfo.value)
        # on contract, against a parent pair under another harness: the guard lets it through
        # (the lineage has no selection tasks, so nothing to run)
        for parent in (base, other):
            plan = asyncio.run(ActivityEnvironment().run(
                acts.plan_promotion_trials, _gate(base.content_hash, parent.content_hash, with_adapter.content_hash)
            ))
            assert plan.tasks == 0
    finally:
        engine.dispose()


def test_rollouts_from_the_adapter_the_training_contract_names_run_under_that_contract(tmp_path, contracts):
    """From generation 1 on the training contract is the parent pair's, naming the adapter the
    first iteration draws from: its rollouts run under it (no derivation onto itself)."""
    from workers.iteration_activities import _rollout_contract

    base, _other, with_adapter = contracts
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    with se.session_scope(engine) as s:
        for c in (base, with_adapter):
            registry.register_hcp_contract(session=s, contract=c)
        assert _rollout_contract(s, base.content_hash, "") == base.content_hash
        assert _rollout_contract(s, with_adapter.content_hash, "lin-g0-r0") == with_adapter.content_hash
        # a later iteration's adapter: the training contract naming it instead, same harness
        later = _rollout_contract(s, with_adapter.content_hash, "lin-g1-r1-i0")
        contract = registry.get_contract(session=s, content_hash=later)
        assert later not in (base.content_hash, with_adapter.content_hash) and "lin-g1-r1-i0" in contract.toml_text
    engine.dispose()
