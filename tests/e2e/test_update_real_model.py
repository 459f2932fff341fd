"""Two on-policy GRPO iterations of the Update stage on the real model, through Temporal and Ray.

No test double: the policy is the bundled SmolLM2-135M-Instruct GGUF served by the llama.cpp
engine behind the OpenAI-compatible API (as the main job serves it), rollouts run as Ray
tasks in Docker sandboxes, and each iteration trains the next LoRA adapter with
transformers + PEFT on the same weights (dequantised), then hot-loads it into the llama.cpp
server so that the next iteration draws from it.

The contract is the one ``bench_update`` trains under, small: the SmolLM2 baseline with the
``command`` action format and an oracle-seeded experience library of the lineage's own
search split (each task's ``solution/solve.sh`` mined and validated here by replay with no
model; BM25 retrieval never shows a task its own entry). No selection task is mined and no
hand-written example is shown. Sampling is stochastic (temperature 0.7), so the checks are
what must hold for any draw: an iteration whose groups all came out flat must say so and
train nothing; one with a varied group must train tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.payloads import EvaluationSpec, LineageSpec, RuntimeSpec, Stage, UpdateOutcome, UpdateSpec
from mindforge.payloads.training import TrainerConfig
from mindforge.store import engine as se
from mindforge.store import lineages, registry, trials
from tests.conftest import LLAMACPP_EXTRA, REPO, require_module
from tests.e2e.test_update import _pinned, _run

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow, pytest.mark.llamacpp]

require_module("llama_cpp", LLAMACPP_EXTRA)  # set-up installs the extra: a missing engine fails

MICRO = REPO / "tasks" / "micro"
#: one-command chores this model solves some of the time when shown a neighbour's solution
SEARCH = ["write-hello-file", "make-executable", "env-value-to-file", "make-directory"]
SELECTION = ["create-empty-file"]
LINEAGE = "real-iter"
#: iteration 0 draws a group of every search task from the base weights, and when none of its rollouts passes the
#: Update rightly trains nothing (the contract passes nothing), so the draw is sized to make that rare: measured
#: once, write-hello-file passed 4 of 8 rollouts, make-executable 3 of 12, make-directory 0 of 4; with 2 tasks of
#: 4 rollouts iteration 0 passed none in one clean-clone run of the suite, and at those rates 4 tasks of 8 rollouts
#: pass none with probability about 0.5^8 * 0.75^8 (4e-4)
GROUP = 8


def _library_contract(tmp_path: Path, engine, image_map, settings) -> Path:
    """``smollm2.toml`` + command format + the oracle library of :data:`SEARCH` (validated by replay)."""
    from mindforge.experience import ExperienceSnapshot, attach_snapshot, mine_solution
    from mindforge.hcp import load_contract, save_contract
    from mindforge.search import Edit, materialize
    from mindforge.tasks.loader import load_task
    from mindforge.trials.replay import replay_entry

    kept = []
    for name in SEARCH:
        task = load_task(MICRO / name)
        entry = mine_solution(
            task_id=task.id, task_hash=task.content_hash, instruction=task.instruction,
            solve_sh=task.solution_dir / "solve.sh", split="search", lineage=LINEAGE,
        )  # fmt: skip
        assert entry is not None, name
        verdict = replay_entry(entry, task, engine, artifact_root=settings.artifacts, run_id="real-iter-replay",
                               image_map=image_map)  # fmt: skip
        assert verdict.kept, (name, verdict.rejection)
        kept.append(verdict.entry)
    root = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    command = materialize(root, [Edit(op="action_format", value="command")])
    contract = attach_snapshot(command, ExperienceSnapshot(entries=tuple(kept)), revision="1.2.0-e2e-x", k=4,
                               provenance="oracle")  # fmt: skip
    return save_contract(contract, tmp_path / "smollm2-library.toml")


def _spec(url: str, base_model: str, contract: Path) -> LineageSpec:
    return LineageSpec(
        name=LINEAGE,
        tasks=[str(MICRO / t) for t in SEARCH + SELECTION],
        contract_path=str(contract),
        stages=[Stage.UPDATE],
        runtime=RuntimeSpec(policy_url=url, trial_batch_size=8, heartbeat_timeout_sec=300),
        update=UpdateSpec(
            base_model_path=base_model, iterations=2, group_size=GROUP, tasks_per_iteration=len(SEARCH), max_draws=2,
            # the product's defaults (learning rate, rank, modules, clip, KL) but for the steps, kept short for a CPU
            trainer=TrainerConfig(batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False),
        ),
        evaluation=EvaluationSpec(splits=_pinned(SEARCH, SELECTION, []), attempts=1),
    )


def test_two_real_model_iterations_draw_from_the_current_adapter_and_train_on_varied_groups(
    temporal_env, ray_cluster, settings, docker_engine, image_map, tmp_path
):
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.handoff import served_adapters
    from mindforge.policy.server.server import start_policy_server

    env, _address, loop = temporal_env
    contract = _library_contract(tmp_path, docker_engine, image_map, settings)
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        spec = _spec(server.base_url, resolve_model("smollm2").hf_dir, contract)
        (result,) = loop.run_until_complete(_run(env, settings, [spec]))
        served = served_adapters(server.base_url)
    finally:
        server.stop()

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        update = dict(lineages.get_generation(session=s, lineage_id=LINEAGE, index=0).record)["update"]
        rollouts = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="rollout")]
        adapters = registry.list_adapters(session=s, lineage_id=LINEAGE)
    its = update["iterations"]
    passes = {t: f"{sum(r.passed for r in rollouts if r.task_id == t)}/{sum(r.task_id == t for r in rollouts)}"
              for t in SEARCH}
    assert [it["iteration"] for it in its] == [0, 1], (update.get("reason"), passes)
    assert all(r.has_real_reward for r in rollouts), [r.failure_detail for r in rollouts]
    assert any(r.passed for r in rollouts), "the real model passed no rollout under the library contract"
    drew_from = ""
    for it in its:
        # each iteration draws from the adapter current then: the base weights, then the last trained one
        assert it["adapter"] == drew_from, (it["iteration"], it["adapter"], drew_from)
        drawn = [r for r in rollouts if r.adapter == it["adapter"]]
        assert len(drawn) == GROUP * it["groups"] and it["rollouts"] == len(drawn)
        if it["flat_groups"] < it["groups"]:  # a varied group: trained, on the model's own tokens
            assert it["trained_adapter"] == f"{LINEAGE}-g0-r0-i{it['iteration']}", it
            assert it["steps"] >= 1 and it["tokens_trained"] > 0 and it["loss"] is not None, it
            drew_from = it["trained_adapter"]
        else:  # the honest record of no variance: nothing trained, and it says why
            assert it["trained_adapter"] == "" and it["tokens_trained"] == 0 and it["reason"], it
    trained = [it for it in its if it["trained_adapter"]]
    assert trained, f"no iteration drew a varied group: {its}"
    # the registered revision is the last trained iteration's adapter, hot-loaded into the llama.cpp server
    [adapter] = adapters
    assert adapter.name == f"{LINEAGE}-g0-r0" and adapter.path.endswith(trained[-1]["trained_adapter"])
    assert served.get(adapter.name) == adapter.path
    assert result.outcome in (UpdateOutcome.PROMOTED, UpdateOutcome.NOT_PROMOTED)
