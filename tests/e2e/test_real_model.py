"""A small real-model generation: SmolLM2-135M-Instruct on real micro tasks, through Temporal and Ray.

No test double here: the policy is the bundled SmolLM2 GGUF served by the llama.cpp engine
behind the OpenAI-compatible API, the trainer trains a LoRA adapter on the very same
weights (dequantised by transformers), and the trials run in Docker sandboxes on a
two-node Ray cluster driven by Temporal workflows. The root contract is a test contract
derived from the shipped SmolLM2 baseline with the recorded search edits a small model
needs (command-line prompting: one shell command per trial, a newline stop; worked
examples) - configuration search reaches it from the baseline (``test_search_*``); this test
starts there so that one short generation has successes to train on. Sampling is
stochastic (temperature 0.7), so the checks are on what must hold for any draw with real
contrast, and the tasks are ones this model solves about half the time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.evaluation import SplitConfig
from mindforge.payloads import (
    EvaluationSpec,
    ExpansionSpec,
    LineageSpec,
    RuntimeSpec,
    SearchBudgetSpec,
    Stage,
    UpdateOutcome,
    UpdateSpec,
)
from mindforge.payloads.training import TrainerConfig
from mindforge.store import engine as se
from mindforge.store import lineages, registry, trials
from tests.conftest import LLAMACPP_EXTRA, REPO, require_module
from tests.e2e.test_update import _run

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow, pytest.mark.llamacpp]

require_module("llama_cpp", LLAMACPP_EXTRA)  # set-up installs the extra: a missing engine fails

TASKS = ["write-hello-file", "make-executable", "env-value-to-file", "make-directory"]
#: command-line prompting (one command per trial, newline stop) and two worked examples from
#: benchmarks/reference_examples: they restate bundled tasks, which is fine for this test of
#: the loop's mechanics (a pass to train on), and would void any sealed figure
EDITS = [("action_format", "command"), ("add_example", "count_lines"), ("add_example", "grep_to_file")]


def _small_model_contract(tmp_path: Path) -> Path:
    """The shipped SmolLM2 baseline with the search's small-model edits applied, one recorded edit each."""
    from mindforge.hcp import derive, load_contract, save_contract
    from mindforge.search.edits import Edit, edit_changes, example_edit
    from mindforge.search.library import load_example_file

    contract = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    for i, (op, value) in enumerate(EDITS):
        edit = (
            example_edit(load_example_file(REPO / "benchmarks" / "reference_examples" / f"{value}.toml"))
            if op == "add_example" else Edit(op=op, value=value)
        )
        contract = derive(
            contract, revision=f"1.2.0-e2e.{i}", edit=edit.describe(contract), changes=edit_changes(contract, edit)
        )
    return save_contract(contract, tmp_path / "smollm2-small.toml")


def test_a_real_model_generation_succeeds_trains_on_contrast_and_hot_loads_the_adapter(
    temporal_env, ray_cluster, settings, tmp_path
):
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.handoff import served_adapters
    from mindforge.policy.server.server import start_policy_server

    env, _address, loop = temporal_env
    resolved = resolve_model("smollm2")
    contract = _small_model_contract(tmp_path)
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        spec = LineageSpec(
            name="real",
            tasks=[str(REPO / "tasks" / "micro" / t) for t in TASKS],
            contract_path=str(contract),
            stages=[Stage.EXPANSION, Stage.UPDATE],
            runtime=RuntimeSpec(policy_url=server.base_url, trial_batch_size=8, heartbeat_timeout_sec=300),
            expansion=ExpansionSpec(attempts=4, search=SearchBudgetSpec(enabled=False)),
            update=UpdateSpec(
                base_model_path=resolved.hf_dir,
                iterations=0,  # one offline update on the Expansion trials
                trainer=TrainerConfig(
                    lora_rank=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], learning_rate=5e-4,
                    batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False,
                ),
                max_rank=64,
            ),
            evaluation=EvaluationSpec(splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1)),
        )
        (result,) = loop.run_until_complete(_run(env, settings, [spec]))
        served = served_adapters(server.base_url)
    finally:
        server.stop()

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        rows = [r.to_record() for r in trials.list_trials(session=s, lineage_id="real", stage="expansion")]
        update = dict(lineages.get_generation(session=s, lineage_id="real", index=0).record)["update"]
        adapters = registry.list_adapters(session=s, lineage_id="real")
    assert len(rows) == len(TASKS) * 4 and all(r.has_real_reward for r in rows), [r.failure_detail for r in rows]
    assert any(r.passed for r in rows), "the real model solved no trial"  # at least one real success
    assert update["selection"]["kept_groups"] >= 1, update["selection"]  # a group with contrast
    assert update["training"]["trained"] and update["training"]["steps"] >= 1
    [adapter] = adapters
    # registered, validated, and hot-loaded into the llama.cpp server under its versioned name
    assert update["adapter"]["max_abs_logit_diff"] > 0
    assert served.get(adapter.name) == adapter.path
    assert {h["load"] for h in update["handoff"]} == {"loaded"}
    # no selection split here: the gate had no evidence and kept the parent adapter
    assert result.outcome == UpdateOutcome.NOT_PROMOTED and update["promotion"]["decided_on"] == "selection"
