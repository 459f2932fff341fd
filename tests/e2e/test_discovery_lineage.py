"""A lineage generation with Discovery on the real stack (Temporal, Ray, Docker, SQLite).

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API answers the
Discovery prompt with fixed proposals (two valid, one broken) and answers the agent with
``finish``. The pool must grow by exactly the admitted tasks, each on the split the pure
assignment gives it, and keep that split in the next generation (whose Discovery proposes
the same tasks again: duplicates, rejected before any build).
"""

from __future__ import annotations

import copy
import json

import pytest

from mindforge.evaluation import PoolSplit, SplitCandidate, SplitConfig, admission_config, assign_splits
from mindforge.hcp import load_contract
from mindforge.payloads import DiscoverySpec, Stage
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import lineages, pool
from mindforge.tasks.loader import load_tasks
from tests.conftest import BUNDLED_TASKS
from tests.e2e.histories import save_histories
from tests.e2e.test_lineage import CONTRACT, TASKS, _run_in_process, _spec, _stored
from tests.unit.discovery.sample_proposals import (
    BROKEN,
    TOO_EASY,
    TOO_EASY_MARKER,
    VALID,
    reply,
)

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
        splits = SplitConfig(selection_fraction=0.25, sealed_fraction=0.25, min_tasks=5, allow_small_splits=True)
        spec = _spec("disc", policy.base_url, generations=2, attempts=1, splits=splits)
        spec.stages = [Stage.DISCOVERY, Stage.EXPANSION]
        spec.discovery = DiscoverySpec(count=3, attempts=1)
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
        search = [m for m in members if m.split == PoolSplit.SEARCH]
        lineage_spec = lineages.get_lineage(session=s, lineage_id="disc").spec
        gen1 = lineages.get_generation(session=s, lineage_id="disc", index=1).record["discovery"]
    # the starting pool got the pure assignment; the admitted tasks were placed against it, by category
    start = load_tasks([BUNDLED_TASKS / t for t in TASKS])
    start_splits = assign_splits(
        [SplitCandidate(task_hash=t.content_hash, task_id=t.id, category=t.config.metadata.category) for t in start],
        splits, split_key="disc",
    )
    existing: dict = {}
    for t in start:
        per = existing.setdefault(t.config.metadata.category, {})
        per[start_splits[t.content_hash]] = per.get(start_splits[t.content_hash], 0) + 1
    new = [
        SplitCandidate(task_hash=a["content_hash"], task_id=a["task_id"], category=a["category"])
        for a in disc["admitted"]
    ]
    # admitted tasks never join the sealed split, frozen at lineage start
    want = {**start_splits, **assign_splits(new, admission_config(splits), split_key="disc", existing=existing)}
    assert {m.task_hash: m.split for m in members} == want
    assert {a["content_hash"]: a["split"] for a in disc["admitted"]} == {
        h.task_hash: want[h.task_hash].value for h in new
    }
    assert PoolSplit.SEALED not in {want[h.task_hash] for h in new}
    assert lineage_spec["split_warnings"]  # a pool of 3 is below any minimum; the lineage is flagged
    # generation 1 proposed the same tasks again: rejected as duplicates, so the pool (and each split) stayed
    assert gen1["admitted"] == [] and {r["reason"] for r in gen1["rejected"]} <= {
        "duplicate_instruction",
        "duplicate_tests",
        "broken",
    }
    # Expansion ran on the search split, one attempt per task, each generation (the rest are the
    # sealed measurement of the pair each generation hands on)
    expansion = [r for r in records if r.run_id.endswith("/expansion")]
    assert len(expansion) == 2 * len(search)
    assert all(r.run_id.endswith(("/expansion", "/sealed")) for r in records), {r.run_id for r in records}


def test_family_proposals_grow_the_pool_in_each_of_two_generations(temporal_env, ray_cluster, settings, tmp_path):
    """Test double: a SCRIPTED POLICY answers the family-proposal prompt (a contract with
    ``discovery_mode = "families"``): generation 0, with no family results yet, proposes two
    instances; generation 1, which sees their results, proposes one of them again (a
    near-duplicate, rejected) and a harder one. The agent answers ``finish`` (solves nothing)."""
    env, _address, loop = temporal_env
    text = CONTRACT.read_text(encoding="utf-8").replace("[prompts]\n", '[prompts]\ndiscovery_mode = "families"\n', 1)
    # a changed contract is a new revision (the session's store already holds baseline@1.0.0)
    text = text.replace('revision = "1.0.0"', 'revision = "1.0.0-families"', 1)
    contract = tmp_path / "families.toml"
    contract.write_text(text, encoding="utf-8")
    easy = {"family": "squeeze-repeats", "params": {"lines": 4, "character": "space", "longest_run": 3}}
    other = {"family": "sum-by-key", "params": {"rows": 8, "keys": 3, "separator": "comma"}}
    harder = {"family": "sum-by-key", "params": {"rows": 30, "keys": 6, "separator": "tab"}}
    finish = json.dumps({"tool": "finish", "arguments": {}})
    script = {
        "base_models": [load_contract(contract).model.id],
        "rules": [
            {"match": {"last_message_contains": "(no family instances tried yet)"},
             "reply": {"content": json.dumps({"proposals": [easy, other]})}},
            {"match": {"last_message_contains": "Task families ("},
             "reply": {"content": json.dumps({"proposals": [easy, harder]})}},
        ],
        "default": {"content": finish},
    }
    with start_scripted_policy(script) as policy:
        splits = SplitConfig(selection_fraction=0.0, sealed_fraction=0.25, min_tasks=1, allow_small_splits=True)
        spec = _spec("fam", policy.base_url, generations=2, attempts=1, splits=splits)
        spec.contract_path = str(contract)
        spec.stages = [Stage.DISCOVERY, Stage.EXPANSION]
        spec.discovery = DiscoverySpec(count=2, attempts=1)
        loop.run_until_complete(_run_in_process(env, settings, spec))
    _records, gens, status = _stored(settings, "fam")
    assert status == "completed"
    g0, g1 = gens[0][3]["discovery"], gens[1][3]["discovery"]
    assert [a["provenance"]["family"]["name"] for a in g0["admitted"]] == ["squeeze-repeats", "sum-by-key"]
    assert [a["provenance"]["family"]["params"] for a in g1["admitted"]] == [harder["params"]], g1["rejected"]
    # the repeated instance renders the same tests/ and the same instruction: whichever check meets it first
    assert [r["reason"] for r in g1["rejected"]] in (["duplicate_tests"], ["duplicate_instruction"])
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        members = pool.list_pool(session=s, lineage_id="fam")
    sizes = [sum(m.added_generation <= g for m in members) for g in (0, 1)]
    assert sizes == [len(TASKS) + 2, len(TASKS) + 3]  # the pool grew in both generations
    assert {a["split"] for a in g0["admitted"] + g1["admitted"]} <= {"search", "selection"}
