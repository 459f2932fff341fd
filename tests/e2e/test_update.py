"""The Update stage end to end: Temporal dev server, two-node Ray cluster, Docker, SQLite, PEFT.

A lineage generation runs Expansion (rollouts on the search split), then Update:
selection, GRPO training of a LoRA adapter on the tiny local model (a Ray task),
validation, registration, hand-off and the promotion gate on the selection split; the
generation then measures the pair it hands on against its parent on the sealed split.

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API plays the model in
rollouts. On a task's first turn it writes the task's reference solution to a script
with probability 0.5 (1.0 when asked as a new adapter's name on a selection task), then
runs it and finishes; otherwise it finishes at once, so attempts of one task disagree and
groups carry a signal. It returns no token ids (``return_token_ids: false``): its fake ids are
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

from mindforge.evaluation import PoolSplit, SplitConfig
from mindforge.payloads import (
    ORCHESTRATION_QUEUE,
    EvaluationSpec,
    ExpansionSpec,
    LineageInput,
    LineageSpec,
    RuntimeSpec,
    SearchBudgetSpec,
    Stage,
    UpdateOutcome,
    UpdateSpec,
)
from mindforge.payloads.training import TrainerConfig
from mindforge.store import engine as se
from mindforge.store import lineages, pool, registry, trials
from tests.conftest import BUNDLED_TASKS
from tests.e2e.histories import save_histories

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

SEARCH = ["log-5xx-report", "fix-invoice-totals", "regex-ipv4-extract"]
SELECTION = ["jsonl-to-csv"]
SEALED = ["shell-ext-summary", "site-permissions"]
TASKS = SEARCH + SELECTION + SEALED
LINEAGE = "upd"
ADAPTER = "upd-g0-r0"
ATTEMPTS = 4
#: the promotion gate's declared non-inferiority margin on the lower bound (the mean lift must
#: still be above 0: a tie never passes). In the two-generation test each adapter gains on one of
#: two selection tasks, whose bootstrap lower bound is 0: the default rule (above 0) refuses that
PROMOTION_MARGIN = 0.25


def _action(tool: str, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments})}


def _marker(name: str) -> str:
    return (BUNDLED_TASKS / name / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]


def _solve(name: str) -> dict:
    return _action(
        "write_file", path="/tmp/solve.sh", content=(BUNDLED_TASKS / name / "solution" / "solve.sh").read_text()
    )


def _script(
    tasks: list[str] = TASKS, seed: int = 7, adapters: tuple[str, ...] = (ADAPTER,), selection: tuple[str, ...] = ()
) -> dict:
    """Base weights solve every other request (``alternate``); ``adapters[i]`` solves ``selection[: i + 1]``
    always (else every other request), so each adapter beats the one before it on a selection task of
    its own (the pair gate never passes a tie).

    Every other request, not a seeded coin: trials carry common seeds (the same for every pair
    on one task attempt), so a coin would give every pair the same outcomes on a task; the
    alternation gives each group of two or more attempts a success and a failure, whatever
    the order of its requests, and ``seed`` is kept for the draws of other scripts."""
    rules = []
    for name in tasks:
        for level, model in enumerate(adapters):
            always = name in selection[: level + 1]
            rules.append(
                {
                    "match": {"turn": 0, "last_message_contains": _marker(name), "model": model},
                    "reply": _solve(name), "alternate": not always, "on_failure": _action("finish"),
                }
            )
        rules.append(
            {
                "match": {"turn": 0, "last_message_contains": _marker(name)},
                "reply": _solve(name), "alternate": True, "on_failure": _action("finish"),
            }
        )
    rules.append({"match": {"turn": 1}, "reply": _action("bash", command="bash /tmp/solve.sh")})
    return {
        "rules": rules, "default": _action("finish"), "base_models": ["tiny"], "seed": seed, "return_token_ids": False
    }


def _pinned(search: list[str], selection: list[str], sealed: list[str]) -> SplitConfig:
    """A split config that pins each task (fractions 0: nothing else is placed off the search split)."""
    overrides = {t: PoolSplit.SEARCH for t in search}
    overrides |= {t: PoolSplit.SELECTION for t in selection} | {t: PoolSplit.SEALED for t in sealed}
    return SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1, overrides=overrides)


async def _run(env, settings, specs: list[LineageSpec]) -> list[SimpleNamespace]:
    """Run each spec's lineage (Expansion then Update) with in-process workers; returns each
    lineage's last generation's Update outcome and next pair, read back from the store."""
    from workers.lineage_activities import LineageActivities
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
                        selected_groups=update.get("selection", {}).get("kept_groups", 0),
                    )
                )
    return results


def test_update_trains_registers_hands_off_promotes_on_selection_and_measures_sealed_lift(
    temporal_env, ray_cluster, settings, contract_path
):
    from mindforge.hcp import loads_contract
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model
    from mindforge.policy.handoff import served_adapters
    from mindforge.policy.server.server import start_policy_server
    from mindforge.trainer.validate_adapter import sha256_file

    env, _address, loop = temporal_env
    tiny = start_policy_server("tiny", device="cpu")
    try:
        with start_scripted_policy(_script(selection=tuple(SELECTION))) as policy:
            spec = LineageSpec(
                name=LINEAGE,
                tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
                contract_path=str(contract_path),
                stages=[Stage.EXPANSION, Stage.UPDATE],
                runtime=RuntimeSpec(policy_url=policy.base_url, trial_batch_size=6, heartbeat_timeout_sec=120),
                # this test is about Update: no search
                expansion=ExpansionSpec(attempts=ATTEMPTS, search=SearchBudgetSpec(enabled=False)),
                update=UpdateSpec(
                    base_model_path=str(ensure_tiny_model()),
                    iterations=0,  # one offline update on the Expansion trials
                    trainer=TrainerConfig(
                        lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                        batch_size=4, micro_batch_size=2, max_steps=2, use_bf16=False,
                    ),
                    max_rank=8,
                    serving_urls=[tiny.base_url],  # besides the policy endpoint, which always gets it
                    promotion_margin=PROMOTION_MARGIN,
                ),
                evaluation=EvaluationSpec(splits=_pinned(SEARCH, SELECTION, SEALED), attempts=2),
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
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=LINEAGE)}
        sealed_tasks = {h for h, sp in split_of.items() if sp == PoolSplit.SEALED}
        expansion = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="expansion")]
        selection = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="selection")]
        sealed = [r.to_record() for r in trials.list_trials(session=s, lineage_id=LINEAGE, stage="sealed")]
        record = dict(lineages.get_generation(session=s, lineage_id=LINEAGE, index=0).record)
        adapter = registry.get_adapter_by_name(session=s, name=ADAPTER)
        root = registry.get_contract(session=s, content_hash=expansion[0].contract_hash)
        successor_row = registry.get_contract(session=s, content_hash=result.contract_hash)
        adapter_row = adapter.model_dump() if adapter else None
        successor = loads_contract(successor_row.toml_text) if successor_row else None
        root_ref = f"{root.name}@{root.revision}"
    update = record["update"]

    # splits: pinned as asked; expansion (and so training) read the search split only
    assert sorted(split_of.values()) == sorted([PoolSplit.SEARCH] * 3 + [PoolSplit.SELECTION] + [PoolSplit.SEALED] * 2)
    assert len(expansion) == len(SEARCH) * ATTEMPTS and {split_of[r.task_hash] for r in expansion} == {PoolSplit.SEARCH}
    by_task: dict[str, set] = {}
    for r in expansion:
        by_task.setdefault(r.task_hash, set()).add(r.reward)
    with_signal = [t for t, rewards in by_task.items() if len(rewards) > 1 and None not in rewards]
    sel = update["selection"]
    assert sel["trials_seen"] == len(expansion) and sel["non_search_trials"] == 0
    assert sel["kept_groups"] == len(with_signal) >= 1, by_task
    assert sel["dropped_no_signal"] == len(by_task) - len(with_signal)

    # training: every selected trajectory re-tokenised (no ids recorded) or dropped with a reason
    training = update["training"]
    assert training["trained"] and training["steps"] >= 1
    assert training["samples_built"] + sum(training["samples_dropped"].values()) == sel["kept_trials"]

    # registration: an immutable, validated revision with its provenance
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

    # promotion: decided on the selection split only, both pairs, same tasks and attempts
    promotion = update["promotion"]
    assert promotion["decided_on"] == "selection" and promotion["lift"]["measured_on"] == "selection"
    assert "non-inferiority margin of 0.25" in promotion["rule"] and promotion["min_tasks"] == 1
    assert promotion["promoted"] and result.outcome == UpdateOutcome.PROMOTED and result.adapter == ADAPTER
    assert len(selection) == 2 * len(SELECTION) * spec.evaluation.attempts
    assert set(promotion["trial_ids"]) == {r.trial_id for r in selection}
    assert {split_of[r.task_hash] for r in selection} == {PoolSplit.SELECTION}
    assert {(r.contract_hash, r.adapter) for r in selection} == {(root.hash, ""), (result.contract_hash, ADAPTER)}
    assert update["outcome"] == "promoted"
    assert update["next_pair"] == {"contract_hash": result.contract_hash, "adapter": ADAPTER}

    # sealed: both pairs, same tasks and attempts; the lift agrees with the trials and is measurement only
    assert len(sealed) == 2 * len(SEALED) * spec.evaluation.attempts
    assert {r.task_hash for r in sealed} == sealed_tasks
    assert {(r.contract_hash, r.adapter) for r in sealed} == {(root.hash, ""), (result.contract_hash, ADAPTER)}
    # one lift per sealed reading, each named (the headline readings always), never pooled
    assert {"instances", "families", "tasks"} <= set(record["sealed_lifts"])
    lifts = {reading: lift for reading, lift in record["sealed_lifts"].items() if lift is not None}
    assert lifts and sum(lift["n_tasks"] for lift in lifts.values()) == len(SEALED)

    def score(adapter: str, tasks: set[str]) -> float:  # mean over tasks of the mean real reward (errors not zeros)
        per_task = [
            [r.reward for r in sealed if r.adapter == adapter and r.task_hash == t and r.reward is not None]
            for t in tasks
        ]
        return sum(sum(v) / len(v) for v in per_task) / len(per_task)

    for reading, lift in lifts.items():
        assert lift["measured_on"] == "sealed" and lift["baseline"] == "parent"
        report = record["evaluation"][reading]["parent"]
        tasks = set(report["per_task"])
        assert tasks <= sealed_tasks and len(tasks) == lift["n_tasks"]
        assert report["parent_score"] == pytest.approx(score("", tasks))
        assert report["successor_score"] == pytest.approx(score(ADAPTER, tasks))
        assert lift["mean"] == pytest.approx(score(ADAPTER, tasks) - score("", tasks))
        assert lift["lo"] <= lift["mean"] <= lift["hi"]
        assert lift["n_trials"] == sum(1 for r in sealed if r.task_hash in tasks)
    assert not set(promotion["trial_ids"]) & {r.trial_id for r in sealed}


def _stored_update(settings, lineage_id: str) -> tuple[dict, int]:
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        record = dict(lineages.get_generation(session=s, lineage_id=lineage_id, index=0).record)
        return record, len(registry.list_adapters(session=s, lineage_id=lineage_id))


def test_no_signal_and_rejected_adapters_keep_the_parent_pair(temporal_env, ray_cluster, settings, contract_path):
    """Two recorded outcomes that register nothing: a training contract that passed nothing, and an
    adapter over the serving rank limit.

    The flat lineage's scripted policy always finishes at once (every attempt fails). The
    other's first four draws with seed 0 are two failures and two successes whatever the
    order of requests (one task, one drawing rule), so its group has a signal; it trains
    rank 4 against a serving limit of 2.
    """
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    env, _address, loop = temporal_env
    task = "regex-ipv4-extract"
    common = {
        "tasks": [str(BUNDLED_TASKS / task)],
        "contract_path": str(contract_path),
        "stages": [Stage.EXPANSION, Stage.UPDATE],
        "update": UpdateSpec(
            base_model_path=str(ensure_tiny_model()),
            iterations=0,  # one offline update on the Expansion trials
            trainer=TrainerConfig(
                lora_rank=4, lora_alpha=8, target_modules=["q_proj"], learning_rate=1e-3, max_steps=1
            ),
            max_rank=2,
        ),
        "evaluation": EvaluationSpec(splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1)),
    }

    def spec(name: str, url: str, attempts: int) -> LineageSpec:
        return LineageSpec(
            name=name, runtime=RuntimeSpec(policy_url=url, heartbeat_timeout_sec=120),
            expansion=ExpansionSpec(attempts=attempts, search=SearchBudgetSpec(enabled=False)), **common,
        )

    flat_script = {"default": _action("finish"), "base_models": ["tiny"], "return_token_ids": False}
    with start_scripted_policy(flat_script) as flat, start_scripted_policy(_script([task], seed=0)) as mixed:
        flat_spec = spec("upd-flat", flat.base_url, 2)
        rank_spec = spec("upd-rank", mixed.base_url, 4)
        flat_result, rank_result = loop.run_until_complete(_run(env, settings, [flat_spec, rank_spec]))

    record, adapters = _stored_update(settings, "upd-flat")
    assert flat_result.outcome == UpdateOutcome.NO_SIGNAL and flat_result.adapter == ""
    assert flat_result.selected_groups == 0 and adapters == 0
    update = record["update"]
    # no contract passed any of the generation's 2 search trials: Update says so, trains nothing
    assert "passed any of the generation's 2 search-split trials" in update["reason"]
    assert update["plan"]["contract_hash"] == ""
    assert update["outcome"] == "no_signal" and "training" not in update and "selection" not in update
    assert update["next_pair"] == {"contract_hash": flat_result.contract_hash, "adapter": ""}

    record, adapters = _stored_update(settings, "upd-rank")
    update = record["update"]
    assert rank_result.outcome == UpdateOutcome.REJECTED and rank_result.adapter == "" and adapters == 0
    assert update["selection"]["kept_groups"] == 1 and update["training"]["trained"]
    assert update["validation"]["error"] == "RankLimitError" and "exceeds max_rank 2" in update["validation"]["message"]
    assert update["outcome"] == "rejected" and "adapter" not in update
    assert rank_result.contract_hash == update["next_pair"]["contract_hash"]


def test_two_generations_decide_on_selection_only_and_the_report_shows_three_splits_and_the_sealed_lift(
    temporal_env, ray_cluster, settings, contract_path
):
    """Generation 0 trains revision r0, promotes it on the selection split and hands it off;
    generation 1 rolls out under it, trains r1 on top and promotes that under a new name.
    Every decision record names ``selection`` and reads no sealed trial; every lift names
    ``sealed``; generation 1 also reports its lift over generation 0's pair."""
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.policy.doubles.tiny import ensure_tiny_model
    from mindforge.policy.handoff import served_adapters
    from mindforge.policy.server.server import start_policy_server
    from mindforge.reports import gather_report_data, render_report

    env, _address, loop = temporal_env
    name = "upd2"
    revisions = (f"{name}-g0-r0", f"{name}-g1-r1")
    # two selection tasks: r0 always solves the first, r1 both (each beats its parent on one of its own)
    search, selection = SEARCH[:2], ["jsonl-to-csv", "regex-ipv4-extract"]
    tasks = search + selection + SEALED
    tiny = start_policy_server("tiny", device="cpu")
    try:
        script = _script(tasks, seed=11, adapters=revisions, selection=tuple(selection))
        with start_scripted_policy(script) as policy:
            spec = LineageSpec(
                name=name,
                tasks=[str(BUNDLED_TASKS / t) for t in tasks],
                contract_path=str(contract_path),
                stages=[Stage.EXPANSION, Stage.UPDATE],
                generations=2,
                runtime=RuntimeSpec(policy_url=policy.base_url, trial_batch_size=6, heartbeat_timeout_sec=120),
                expansion=ExpansionSpec(attempts=ATTEMPTS, search=SearchBudgetSpec(enabled=False)),
                update=UpdateSpec(
                    base_model_path=str(ensure_tiny_model()),
                    iterations=0,  # one offline update on the Expansion trials
                    trainer=TrainerConfig(
                        lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                        batch_size=4, micro_batch_size=2, max_steps=1, use_bf16=False,
                    ),
                    max_rank=8,
                    serving_urls=[tiny.base_url],
                    promotion_margin=PROMOTION_MARGIN,
                ),
                evaluation=EvaluationSpec(splits=_pinned(search, selection, SEALED), attempts=2),
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
        rollout_adapters = {
            r.adapter for r in trials.list_trials(session=s, lineage_id=name, generation_index=1, stage="expansion")
        }
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=name)}
        sealed_ids = {
            r.trial_id
            for r in trials.list_trials(session=s, lineage_id=name)
            if split_of[r.task_hash] == PoolSplit.SEALED
        }
        data = gather_report_data(s, name)
    assert adapters == list(revisions), [g.get("update", {}).get("outcome") for g in gens]
    assert rollout_adapters == {revisions[0]}  # generation 1 ran the promoted pair
    assert last.outcome == UpdateOutcome.PROMOTED and last.adapter == revisions[1]
    assert set(revisions) <= set(served)  # the second revision under a new name
    assert sealed_ids  # the sealed split was evaluated ...
    decisions = [d for g in data.generations for d in g["decisions"]]
    assert [d["kind"] for d in decisions] == ["successor_contract", "adapter_promotion"] * 2
    for d in decisions:  # ... and no decision read any of it
        assert d["decided_on"] == "selection" and not set(d["trial_ids"]) & sealed_ids
    # search was off, so the successor choice had no candidate to run; the gate read both pairs. In
    # generation 1 the parent pair's selection trials are generation 0's gate's, read again, not run again
    succ0, prom0, succ1, prom1 = decisions
    assert not succ0["trial_ids"] and prom0["trial_ids"] and prom1["trial_ids"]
    assert set(succ1["trial_ids"]) <= set(prom0["trial_ids"])
    assert set(prom0["trial_ids"]) & set(prom1["trial_ids"])  # the promoted r0 pair, measured once
    for g, rec in zip(data.generations, gens, strict=True):
        assert g["splits"] == {"search": len(search), "selection": len(selection), "sealed": len(SEALED)}
        lifts = {r: entry["lift"] for r, entry in g["sealed_lifts"].items() if entry["lift"] is not None}
        assert sum(lift["n_tasks"] for lift in lifts.values()) == len(SEALED)  # every sealed task, one reading each
        for reading, lift in lifts.items():
            assert lift["measured_on"] == "sealed" and lift["lo"] <= lift["mean"] <= lift["hi"]
            assert rec["sealed_lifts"][reading] == lift
    assert all(e["vs_root"] is None for e in data.generations[0]["sealed_lifts"].values())  # its parent is the root
    roots = [e["vs_root"] for e in data.generations[1]["sealed_lifts"].values() if e["vs_root"]]
    assert roots and all(v["measured_on"] == "sealed" and v["baseline"] == "root" for v in roots)
    assert sum(v["n_tasks"] for v in roots) == len(SEALED)
    html = render_report(data, "html")
    md = render_report(data, "md")
    for section in ("splits", "selection-decisions", "sealed-lift"):
        assert f'id="{section}"' in html
    assert "search-set coverage" in md and "Decisions on the selection split" in md
    for g in data.generations:
        for entry in g["sealed_lifts"].values():
            if (lift := entry["lift"]) is not None:
                interval = f"{lift['mean']:+.3f} (95% CI {lift['lo']:+.3f}..{lift['hi']:+.3f})"
                assert f"{interval} on {lift['n_tasks']} sealed" in md
    assert "data:image/png;base64" in html
