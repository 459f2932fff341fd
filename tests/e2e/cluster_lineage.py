"""Helpers of the tests that run lineages on ``mindforge cluster up`` (its own Docker network, Ray Client).

A module's cluster is started once (:func:`started_cluster`) and removed after it. The
host's MindForge worker joins it as the worker a user starts from the cluster's settings
would: Ray Client to the head, the store's URL from the cluster's file, trials asking
for the ``sandbox`` resource; the scripted policy (the one allowed test double, behind
the real HTTP API) listens on this machine's address on the cluster's network, with an
API key, which is where the nodes' trials reach it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import SecretStr

from mindforge.devstack.cluster import ClusterInfo, ClusterSpec, cluster_down, cluster_up
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as se
from mindforge.store import lineages, trials

# the cluster's nodes take this machine's Ray token; Ray reads the mode when it is first imported
if (Path.home() / ".ray" / "auth_token").is_file():
    os.environ.setdefault("RAY_AUTH_MODE", "token")

#: the variables a host worker of the cluster gets from its settings file, set in this process while a
#: cluster's tests run (``run_trial_ref`` reads ``trial_sandboxes`` from the process's settings)
CLUSTER_ENV = ("MINDFORGE_TRIAL_SANDBOXES",)


@contextmanager
def started_cluster(settings: Settings, spec: ClusterSpec) -> Iterator[ClusterInfo]:
    """``cluster_up`` for the duration of the block; then the cluster is removed and the process restored.

    The session's Ray (the two-node ``ray_cluster`` of other modules, when it is set up)
    is left for the block, so the block's ``init_ray`` joins the containers, and joined
    again after it; the environment variables of :data:`CLUSTER_ENV` are restored.
    """
    import workers.main as worker_main

    previous = worker_main.connected_ray_address()
    worker_main.disconnect_ray()
    info = cluster_up(settings, spec, say=lambda m: None)
    saved = {k: os.environ.get(k) for k in CLUSTER_ENV}
    os.environ.update({k: info.env[k] for k in CLUSTER_ENV})
    get_settings.cache_clear()
    try:
        yield info
    finally:
        # a Ray driver whose head goes away ends its own process: this test session must not be one
        worker_main.disconnect_ray()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()
        removed = cluster_down(settings, spec.name, say=lambda m: None)
        if previous:
            worker_main.init_ray(previous)
        assert {f"container {c}" for c in info.containers} <= set(removed)


def cluster_settings(settings: Settings, info: ClusterInfo, policy_key: str) -> Settings:
    """The host worker's settings for ``info``: the store by file, Ray Client, trials asking for ``sandbox``."""
    return settings.model_copy(update={
        "database_url": None,
        "database_url_file": info.database_url_file,
        "ray_address": info.ray_address,
        "trial_sandboxes": 1.0,
        "policy_api_key": SecretStr(policy_key),
    })


def new_policy_key() -> str:
    """A fresh API key for the scripted policy on the cluster's network."""
    return f"mf-test-{secrets.token_hex(12)}"


def node_addresses() -> dict[str, str]:
    """Ray node id -> the node's address, as the connected cluster reports it (dead nodes too)."""
    import ray

    return {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}


def stored(db_url: str, name: str):
    """The lineage's stored trial records and its status."""
    eng = se.init_db(db_url)
    try:
        with se.session_scope(eng) as s:
            rows = [r.to_record() for r in trials.list_trials(session=s, lineage_id=name)]
            lin = lineages.get_lineage(session=s, lineage_id=name)
            return rows, str(lin.status) if lin else None
    finally:
        eng.dispose()
