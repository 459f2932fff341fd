"""One source of settings: the settings a worker is built on reach its Ray tasks (real Ray, Docker, SQLite).

The worker is built on settings A while the process environment - which ``init_ray``
hands to every Ray worker process - says B. One trial runs through the real
``run_trials`` activity (in the Temporal SDK's ``ActivityEnvironment``), on a local Ray
cluster, in a Docker sandbox. Its artifacts must land under A's artifact root and
nothing under B's. The model is the SCRIPTED POLICY behind the OpenAI-compatible HTTP
API (it answers ``finish``: the trial's outcome does not matter here, its files do).

The policy API key goes the same way: the policy requires A's key, B's environment holds
another; the trial's model calls must carry A's (they reach the policy only with it), and
neither key may reach the Ray job's environment, which Ray writes to its logs.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from mindforge.domain import TrialStage
from mindforge.evaluation import PoolSplit
from mindforge.hcp import load_contract
from mindforge.payloads import RunTrialsInput, TrialSpec
from mindforge.settings import Settings, get_settings
from mindforge.store import LineageCreate, lineages, pool, registry, session_scope, trials
from mindforge.store.models import TaskSource
from mindforge.tasks.loader import load_task
from tests.conftest import FIXTURE_TASKS, REPO

pytestmark = [pytest.mark.docker, pytest.mark.ray]

KEY_A = "sk-worker-a-7d3e"
ENV_B_KEY = "sk-environment-b-91c2"


@pytest.fixture
def ray_local(tmp_path, monkeypatch, settings):
    """The environment says B; a local Ray cluster is started with it (as ``mindforge worker`` does)."""
    import ray

    from workers.main import init_ray

    env_b = tmp_path / "env-b"
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(env_b))
    monkeypatch.setenv("MINDFORGE_ARTIFACT_ROOT", str(env_b / "artifacts"))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("MINDFORGE_POLICY_API_KEY", ENV_B_KEY)
    get_settings.cache_clear()
    if ray.is_initialized():
        ray.shutdown()
    init_ray("local")
    yield env_b
    ray.shutdown()
    get_settings.cache_clear()


def test_a_trial_lands_under_the_workers_settings_not_the_environments(tmp_path, ray_local) -> None:
    import ray

    from mindforge.policy.doubles.scripted import start_scripted_policy
    from workers.lineage_activities import LineageActivities
    from workers.trial_activities import TrialActivities

    env_b = ray_local
    a = Settings(
        data_dir=tmp_path / "a", artifact_root=tmp_path / "a-artifacts", image_map_enabled=True, policy_api_key=KEY_A
    )
    assert get_settings().artifacts == env_b / "artifacts"  # the environment says B
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    task = load_task(FIXTURE_TASKS / "trivially_passing")
    acts = LineageActivities(a.db_url)
    with session_scope(acts.engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="settings-a", spec={}))
        lineage_id = lineage.id
        registry.register_hcp_contract(session=s, contract=contract)
        lineages.create_generation(session=s, lineage_id=lineage_id, index=0, contract_hash=contract.content_hash)
        pool.add_task(session=s, task=task, source=TaskSource.BUNDLED)
        pool.add_to_pool(
            session=s, lineage_id=lineage_id, task_hash=task.content_hash, split=PoolSplit.SEARCH, added_generation=0
        )
    trial_id = trials.make_trial_id(
        lineage_id=lineage_id, generation_index=0, stage="expansion", task_hash=task.content_hash,
        contract_hash=contract.content_hash, adapter="", attempt=0,
    )
    finish = {"content": json.dumps({"tool": "finish", "arguments": {}})}
    script = {"rules": [], "default": finish, "base_models": [contract.model.id]}
    try:
        with start_scripted_policy(script, api_key=KEY_A) as policy:
            batch = RunTrialsInput(
                lineage_id=lineage_id, generation=0, stage=TrialStage.EXPANSION, contract_hash=contract.content_hash,
                policy_url=policy.base_url,
                trials=[TrialSpec(trial_id=trial_id, task_path=str(task.path), task_hash=task.content_hash, attempt=0)],
            )
            result = asyncio.run(ActivityEnvironment().run(TrialActivities(acts.engine, a).run_trials, batch))
            asked = list(policy.app.state.policy.requests)  # logged only past the key check
    finally:
        acts.engine.dispose()
    assert result.ran == 1
    records = list((tmp_path / "a-artifacts").rglob("record.json"))
    assert [r.parent.name for r in records] == [trial_id]
    assert json.loads(records[0].read_text())["trial_id"] == trial_id
    assert not (env_b / "artifacts").exists() or not list((env_b / "artifacts").rglob("*"))
    assert asked, "the trial's model calls did not get past the policy's key check"
    _no_key_in(tmp_path / "a-artifacts", (KEY_A, ENV_B_KEY))
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    assert "MINDFORGE_DATA_DIR" in _text(logs)  # the job's environment is in Ray's logs ...
    _no_key_in(logs, (KEY_A, ENV_B_KEY))  # ... but no key


def _text(root: Path) -> str:
    return "\n".join(f.read_text(errors="replace") for f in root.rglob("*") if f.is_file())


def _no_key_in(root: Path, keys: tuple[str, ...]) -> None:
    text = _text(root)
    assert text and not [k for k in keys if k in text], f"a policy key is written under {root}"
