"""Two on-policy GRPO iterations through Temporal and Ray: Docker rollouts, PEFT training, hot-loading.

An Update-only lineage (no Expansion: the training contract is the root's) runs two
iterations: each draws groups of rollouts from the current adapter for the tasks the
curriculum picks, drops flat groups and draws again from tasks that showed variance,
trains the next LoRA adapter from the current one on the tiny local model (a Ray task)
and hands it to the policy endpoint, so the second iteration's rollouts come from the
first iteration's adapter. A second lineage whose policy never solves anything shows the
other rule: the training contract passed nothing, so Update says so and trains nothing.

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API plays the model in
rollouts (see tests/e2e/test_update.py: it solves a task's first turn with probability 0.5
whatever adapter is asked, and returns no token ids, so the trainer re-tokenises the
trajectories with the tiny model's tokenizer). Every other part is real.
"""

from __future__ import annotations

import pytest

from mindforge.payloads import EvaluationSpec, LineageSpec, RuntimeSpec, Stage, UpdateOutcome, UpdateSpec
from mindforge.payloads.training import TrainerConfig
from mindforge.store import engine as se
from mindforge.store import lineages, registry, trials
from tests.conftest import BUNDLED_TASKS
from tests.e2e.histories import save_histories
from tests.e2e.test_update import _action, _pinned, _run, _script

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

SEARCH = ["log-5xx-report", "regex-ipv4-extract"]
SELECTION = ["jsonl-to-csv"]
GROUP = 6


def _spec(name: str, url: str, tiny: str, contract: str) -> LineageSpec:
    return LineageSpec(
        name=name,
        tasks=[str(BUNDLED_TASKS / t) for t in SEARCH + SELECTION],
        contract_path=contract,
        stages=[Stage.UPDATE],
        runtime=RuntimeSpec(policy_url=url, trial_batch_size=6, heartbeat_timeout_sec=120),
        update=UpdateSpec(
            base_model_path=tiny, iterations=2, group_size=GROUP, tasks_per_iteration=2, max_draws=2,
            trainer=TrainerConfig(
                lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False,
            ),
            max_rank=8,
        ),
        evaluation=EvaluationSpec(splits=_pinned(SEARCH, SELECTION, []), attempts=1),
    )


def test_two_on_policy_iterations_draw_from_the_current_adapter_and_a_contract_that_passes_nothing_trains_nothing(
    temporal_env, ray_cluster, settings, contract_path
):
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    env, _address, loop = temporal_env
    tiny = str(ensure_tiny_model())
    flat_script = {"default": _action("finish"), "base_models": ["tiny"], "return_token_ids": False}
    mixed_script = _script(SEARCH + SELECTION, seed=3)
    with start_scripted_policy(mixed_script) as mixed, start_scripted_policy(flat_script) as flat:
        specs = [
            _spec("iter", mixed.base_url, tiny, str(contract_path)),
            _spec("iter-flat", flat.base_url, tiny, str(contract_path)),
        ]
        result, flat_result = loop.run_until_complete(_run(env, settings, specs))
        loop.run_until_complete(save_histories(env, "iter"))

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        update = dict(lineages.get_generation(session=s, lineage_id="iter", index=0).record)["update"]
        rollouts = [r.to_record() for r in trials.list_trials(session=s, lineage_id="iter", stage="rollout")]
        [adapter] = registry.list_adapters(session=s, lineage_id="iter")
        flat_update = dict(lineages.get_generation(session=s, lineage_id="iter-flat", index=0).record)["update"]
        flat_adapters = registry.list_adapters(session=s, lineage_id="iter-flat")
    its = update["iterations"]
    assert [it["iteration"] for it in its] == [0, 1], update.get("reason")
    first, second = its
    # iteration 0 drew from the base weights, iteration 1 from iteration 0's adapter (hot-loaded)
    assert first["adapter"] == "" and first["trained_adapter"] == "iter-g0-r0-i0"
    assert second["adapter"] == "iter-g0-r0-i0" and second["trained_adapter"] == "iter-g0-r0-i1"
    assert {r.adapter for r in rollouts} == {"", "iter-g0-r0-i0"}
    # one harness: the training contract, and for iteration 1 that contract naming iteration 0's adapter
    assert len({r.contract_hash for r in rollouts}) == 2 and update["plan"]["contract_hash"] in {
        r.contract_hash for r in rollouts if r.adapter == ""
    }
    for it in its:
        drawn = [r for r in rollouts if r.adapter == it["adapter"]]
        assert it["rollouts"] == sum(r.has_real_reward for r in drawn) and it["passed"] == sum(r.passed for r in drawn)
        assert len(drawn) == GROUP * it["groups"]  # every group holds G rollouts, each counted once
        assert 0 <= it["flat_groups"] <= it["groups"] and it["flat_fraction"] == it["flat_groups"] / it["groups"]
        # dynamic sampling: a second draw happens exactly when the first left flat groups and some group varied
        assert it["draws"] in (1, 2) and (it["draws"] == 2) <= (it["flat_groups"] >= 1)
        assert it["steps"] >= 1 and it["tokens_trained"] > 0 and it["loss"] is not None and it["seconds"] > 0
        assert abs(it["mean_reward"] - sum(r.reward for r in drawn if r.reward is not None) / it["rollouts"]) < 1e-9
    # the registered revision is the last iteration's adapter, trained on top of the first
    assert adapter.name == "iter-g0-r0" and adapter.path.endswith("iter-g0-r0-i1")
    assert adapter.training_config["parent_adapter_path"].endswith("iter-g0-r0-i0")
    assert result.outcome in (UpdateOutcome.PROMOTED, UpdateOutcome.NOT_PROMOTED)
    assert update["promotion"]["decided_on"] == "selection"

    # the flat policy: the first iteration's rollouts passed nothing, so nothing is trained or registered
    assert flat_result.outcome == UpdateOutcome.NO_SIGNAL and not flat_adapters
    assert "passed none of the first iteration's rollouts" in flat_update["reason"]
    [only] = flat_update["iterations"]
    assert only["passed"] == 0 and only["trained_adapter"] == "" and "training" not in flat_update


GUIDED = "regex-ipv4-extract"  # the scripted policy never solves it; its reference solution guides it


def _guided_contract(settings, contract_path, out_dir) -> str:
    """The test contract carrying a snapshot with GUIDED's reference solution, validated by real replays."""
    from mindforge.experience import ExperienceSnapshot, attach_snapshot
    from mindforge.experience.mining import mine_solution
    from mindforge.hcp import load_contract, save_contract
    from mindforge.tasks.loader import load_task
    from mindforge.trials.replay import replay_entry
    from mindforge.trials.run import open_engine

    task = load_task(BUNDLED_TASKS / GUIDED)
    candidate = mine_solution(
        task_id=task.id, task_hash=task.content_hash, instruction=task.instruction,
        solve_sh=BUNDLED_TASKS / GUIDED / "solution" / "solve.sh", split="search", lineage="iter-guided",
    )
    assert candidate is not None
    engine, image_map = open_engine(settings)
    verdict = replay_entry(
        candidate, task, engine, artifact_root=settings.artifacts / "replays", run_id="guided-e2e", image_map=image_map
    )
    assert verdict.kept, verdict.rejection
    # k 0: the snapshot is carried (so are its guides) but no example is shown, which the script does not expect
    contract = attach_snapshot(
        load_contract(contract_path), ExperienceSnapshot(entries=(verdict.entry,)), revision="1.0.0-guided", k=0
    )
    return str(save_contract(contract, out_dir / "guided.toml"))


def test_with_guidance_a_task_the_policy_never_solves_is_trained_on_with_its_validated_guide(
    temporal_env, ray_cluster, settings, contract_path, tmp_path
):
    """One search task is solved half the time, the other never: its groups are all failures, so only its guide
    (its own reference solution, replayed and verified) gives them contrast; the curriculum keeps drawing it."""
    from mindforge.atif import read_trajectory
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model
    from mindforge.trainer.guidance import is_guide

    env, _address, loop = temporal_env
    tiny = str(ensure_tiny_model())
    guided_contract = _guided_contract(settings, contract_path, tmp_path)
    solved = [t for t in SEARCH if t != GUIDED]
    script = _script(solved + SELECTION, seed=3)  # no rule for GUIDED: the default reply finishes at once
    with start_scripted_policy(script) as policy:
        spec = _spec("iter-guided", policy.base_url, tiny, guided_contract)
        spec = spec.model_copy(update={"update": spec.update.model_copy(update={"guidance": True})})
        [result] = loop.run_until_complete(_run(env, settings, [spec]))

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        update = dict(lineages.get_generation(session=s, lineage_id="iter-guided", index=0).record)["update"]
        rollouts = [r.to_record() for r in trials.list_trials(session=s, lineage_id="iter-guided", stage="rollout")]
    its = update["iterations"]
    assert [it["iteration"] for it in its] == [0, 1], update.get("reason")
    never = [r for r in rollouts if r.task_id == GUIDED]
    # the policy failed GUIDED every time, in both iterations: at rate 0 it is drawn again only because it has a guide
    assert never and not any(r.passed for r in never)
    assert {r.adapter for r in never} == {"", "iter-guided-g0-r0-i0"}
    assert all(it["guided_groups"] >= 1 and it["trained_adapter"] for it in its)
    training = update["training"]
    assert training["guide_samples"] >= 1 and training["off_policy_samples"] >= 1
    guides = sorted((settings.artifacts / "guides" / "iter-guided").rglob("*.json"))
    assert guides and all(is_guide(read_trajectory(p)) for p in guides)
    assert result.outcome in (UpdateOutcome.PROMOTED, UpdateOutcome.NOT_PROMOTED)
