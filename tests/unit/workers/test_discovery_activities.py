"""Discovery activities on a real SQLite store: a contract hash the store does not know is a
non-retryable ``ContractNotRegisteredError`` naming the hash, not an ``AttributeError`` retried ten times."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from mindforge.payloads import CheckProposalInput, DiscoveryInput, LineageSpec
from mindforge.store import init_db
from tests.conftest import REPO
from workers.discovery_activities import DiscoveryActivities

UNKNOWN = "ab" * 32


@pytest.fixture
def activities(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    yield DiscoveryActivities(engine, tmp_path / "artifacts")
    engine.dispose()


def _assert_not_registered(excinfo) -> None:
    err = excinfo.value
    assert err.type == "ContractNotRegisteredError" and err.non_retryable is True
    assert UNKNOWN in str(err)


def test_propose_with_an_unregistered_contract(activities):
    spec = LineageSpec(name="disc", tasks=[], contract_path=str(REPO / "hcp_contracts" / "baseline.toml"))
    inp = DiscoveryInput(lineage_id="disc", generation=0, spec=spec, contract_hash=UNKNOWN)
    with pytest.raises(ApplicationError) as excinfo:
        asyncio.run(ActivityEnvironment().run(activities.propose, inp))
    _assert_not_registered(excinfo)


def test_check_with_an_unregistered_contract(activities, tmp_path):
    inp = CheckProposalInput(lineage_id="disc", generation=0, task_dir=str(tmp_path), contract_hash=UNKNOWN)
    with pytest.raises(ApplicationError) as excinfo:
        asyncio.run(ActivityEnvironment().run(activities.check, inp))
    _assert_not_registered(excinfo)
