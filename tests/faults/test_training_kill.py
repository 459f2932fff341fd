"""The Ray worker that trains the Update's adapter is SIGKILLed: training starts again, nothing half-made is registered.

The training task trains into a private ``.NAME.partial-*`` directory and renames it into
place with its training record (:func:`workers.ray_trials.train_adapter_payload`); the
``train_adapter`` activity fails when its Ray task is lost, and Temporal runs it again.
The test kills the trainer a seeded moment after it starts and checks that the lineage
completes with one registered revision, whose directory is the finished one (training
record present, the registered sha256 its files' hash) and which passed validation;
no partial directory is registered or handed off, and none is left. SCRIPTED POLICY behind the real HTTP
API for the rollouts; the tiny model, PEFT, TRL, Temporal, Ray, Docker and SQLite are real.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import psutil
import pytest

from mindforge.payloads import (
    EvaluationSpec,
    ExpansionSpec,
    LineageSpec,
    RuntimeSpec,
    SearchBudgetSpec,
    Stage,
    UpdateSpec,
)
from mindforge.payloads.training import TrainerConfig
from mindforge.store import engine as se
from mindforge.store import lineages, registry
from tests.conftest import BUNDLED_TASKS
from tests.e2e.test_update import SEARCH, SELECTION, _pinned, _run, _script
from tests.faults.lineage_faults import fault_counts, fault_seeds, record_result

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

TRAIN_TASK_TITLE = "ray::train_adapter_task"
ATTEMPTS = 2


async def kill_the_trainer(rng: random.Random, killed: list[datetime]) -> None:
    """SIGKILL the Ray worker running ``train_adapter_task`` a seeded moment (0-2 s) after it starts."""
    while True:
        procs = psutil.process_iter(["cmdline"])
        found = [p for p in procs if " ".join(p.info["cmdline"] or []).startswith(TRAIN_TASK_TITLE)]
        if found:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(rng.uniform(0.0, 2.0))
    found[0].kill()
    killed.append(datetime.now(UTC))


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_killed_trainer_trains_again_and_registers_only_a_whole_adapter(
    temporal_env, ray_cluster, settings, contract_path, seed
) -> None:
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model
    from mindforge.trainer.validate_adapter import sha256_file

    env, _address, loop = temporal_env
    killed: list[datetime] = []
    name = f"train-kill-{seed}"
    tasks = SEARCH + SELECTION
    adapter = f"{name}-g0-r0"
    with start_scripted_policy(_script(tasks, adapters=(adapter,), selection=tuple(SELECTION))) as policy:
        spec = LineageSpec(
            name=name,
            tasks=[str(BUNDLED_TASKS / t) for t in tasks],
            contract_path=str(contract_path),
            stages=[Stage.EXPANSION, Stage.UPDATE],
            runtime=RuntimeSpec(policy_url=policy.base_url, trial_batch_size=6, heartbeat_timeout_sec=60),
            expansion=ExpansionSpec(attempts=ATTEMPTS, search=SearchBudgetSpec(enabled=False)),
            update=UpdateSpec(
                base_model_path=str(ensure_tiny_model()),
                iterations=0,
                trainer=TrainerConfig(
                    lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                    batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False,
                ),
                max_rank=8,
            ),
            evaluation=EvaluationSpec(splits=_pinned(SEARCH, SELECTION, []), attempts=1),
        )

        async def scenario() -> None:
            fault = asyncio.create_task(kill_the_trainer(random.Random(seed), killed))
            await _run(env, settings, [spec])
            await fault

        loop.run_until_complete(scenario())

    assert killed, "the trainer was never killed"
    counts = fault_counts(settings, name, planned=len(SEARCH) * ATTEMPTS)
    assert counts.status == "completed"
    assert (counts.lost, counts.double_counted, counts.infra_scored, counts.orphans) == (0, 0, 0, 0), counts
    with se.session_scope(se.init_db(settings.db_url)) as s:
        revisions = registry.list_adapters(session=s, lineage_id=name)
        update = dict(lineages.get_generation(session=s, lineage_id=name, index=0).record)["update"]
    assert [r.name for r in revisions] == [adapter], "one revision, registered once"
    # recovered when the revision, trained again, was registered
    record_result("trainer killed mid-Update", seed, counts, (revisions[0].created_at - killed[0]).total_seconds())
    (row,) = revisions
    adapter_dir = settings.artifacts / "adapters" / name / adapter
    assert row.path == str(adapter_dir) and (adapter_dir / "mindforge_train.json").is_file()
    # registered after validation passed, with the hash of the weights now in place
    assert row.sha256 == sha256_file(adapter_dir / "adapter_model.safetensors")
    assert update["adapter"]["name"] == adapter and update["adapter"]["sha256"] == row.sha256, update
    partials = [p for p in adapter_dir.parent.iterdir() if ".partial-" in p.name]
    assert partials == [], partials  # the killed run's private directory was removed by the rerun
