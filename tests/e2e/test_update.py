"""The Update stage end to end: Temporal dev server, two-node Ray cluster, Docker, SQLite, PEFT.

A lineage generation runs Expansion (rollouts), then Update: selection,
GRPO training of a LoRA adapter on the tiny local model (a Ray task), validation,
registration, hand-off and held-out evaluation of parent and successor pairs.

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API plays the model in
rollouts. On a task's first turn it writes the task's reference solution to a script
with probability 0.5 (0.9 when asked as the new adapter's name), then runs it and
finishes; otherwise it finishes at once, so attempts of one task disagree and groups
carry a signal. It returns no token ids (``return_token_ids: false``): its fake ids are
the bytes of the text, which no tokenizer produced, so the trainer re-tokenises the
trajectories with the tiny model's tokenizer. Every other part is real, including the
embedded policy server on the tiny model that the new revision is handed off to.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from mindforge.orchestration import (
    ORCHESTRATION_QUEUE,
    LineageInput,
    LineageSpec,
    SearchBudgetSpec,
    Stage,
    UpdateOutcome,
)
from mindforge.store import engine as se
from mindforge.store import lineages, pool, registry, trials
from mindforge.store.models import PoolSplit
from mindforge.trainer.config import TrainerConfig
from tests.conftest import BUNDLED_TASKS, REPO
from tests.e2e.histories import save_histories

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

TASKS = ["log-5xx-report", "fix-invoice-totals", "regex-ipv4-extract", "jsonl-to-csv", "shell-ext-summary"]
LINEAGE = "upd"
ADAPTER = "upd-g0-r0"
ATTEMPTS = 4


def _action(tool: str, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments})}


def _script(tasks: list[str] = TASKS, seed: int = 7) -> dict:
    rules = []
    for name in tasks:
        task_dir = BUNDLED_TASKS / name
        marker = (task_dir / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]
        solve = _action("write_file", path="/tmp/solve.sh", content=(task_dir / "solution" / "solve.sh").read_text())
        for model, p in ((ADAPTER, 0.9), (None, 0.5)):
            rules.append(
                {
                    "match": {"turn": 0, "last_message_contains": marker, "model": model},
                    "reply": solve,
                    "success_probability": p,
                    "on_failure": _action("finish"),
                }
            )
    rules.append({"match": {"turn": 1}, "reply": _action("bash", command="bash /tmp/solve.sh")})
    return {
        "rules": rules, "default": _action("finish"), "base_models": ["tiny"], "seed": seed, "return_token_ids": False
    }


@pytest.fixture(scope="module")
def contract_path(tmp_path_factory) -> Path:
    """The baseline harness on the served model id ``tiny`` (the base the trainer trains)."""
    from mindforge.hcp import derive, load_contract, save_contract

    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    child = derive(base, revision="1.0.0-update-e2e", edit="model.id -> tiny", changes={"model.id": "tiny"})
    return save_contract(child, tmp_path_factory.mktemp("contracts") / "update-e2e.toml")


async def _run(env, settings, specs: list[LineageSpec]) -> list[SimpleNamespace]:
    """Run each spec's lineage (Expansion then Update) with in-process workers; returns each
    lineage's last generation's Update outcome and next pair, read back from the store."""
    from workers.activities import LineageActivities
    from workers.main import build_workers
    from workflows.options import search_attributes

    acts = LineageActivities(settings.db_url)
    orch, sandbox = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=settings)
    results = []
    async with orch, sandbox:
        for spec in specs:
            await env.client.execute_workflow(
                "LineageWorkflow",
                LineageInput(lineage_id=spec.name, spec=spec),
                id=f"lineage-{spec.name}",
                task_queue=ORCHESTRATION_QUEUE,
                search_attributes=search_attributes(spec.name),
            )
            with se.session_scope(acts.engine) as s:
                gen = lineages.list_generations(session=s, lineage_id=spec.name)[-1]
                update = gen.record["update"]
                pair = update["next_pair"]
                row = registry.get_adapter_by_name(session=s, name=pair["adapter"]) if pair["adapter"] else None
                results.append(
                    SimpleNamespace(
                        outcome=UpdateOutcome(update["outcome"]),
                        contract_hash=pair["contract_hash"],
                        adapter=pair["adapter"],
                        adapter_revision_id=row.id if row else None,
                        selected_groups=update["selection"]["kept_groups"],
                    )
                )
    return results


def test_update_trains_registers_hands_off_and_measures_lift(temporal_env, ray_cluster, settings, contract_path):
    from mindforge.hcp import loads_contract
    from mindforge.policy.scripted import start_scripted_policy
    from mindforge.policy.server import start_policy_server
    from mindforge.policy.tiny import ensure_tiny_model
    from mindforge.serving import served_adapters
    from mindforge.trainer.validate_adapter import sha256_file

    env, _address, loop = temporal_env
    tiny = start_policy_server("tiny", device="cpu")
    try:
        with start_scripted_policy(_script()) as policy:
            spec = LineageSpec(
                name=LINEAGE,
                tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
                contract_path=str(contract_path),
                policy_url=policy.base_url,
                stages=[Stage.EXPANSION, Stage.UPDATE],
                search=SearchBudgetSpec(enabled=False),  # this test is about Update
                attempts=ATTEMPTS,
                held_out_fraction=0.4,
                trial_batch_size=6,
                heartbeat_timeout_sec=120,
                base_model_path=str(ensure_tiny_model()),
                trainer=TrainerConfig(
                    lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                    batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False,
                ),
                max_rank=8,
                heldout_attempts=2,
                serving_urls=[tiny.base_url],  # besides the policy endpoint, which always gets it
            )
            (result,) = loop.run_until_complete(_run(env, settings, [spec]))
            served_scripted = served_adapters(policy.base_url)
            policy_url, tiny_url = policy.base_url, tiny.base_url
        served_tiny = served_adapters(tiny.base_url)
        answer = httpx.post(
            f"{tiny.base_url}/chat/completions",
            json={"model": ADAPTER, "messages": [{"role": "user", "content": "ls"}], "max_tokens": 4},
            timeout=120,
        ).json()
    finally:
        tiny.stop()

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        held = {t.id for t in pool.list_pool_tasks(session=s, lineage_id=LINEAGE, split=PoolSplit.HELD_OUT)}
        expansion = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="expansion")]
        heldout = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="heldout")]
        record = dict(lineages.get_generation(session=s, lineage_id=LINEAGE, index=0).record)
        adapter = registry.get_adapter_by_name(session=s, name=ADAPTER)
        root = registry.get_contract(session=s, content_hash=expansion[0].contract_hash)
        successor_row = registry.get_contract(session=s, content_hash=result.contract_hash)
        adapter_row = adapter.model_dump() if adapter else None
        successor = loads_contract(successor_row.toml_text) if successor_row else None
        root_ref = f"{root.name}@{root.revision}"
    update = record["update"]

    # selection: the expansion trials, grouped per task; counts agree with the stored rewards
    assert len(held) == 2 and len(expansion) == 3 * ATTEMPTS
    by_task: dict[str, set] = {}
    for r in expansion:
        by_task.setdefault(r.task_hash, set()).add(r.reward)
    with_signal = [t for t, rewards in by_task.items() if len(rewards) > 1 and None not in rewards]
    sel = update["selection"]
    assert sel["trials_seen"] == len(expansion) and sel["held_out_trials"] == 0
    assert sel["kept_groups"] == len(with_signal) >= 1, by_task
    assert sel["dropped_no_signal"] == len(by_task) - len(with_signal)

    # training: every selected trajectory re-tokenised (no ids recorded) or dropped with a reason
    training = update["training"]
    assert training["trained"] and training["steps"] >= 1
    assert training["samples_built"] + sum(training["samples_dropped"].values()) == sel["kept_trials"]

    # registration: an immutable, validated revision with its provenance
    assert result.outcome == UpdateOutcome.REGISTERED and result.adapter == ADAPTER
    assert adapter_row is not None and adapter_row["id"] == result.adapter_revision_id
    adapter_dir = Path(adapter_row["path"])
    assert adapter_dir == settings.artifacts / "adapters" / LINEAGE / ADAPTER
    assert adapter_row["sha256"] == sha256_file(adapter_dir / "adapter_model.safetensors")
    assert adapter_row["rank"] == 4 and adapter_row["alpha"] == 8 and adapter_row["base_model"] == "tiny"
    assert sorted(adapter_row["target_modules"]) == ["q_proj", "v_proj"]
    assert adapter_row["parent_id"] is None and len(adapter_row["trial_ids"]) == sel["kept_trials"]
    assert update["adapter"]["max_abs_logit_diff"] > 0

    # the successor contract names the revision and descends from the parent contract
    assert successor.model.adapter == ADAPTER
    assert successor.mindforge.parent == root_ref and successor.mindforge.edit == f"adapter -> {ADAPTER}"

    # hand-off: loaded under the versioned name on both endpoints, and the tiny server answers under it
    assert served_tiny[ADAPTER] == str(adapter_dir) and served_scripted[ADAPTER] == str(adapter_dir)
    assert answer["model"] == ADAPTER and answer["choices"][0]["message"]["role"] == "assistant"
    assert [h["base_url"] for h in update["handoff"]] == [policy_url, tiny_url]
    assert {h["load"] for h in update["handoff"]} == {"loaded"}

    # held-out: both pairs, same tasks and attempts, in the same run; the lift agrees with the trials
    assert len(heldout) == 2 * len(held) * spec.heldout_attempts
    assert {(r.contract_hash, r.adapter) for r in heldout} == {
        (expansion[0].contract_hash, ""),
        (result.contract_hash, ADAPTER),
    }
    lift = update["lift"]
    assert lift["n_tasks"] == len(held)
    def score(adapter: str) -> float:  # mean over tasks of the mean real reward (errors are not zeros)
        per_task = [
            [r.reward for r in heldout if r.adapter == adapter and r.task_hash == t and r.reward is not None]
            for t in held
        ]
        return sum(sum(v) / len(v) for v in per_task) / len(per_task)

    scores = {"": score(""), ADAPTER: score(ADAPTER)}
    assert lift["parent_score"] == pytest.approx(scores[""])
    assert lift["successor_score"] == pytest.approx(scores[ADAPTER])
    assert lift["mean"] == pytest.approx(scores[ADAPTER] - scores[""])
    assert lift["lo"] <= lift["mean"] <= lift["hi"]
    assert record["held_out_lift"]["mean"] == lift["mean"]
    assert update["outcome"] == "registered"
    assert update["next_pair"] == {"contract_hash": result.contract_hash, "adapter": ADAPTER}


def _stored_update(settings, lineage_id: str) -> tuple[dict, int]:
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        record = dict(lineages.get_generation(session=s, lineage_id=lineage_id, index=0).record)
        return record, len(registry.list_adapters(session=s, lineage_id=lineage_id))


def test_no_signal_and_rejected_adapters_keep_the_parent_pair(temporal_env, ray_cluster, settings, contract_path):
    """Two recorded outcomes that register nothing: flat groups, and an adapter over the serving rank limit.

    The flat lineage's scripted policy always finishes at once (every attempt fails). The
    other's first four draws with seed 0 are two failures and two successes whatever the
    order of requests (one task, one drawing rule), so its group has a signal; it trains
    rank 4 against a serving limit of 2.
    """
    from mindforge.policy.scripted import start_scripted_policy
    from mindforge.policy.tiny import ensure_tiny_model

    env, _address, loop = temporal_env
    task = "regex-ipv4-extract"
    common = {
        "tasks": [str(BUNDLED_TASKS / task)],
        "contract_path": str(contract_path),
        "stages": [Stage.EXPANSION, Stage.UPDATE],
        "search": SearchBudgetSpec(enabled=False),
        "heartbeat_timeout_sec": 120,
        "base_model_path": str(ensure_tiny_model()),
        "trainer": TrainerConfig(lora_rank=4, lora_alpha=8, target_modules=["q_proj"], learning_rate=1e-3, max_steps=1),
        "max_rank": 2,
    }
    flat_script = {"default": _action("finish"), "base_models": ["tiny"], "return_token_ids": False}
    with start_scripted_policy(flat_script) as flat, start_scripted_policy(_script([task], seed=0)) as mixed:
        flat_spec = LineageSpec(name="upd-flat", policy_url=flat.base_url, attempts=2, **common)
        rank_spec = LineageSpec(name="upd-rank", policy_url=mixed.base_url, attempts=4, **common)
        flat_result, rank_result = loop.run_until_complete(_run(env, settings, [flat_spec, rank_spec]))

    record, adapters = _stored_update(settings, "upd-flat")
    assert flat_result.outcome == UpdateOutcome.NO_SIGNAL and flat_result.adapter == ""
    assert flat_result.selected_groups == 0 and adapters == 0
    update = record["update"]
    assert update["selection"]["dropped_no_signal"] == 1 and update["selection"]["kept_groups"] == 0
    assert update["outcome"] == "no_signal" and "training" not in update
    assert update["next_pair"] == {"contract_hash": flat_result.contract_hash, "adapter": ""}

    record, adapters = _stored_update(settings, "upd-rank")
    update = record["update"]
    assert rank_result.outcome == UpdateOutcome.REJECTED and rank_result.adapter == "" and adapters == 0
    assert update["selection"]["kept_groups"] == 1 and update["training"]["trained"]
    assert update["validation"]["error"] == "RankLimitError" and "exceeds max_rank 2" in update["validation"]["message"]
    assert update["outcome"] == "rejected" and "adapter" not in update
    assert rank_result.contract_hash == update["next_pair"]["contract_hash"]


def test_two_generations_register_two_revisions_and_the_report_shows_both_held_out_results(
    temporal_env, ray_cluster, settings, contract_path
):
    """Generation 0 trains revision r0 and hands it off; generation 1 rolls out under it,
    trains r1 on top and hands that off under a new name; the report has held-out rows for both."""
    from mindforge.policy.scripted import start_scripted_policy
    from mindforge.policy.server import start_policy_server
    from mindforge.policy.tiny import ensure_tiny_model
    from mindforge.reports import gather_report_data, render_report
    from mindforge.serving import served_adapters

    env, _address, loop = temporal_env
    name = "upd2"
    tiny = start_policy_server("tiny", device="cpu")
    try:
        with start_scripted_policy(_script(seed=11)) as policy:
            spec = LineageSpec(
                name=name,
                tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
                contract_path=str(contract_path),
                policy_url=policy.base_url,
                stages=[Stage.EXPANSION, Stage.UPDATE],
                search=SearchBudgetSpec(enabled=False),
                generations=2,
                attempts=ATTEMPTS,
                held_out_fraction=0.4,
                trial_batch_size=6,
                heartbeat_timeout_sec=120,
                base_model_path=str(ensure_tiny_model()),
                trainer=TrainerConfig(
                    lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                    batch_size=4, micro_batch_size=2, max_steps=1, use_bf16=False,
                ),
                max_rank=8,
                heldout_attempts=2,
                serving_urls=[tiny.base_url],
            )
            (last,) = loop.run_until_complete(_run(env, settings, [spec]))
            loop.run_until_complete(save_histories(env, name))
        served = served_adapters(tiny.base_url)
    finally:
        tiny.stop()

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        adapters = sorted(a.name for a in registry.list_adapters(session=s, lineage_id=name))
        gens = [dict(g.record) for g in lineages.list_generations(session=s, lineage_id=name)]
        rollout_adapters = {r.adapter for r in trials.list_trials(session=s, lineage_id=name, generation_index=1, stage="expansion")}
        data = gather_report_data(s, name)
    assert adapters == [f"{name}-g0-r0", f"{name}-g1-r1"], [g.get("update", {}).get("outcome") for g in gens]
    assert rollout_adapters == {f"{name}-g0-r0"}  # generation 1 ran the successor pair
    assert last.outcome == UpdateOutcome.REGISTERED and last.adapter == f"{name}-g1-r1"
    assert {f"{name}-g0-r0", f"{name}-g1-r1"} <= set(served)  # the second revision under a new name
    for g in gens:
        lift = g["held_out_lift"]
        assert lift["lo"] <= lift["mean"] <= lift["hi"]
    html = render_report(data, "html")
    md = render_report(data, "md")
    assert "held-out" in md.lower()
    for g in gens:
        assert f"{g['held_out_lift']['mean']:+.3f}" in md  # the report's lift format, whatever the value
    assert "data:image/png;base64" in html
