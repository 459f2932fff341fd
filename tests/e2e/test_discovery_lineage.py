"""A lineage generation with Discovery on the real stack (Temporal, Ray, Docker, SQLite).

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API answers the
Discovery prompt with fixed proposals (two valid, one broken) and answers the agent with
``finish``. The pool must grow by exactly the admitted tasks, with held-out assignment
following the lineage's fraction.
"""

from __future__ import annotations

import copy
import json

import pytest

from mindforge.hcp import load_contract
from mindforge.orchestration import Stage
from mindforge.policy.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import pool
from mindforge.store.models import PoolSplit
from tests.e2e.histories import save_histories
from tests.e2e.test_lineage import CONTRACT, TASKS, _run_in_process, _spec, _stored
from tests.unit.discovery.sample_proposals import BROKEN, TOO_EASY, TOO_EASY_MARKER, VALID, reply

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]


def test_discovery_grows_the_pool_by_exactly_the_admitted_tasks(temporal_env, ray_cluster, settings):
    env, _address, loop = temporal_env
    second = copy.deepcopy(TOO_EASY)
    second["instruction"] = second["instruction"].replace(f" ({TOO_EASY_MARKER})", "")
    proposals = reply(VALID, BROKEN, second)
    finish = json.dumps({"tool": "finish", "arguments": {}})
    script = {
        "base_models": [load_contract(CONTRACT).model.id],
        "rules": [{"match": {"system_contains": "You design new terminal tasks"}, "reply": {"content": proposals}}],
        "default": {"content": finish},
    }
    with start_scripted_policy(script) as policy:
        spec = _spec("disc", policy.base_url, generations=1, attempts=1, held_out_fraction=0.5)
        spec.stages = [Stage.DISCOVERY, Stage.EXPANSION]
        spec.discovery_count = 3
        spec.discovery_attempts = 1
        loop.run_until_complete(_run_in_process(env, settings, spec))
        loop.run_until_complete(save_histories(env, "disc"))
    records, gens, status = _stored(settings, "disc")
    assert status == "completed"
    index, _st, stages, record = gens[0]
    assert stages == ["discovery", "expansion"]
    disc = record["discovery"]
    admitted = {a["task_id"] for a in disc["admitted"]}
    assert admitted == {"g0-region-totals", "g0-touch-ready-flag"}, disc["rejected"]
    assert {r["reason"] for r in disc["rejected"]} == {"broken"}

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        members = pool.list_pool(session=s, lineage_id="disc")
        added = [m for m in members if m.added_generation == 0]
        tasks = {t.id: t for t in pool.list_pool_tasks(session=s, lineage_id="disc")}
        assert len(members) == len(TASKS) + len(admitted)
        discovered = {tasks[m.task_hash].task_id for m in added if tasks[m.task_hash].source == "discovered"}
        assert discovered == admitted
        held = sum(m.split == PoolSplit.HELD_OUT for m in members)
        assert abs(held / len(members) - 0.5) <= 1 / len(members)
        search = [m for m in members if m.split == PoolSplit.SEARCH]
    # Expansion ran on the grown search split, one attempt per task
    assert len(records) == len(search)
