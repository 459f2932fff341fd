"""Ray side of trial execution: one Ray task per trial.

Each Ray worker process keeps one :class:`DockerEngine` (its start-up reaps containers
whose owning process is gone, which is how a killed worker's containers get removed).
The task returns the trial record as a dict; the activity writes it to the store.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import ray

_ENGINE = None


def _engine():
    global _ENGINE
    if _ENGINE is None:
        from mindforge.runner import open_engine
        from mindforge.settings import get_settings

        _ENGINE = open_engine(get_settings())
    return _ENGINE


def run_trial_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one trial described by ``payload`` and return its record as a JSON-able dict.

    Args:
        payload: ``task_path``, ``trial_id``, ``run_id``, ``attempt``, ``agent``
            (``model`` | ``oracle`` | ``nop``), and for ``model``: ``contract_toml``,
            ``policy_url`` (or None).

    Returns:
        ``TrialRecord.model_dump(mode="json")`` plus ``worker`` (``host/node``).
    """
    from mindforge.agent.simple import NopAgent, OracleAgent
    from mindforge.runner import run_trial
    from mindforge.settings import get_settings
    from mindforge.tasks.loader import load_task

    engine, image_map = _engine()
    task = load_task(payload["task_path"])
    kind = payload.get("agent", "model")
    if kind == "model":
        from mindforge.agent.loop import ModelAgent
        from mindforge.hcp import loads_contract

        contract = loads_contract(payload["contract_toml"], source=f"contract {payload.get('contract_hash', '')}")
        agent = ModelAgent(contract, base_url=payload.get("policy_url"))
    elif kind == "oracle":
        agent = OracleAgent()
    else:
        agent = NopAgent()
    rec = run_trial(
        task,
        agent,
        engine,
        run_id=payload["run_id"],
        trial_id=payload["trial_id"],
        artifact_root=get_settings().artifacts,
        attempt=payload["attempt"],
        image_map=image_map,
    )
    out = rec.model_dump(mode="json")
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests call this directly)
        node = ""
    out["worker"] = f"{socket.gethostname()}/{node}/{os.getpid()}"
    return out


@ray.remote(max_retries=0)
def run_trial_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Ray task wrapper of :func:`run_trial_payload` (retries belong to Temporal, not Ray)."""
    return run_trial_payload(payload)


@ray.remote(max_retries=0)
def check_proposal_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Check one staged Discovery proposal on a Ray node; returns the verdict as JSON.

    Args:
        payload: ``task_dir``, ``pool_paths`` (the lineage's pool task dirs),
            ``contract_toml``, ``policy_url``, ``attempts``, ``run_id``.
    """
    from pathlib import Path

    from mindforge.agent.loop import ModelAgent
    from mindforge.discovery.admission import check_proposal
    from mindforge.discovery.checks import PoolIndex
    from mindforge.hcp import loads_contract
    from mindforge.settings import get_settings
    from mindforge.tasks.loader import load_task

    engine, image_map = _engine()
    contract = loads_contract(payload["contract_toml"])
    pool_index = PoolIndex.from_tasks([load_task(Path(p)) for p in payload["pool_paths"]])
    verdict = check_proposal(
        Path(payload["task_dir"]),
        pool_index,
        engine,
        image_map,
        get_settings().artifacts,
        make_agent=lambda: ModelAgent(contract, base_url=payload.get("policy_url")),
        attempts=payload["attempts"],
        run_id=payload["run_id"],
    )
    return verdict.model_dump(mode="json")
