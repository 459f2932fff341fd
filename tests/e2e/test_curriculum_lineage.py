"""A lineage over task-family instances at the default gate settings (Temporal, two-node Ray, Docker, SQLite, PEFT).

The pool is drawn from four families made for the tests (``tests/fixtures/families``): one is
held out whole (the seeded rule picks it), the others give search, selection and sealed
instances; two micro tasks are pinned to the sealed split. Test double: a SCRIPTED POLICY
behind the OpenAI-compatible HTTP API (the one double MindForge allows) plays a model that

- in the *gain* world solves an instance of family F on every other request (the first
  included) when the conversation shows a worked example of F (the experience library's
  snapshot, which the search's ``experience_snapshot`` edit moves the contract to), and
  always under a registered adapter's name; shown nothing of F, it answers with prose the
  JSON action format cannot use. It never solves a held-out family's instance or a micro task (nothing
  of theirs is ever shown);
- in the *no-gain* world solves every instance with probability 0.5 whatever the harness
  or the adapter.

Checked, at the default gates (no margin, the default ``min_tasks``): in the gain world the
successor check promotes the library contract and the pair gate promotes the trained pair
(a change that causes a gain is promoted); the three sealed readings are measured apart,
frozen across two generations, and read by no decision; nothing of a held-out family or a
sealed instance reaches a prompt, an example, the library, a training batch or a Discovery
admission. In the no-gain world both gates refuse (a change that causes none is refused),
while the Update still trains under the best contract by search evidence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.evaluation import PoolSplit, SplitConfig
from mindforge.evaluation.curriculum import SealedReading, choose_sealed_families
from mindforge.payloads import (
    CurriculumSpec,
    DiscoverySpec,
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
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import experience as experience_repo
from mindforge.store import lineages, pool, registry, trials
from tests.conftest import BUNDLED_TASKS, REPO
from tests.e2e.test_lineage import _run_in_process

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

FAMILIES_DIR = REPO / "tests" / "fixtures" / "families"
FAMILIES = ["fx-copy", "fx-lines", "fx-number", "fx-upper"]
SEALED_TASKS = [BUNDLED_TASKS / "micro" / t for t in ("make-directory", "count-lines")]
DONE = "FAMDONE-"


def _load():
    from mindforge.discovery.families import load_families

    return load_families(FAMILIES_DIR)


def _marker(instruction: str) -> str:
    return instruction.strip().splitlines()[0][:48]


def _solve_line(solve_sh: str) -> str:
    lines = [ln for ln in solve_sh.splitlines() if ln.strip() and not ln.startswith(("#", "set "))]
    return " && ".join(lines)


def _action(tool: str, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments})}


def _script(model_id: str, lineage: str, held_out: str, gain: bool) -> dict:
    """Per instance: solve (one command line, then finish) by the world's rule; everything else finishes."""
    from mindforge.policy.handoff import versioned_adapter_name

    # a registered adapter of either generation (the iterations' own adapters behave as the base)
    adapters = [versioned_adapter_name(lineage, g, r) for g in (0, 1) for r in (0, 1)]
    finish = _action("finish")
    rules: list[dict] = [{"match": {"last_message_contains": DONE}, "reply": finish}]
    # Discovery: one instance of the held-out family (never admitted) and one of a training family
    training = next(f for f in FAMILIES if f != held_out)
    proposals = {"proposals": [{"family": held_out, "params": {"n": 40}}, {"family": training, "params": {"n": 39}}]}
    rules.append({"match": {"system_contains": "You choose new practice tasks"},
                  "reply": {"content": json.dumps(proposals)}})
    for name, family in _load().items():
        if name == held_out:
            continue
        for n in range(1, 41):
            inst = family.render({"n": n})
            marker, solve = _marker(inst.instruction), _action("bash", command=_solve_line(inst.solve_sh))
            if not gain:
                rules.append({"match": {"last_message_contains": marker}, "reply": solve,
                              "success_probability": 0.5, "on_failure": finish})
                continue
            rules += [{"match": {"last_message_contains": marker, "model": a}, "reply": solve} for a in adapters]
            # shown its family: every other request succeeds (no turn condition: the worked examples are
            # earlier turns of the conversation)
            rules.append({"match": {"last_message_contains": marker, "conversation_contains": [f"{DONE}{name}"]},
                          "reply": solve, "alternate": True, "on_failure": finish})
            # shown nothing of its family: prose the JSON action format cannot use (audited as a parse failure)
            rules.append({"match": {"last_message_contains": marker}, "reply": {"content": "Let me think about it."}})
    if gain:  # prose again after the harness says the reply could not be used: a parse failure to the audit
        rules.append({"match": {"last_message_contains": "Your reply could not be used"},
                      "reply": {"content": "Let me think about it."}})
    return {"rules": rules, "default": finish, "base_models": [model_id], "seed": 3, "return_token_ids": False}


def _contract(tmp_path: Path) -> Path:
    from mindforge.hcp import derive, load_contract, save_contract

    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    child = derive(
        base, revision="1.0.0-curriculum-e2e", edit="model.id -> tiny; family proposals",
        changes={"model.id": "tiny", "prompts.discovery_mode": "families"},
    )
    return save_contract(child, tmp_path / "curriculum-e2e.toml")


def _spec(name: str, policy_url: str, contract: Path, generations: int) -> LineageSpec:
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    held_out = choose_sealed_families(FAMILIES, 1, key=name)
    return LineageSpec(
        name=name, tasks=[], contract_path=str(contract), generations=generations,
        curriculum=CurriculumSpec(
            families_dir=str(FAMILIES_DIR), families=FAMILIES, instances=4, selection_instances=2,
            sealed_fraction=0.25, sealed_families=held_out, seed=0,
        ),
        sealed_tasks=[str(p) for p in SEALED_TASKS],
        stages=[Stage.DISCOVERY, Stage.EXPANSION, Stage.UPDATE],
        runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=8, heartbeat_timeout_sec=120),
        discovery=DiscoverySpec(count=2, attempts=1),
        expansion=ExpansionSpec(attempts=1, search=SearchBudgetSpec(max_attempts=24, cells_per_step=8, seed=0)),
        update=UpdateSpec(
            base_model_path=str(ensure_tiny_model()), iterations=1, group_size=4, tasks_per_iteration=3,
            trainer=TrainerConfig(
                lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                batch_size=4, micro_batch_size=2, max_steps=1, use_bf16=False,
            ),
            max_rank=8,
        ),
        # the default gates: no margin, the default min_tasks
        evaluation=EvaluationSpec(splits=SplitConfig(), attempts=2, sealed_attempts=1),
    )


def _lineage(settings, name: str):
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        lin = lineages.get_lineage(session=s, lineage_id=name)
        gens = [dict(g.record) for g in lineages.list_generations(session=s, lineage_id=name)]
        members = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=name)}
        tasks = {t.id: t for t in pool.list_pool_tasks(session=s, lineage_id=name)}
        rows = [r.to_record() for r in trials.list_trials(session=s, lineage_id=name)]
        stages = {r.trial_id: r.stage for r in trials.list_trials(session=s, lineage_id=name)}
        entries = experience_repo.list_entries(session=s, lineage_id=name)
        adapters = registry.list_adapters(session=s, lineage_id=name)
        return dict(lin.spec), str(lin.status), gens, members, tasks, rows, stages, entries, adapters


def test_a_gain_is_promoted_at_the_default_gates_and_read_three_ways(temporal_env, ray_cluster, settings, tmp_path):
    from mindforge.hcp import load_contract

    env, _address, loop = temporal_env
    name = "curr-gain"
    contract = _contract(tmp_path)
    held_out = choose_sealed_families(FAMILIES, 1, key=name)[0]
    with start_scripted_policy(_script(load_contract(contract).model.id, name, held_out, gain=True)) as policy:
        loop.run_until_complete(_run_in_process(env, settings, _spec(name, policy.base_url, contract, 2)))
    spec, status, gens, members, tasks, rows, stages, entries, adapters = _lineage(settings, name)
    assert status == "completed" and len(gens) == 2
    family_of = {h: (t.provenance or {}).get("family") for h, t in tasks.items()}
    readings = spec["readings"]
    sealed = {h for h, split in members.items() if split == PoolSplit.SEALED}
    held = {h for h in sealed if family_of.get(h) == held_out}
    instances = {h for h in sealed if family_of.get(h) not in (None, held_out)}

    # the readings as recorded at the start: frozen, never pooled
    assert set(readings["readings"][SealedReading.FAMILIES]) == held and len(held) == 4
    assert set(readings["readings"][SealedReading.INSTANCES]) == instances and len(instances) == 3
    # the pinned micro tasks: count-lines' ``wc -l`` has the shape of fx-lines' solution (a training family
    # here: fx-number is held out), so it is read apart as restated; make-directory stays the transfer reading
    assert len(readings["readings"][SealedReading.TASKS]) == 1
    assert len(readings["readings"][SealedReading.RESTATED]) == 1 and readings["restated"]
    for g in gens:
        figures = g["readings"]
        assert set(figures) == {"instances", "families", "tasks", "restated"}
        for reading, row in figures.items():
            assert set(row["sealed_tasks"]) == set(readings["readings"][reading])

    # generation 0: the library contract wins the race, the trained pair passes the pair gate (default gates)
    first = gens[0]
    assert first["successor"]["promoted"] is True, first["successor"]["reason"]
    update = first["update"]
    assert update["outcome"] == UpdateOutcome.PROMOTED, update.get("promotion", {}).get("reason")
    assert update["plan"]["contract"] and update["promotion"]["lift"]["parent"]["contract_hash"] == spec.get(
        "root_contract", update["promotion"]["lift"]["parent"]["contract_hash"]
    )
    inst = first["readings"]["instances"]
    # in-family gain on unseen instances; its interval is by family (3 units, 1 attempt each): it cannot exclude 0
    assert inst["lift_vs_prev"]["mean"] > 0 and inst["lift_vs_prev"]["n_units"] == 3, inst
    assert inst["lift_vs_prev"]["unit"] == "family"
    assert first["readings"]["families"]["successor"]["passed"] == 0  # no transfer to a held-out family
    assert first["readings"]["tasks"]["successor"]["passed"] == 0
    assert set(first["reading_parts"]) <= {"copyable", "needs_adaptation"} and first["reading_parts"]

    # a pair's sealed trials are read once: generation 1 runs none for the pairs generation 0 read
    sealed_pairs = {}
    for r in rows:
        if stages[r.trial_id] == "sealed":
            sealed_pairs.setdefault((r.contract_hash, r.adapter, r.task_hash, r.attempt), []).append(r.trial_id)
    assert all(len(ids) == 1 for ids in sealed_pairs.values())

    # no decision reads a sealed trial
    sealed_ids = {r.trial_id for r in rows if stages[r.trial_id] == "sealed"}
    for g in gens:
        assert not set(g["successor"].get("trial_ids") or []) & sealed_ids
        assert not set((g["update"].get("promotion") or {}).get("trial_ids") or []) & sealed_ids

    # nothing of a held-out family or a sealed instance reaches search, selection, rollouts, prompts,
    # the library, training or Discovery
    not_measured = [r for r in rows if stages[r.trial_id] != "sealed"]
    assert not {r.task_hash for r in not_measured} & sealed
    markers = [_marker(Path(tasks[h].path, "instruction.md").read_text()) for h in sealed if h in tasks]
    for r in not_measured:
        transcript = Path(r.artifacts.get("transcript", "")).read_text() if r.artifacts.get("transcript") else ""
        assert not any(m in transcript for m in markers), r.trial_id
    assert entries and not {e.task_hash for e in entries} & sealed
    assert all(e.task_hash in tasks and members[e.task_hash] == PoolSplit.SEARCH for e in entries)
    trained_on = {tid for a in adapters for tid in a.trial_ids}
    assert trained_on and all(stages.get(t) in ("expansion", "search", "rollout") for t in trained_on)
    for g in gens:
        admitted = (g.get("discovery") or {}).get("admitted") or []
        assert all(a.get("family") != held_out for a in admitted)
        assert any(r.get("reason") for r in (g.get("discovery") or {}).get("rejected") or [])


def test_no_gain_is_refused_at_the_default_gates(temporal_env, ray_cluster, settings, tmp_path):
    from mindforge.hcp import load_contract

    env, _address, loop = temporal_env
    name = "curr-flat"
    contract = _contract(tmp_path)
    held_out = choose_sealed_families(FAMILIES, 1, key=name)[0]
    with start_scripted_policy(_script(load_contract(contract).model.id, name, held_out, gain=False)) as policy:
        spec = _spec(name, policy.base_url, contract, 1)
        spec.stages = [Stage.EXPANSION, Stage.UPDATE]
        loop.run_until_complete(_run_in_process(env, settings, spec))
    _spec_doc, status, gens, *_rest = _lineage(settings, name)
    assert status == "completed"
    record = gens[0]
    assert record["successor"]["promoted"] is False, record["successor"]["reason"]
    update = record["update"]
    assert update["plan"]["contract"], update["plan"]  # trained: contracts passed search trials
    assert update["outcome"] == UpdateOutcome.NOT_PROMOTED, update.get("promotion", {}).get("reason")
