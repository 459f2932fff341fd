"""Three generations of one lineage on one frozen sealed split: the compounding table, end to end.

The real stack runs it: the Temporal dev server, a two-node Ray cluster, Docker sandboxes
on micro tasks, the SQLite store, GRPO training of a LoRA adapter on the tiny local model
(a Ray task) and its hand-off. The only test double is a SCRIPTED POLICY behind the
OpenAI-compatible HTTP API (``mindforge.policy.doubles.scripted``) playing the model. Its success
depends on the harness of the contract (the plan-first hook, which configuration search
can find, puts ``numbered plan`` in the first user message) and on the adapter revision
the request names (``model``: ``tiny`` for base weights, else the adapter's name):

- search split: ``count-lines`` is solved only under the plan-first harness (search has
  something to find); ``count-words`` under the baseline always, under plan-first on
  every other request (``alternate``: each group of Update rollouts holds a success and a
  failure, whatever the order of its requests, so every Update has a contrast to train on);
- selection split: three tasks solved under plan-first with any weights, never under the
  baseline, so the successor check promotes a plan-first contract in generation 0; and one
  more task for each generation's adapter, solved under plan-first from that adapter on,
  so each trained pair beats the kept pair (the same contract with the parent's adapter)
  and the promotion gate (a mean lift above 0, a declared margin on the lower bound)
  promotes each new adapter on its own gain;
- sealed split, four tasks, only under plan-first: the first with any weights, the second
  from generation 0's adapter on, the third from generation 1's, the fourth with
  generation 2's. Pair 0..3 then score 0, 1/2, 3/4 and 1 on sealed.

Checked: the sealed task set is the same in every generation (records and stored trials);
each generation starts from the pair the one before handed on (contract and adapter, in
the generation rows and in its base-evaluation trials); every lift agrees with a
recomputation from the stored sealed trials, paired by task; generation 0's lift splits
into a harness part and a weights part; and the report's JSON (``generations[i].sealed``,
``lift_vs_prev``, ``lift_vs_root``, the compounding rows) matches the store.
"""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest

from mindforge.evaluation import PoolSplit, SplitConfig
from mindforge.hcp import loads_contract
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
from mindforge.store import lineages, pool, registry, trials
from tests.conftest import REPO
from tests.e2e.test_update import _action, _run

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

MICRO = REPO / "tasks" / "micro"
LINEAGE = "compound"
HARD, MIXED = "count-lines", "count-words"
SEARCH = [HARD, MIXED]
#: solved under plan-first with any weights
SELECTION_ANY = ["make-directory", "write-hello-file", "create-empty-file"]
#: SELECTION_ADAPTER[g] needs generation g's adapter (level g + 1) or a later one
SELECTION_ADAPTER = ["last-lines", "uppercase-text", "count-files"]
SELECTION = SELECTION_ANY + SELECTION_ADAPTER
#: sealed[j] needs adapter level >= j (level 0: base weights; level k: generation k-1's adapter)
SEALED = ["copy-file", "rename-file", "first-lines", "sort-names"]
TASKS = SEARCH + SELECTION + SEALED
GENERATIONS = 3
PLAN = "numbered plan"  # in the first user message under the plan-first hook


def _marker(name: str) -> str:
    return (MICRO / name / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]


def _solve(name: str) -> dict:
    return _action("write_file", path="/tmp/solve.sh", content=(MICRO / name / "solution" / "solve.sh").read_text())


def _adapters() -> list[str]:
    """The model names of adapter levels 0..3: base weights, then generation g's revision (``-g<g>-r<g>``)."""
    return ["tiny"] + [f"{LINEAGE}-g{g}-r{g}" for g in range(GENERATIONS)]


def _plan_rule(name: str, **extra) -> dict:
    """Turn 1 under the plan-first harness (turn 0 answered the plan): write the solution."""
    match = {"turn": 1, "conversation_contains": [_marker(name), PLAN], **extra.pop("match", {})}
    return {"match": match, "reply": _solve(name), **extra}


def _script() -> dict:
    """Sealed rules first (no example may name a sealed task, so their markers are unambiguous)."""
    finish = _action("finish")
    plan = {"match": {"turn": 0, "conversation_contains": [PLAN]}, "reply": {"content": "1. solve\n2. run"}}
    rules: list[dict] = [plan]
    for level, name in enumerate(SEALED):
        rules += [_plan_rule(name, match={"model": m}) for m in _adapters()[level:]]
    for level, name in enumerate(SELECTION_ADAPTER, start=1):
        rules += [_plan_rule(name, match={"model": m}) for m in _adapters()[level:]]
    rules += [_plan_rule(name) for name in SELECTION_ANY + [HARD]]
    rules.append(_plan_rule(MIXED, alternate=True, on_failure=finish))
    rules.append({"match": {"turn": 0, "last_message_contains": _marker(MIXED)}, "reply": _solve(MIXED)})
    rules.append({"match": {"last_message_contains": "wrote"}, "reply": _action("bash", command="bash /tmp/solve.sh")})
    return {"rules": rules, "default": finish, "base_models": ["tiny"], "seed": 0, "return_token_ids": False}


def _spec(policy_url: str, contract: str) -> LineageSpec:
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    overrides = {t: PoolSplit.SEARCH for t in SEARCH} | {t: PoolSplit.SELECTION for t in SELECTION}
    overrides |= {t: PoolSplit.SEALED for t in SEALED}
    return LineageSpec(
        name=LINEAGE,
        tasks=[str(MICRO / t) for t in TASKS],
        contract_path=contract,
        generations=GENERATIONS,
        stages=[Stage.EXPANSION, Stage.UPDATE],
        runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=8, heartbeat_timeout_sec=120),
        expansion=ExpansionSpec(attempts=2, search=SearchBudgetSpec(max_attempts=24, cells_per_step=8, seed=0)),
        update=UpdateSpec(
            base_model_path=str(ensure_tiny_model()),
            iterations=1, group_size=4, tasks_per_iteration=1, max_draws=1,
            trainer=TrainerConfig(
                lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                batch_size=4, micro_batch_size=2, max_steps=1, use_bf16=False,
            ),
            max_rank=8,
            promotion_margin=0.25,  # an adapter as good as its parent on selection is promoted
        ),
        evaluation=EvaluationSpec(
            splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=2, overrides=overrides),
            attempts=1, successor_candidates=2, race_budget=4,
        ),
    )


def _stored(settings) -> dict:
    """The lineage as stored: splits, generations (index, status, start contract, its adapter, record), trials."""
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=LINEAGE)}
        names = {t.id: t.task_id for t in pool.list_pool_tasks(session=s, lineage_id=LINEAGE)}
        gens = lineages.list_generations(session=s, lineage_id=LINEAGE)
        hashes = {g.contract_hash for g in gens} | {g.record["contract_hash"] for g in gens}
        contracts = {h: loads_contract(registry.get_contract(session=s, content_hash=h).toml_text) for h in hashes}
        return {
            "split_of": split_of,
            "names": names,
            # a generation row names the contract it starts from; the contract names its adapter
            "gens": [
                (g.index, str(g.status), g.contract_hash, _adapter(contracts[g.contract_hash]), dict(g.record))
                for g in gens
            ],
            "trials": [_trial(r) for r in trials.list_trials(session=s, lineage_id=LINEAGE)],
            "plan_first": {h: c.hooks.plan_first for h, c in contracts.items()},
        }


def _adapter(contract) -> str:
    return contract.model.adapter or ""


def _trial(row) -> SimpleNamespace:
    """A stored trial with its generation and stage (the trial record itself carries neither)."""
    rec = row.to_record()
    return SimpleNamespace(
        generation_index=row.generation_index, stage=row.stage, task_hash=rec.task_hash, attempt=rec.attempt,
        contract_hash=rec.contract_hash, adapter=rec.adapter, reward=rec.reward, has_real_reward=rec.has_real_reward,
    )


def _task_means(records, pair: tuple[str, str]) -> dict[str, float]:
    """Task hash -> mean real reward of ``pair``'s trials (the one scorer's rule, recomputed)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if (r.contract_hash, r.adapter) == pair and r.has_real_reward and r.reward is not None:
            rewards[r.task_hash].append(r.reward)
    return {t: sum(v) / len(v) for t, v in rewards.items()}


def _paired(records, base: tuple[str, str], top: tuple[str, str]) -> tuple[float, int]:
    """(mean paired difference, paired tasks) of ``top`` over ``base``, from the trials alone."""
    lo, hi = _task_means(records, base), _task_means(records, top)
    shared = sorted(set(lo) & set(hi))
    return sum(hi[t] - lo[t] for t in shared) / len(shared), len(shared)


def _pair(entry: dict) -> tuple[str, str]:
    return entry["contract_hash"], entry.get("adapter") or ""


def test_three_generations_compound_on_one_frozen_sealed_split(temporal_env, ray_cluster, settings, contract_path):
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.reports import gather_report_data, render_report

    env, _address, loop = temporal_env
    with start_scripted_policy(_script()) as policy:
        loop.run_until_complete(_run(env, settings, [_spec(policy.base_url, str(contract_path))]))
    st = _stored(settings)
    gens, records, split_of = st["gens"], st["trials"], st["split_of"]
    assert [(g[0], g[1]) for g in gens] == [(i, "completed") for i in range(GENERATIONS)]
    rows = [g[4]["readings"]["tasks"] for g in gens]  # hand-written pinned tasks nothing restates: one reading
    assert all(list(g[4]["readings"]) == ["tasks"] for g in gens)
    _check_frozen_sealed(rows, records, split_of, st["names"])
    _check_chain(gens, rows, records, split_of, st["plan_first"])
    _check_lifts(rows, records)

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        report = json.loads(render_report(gather_report_data(s, LINEAGE), "json"))
    _check_report(report, rows)


def _check_frozen_sealed(rows: list[dict], records, split_of: dict, names: dict) -> None:
    """The same sealed tasks in every generation, and every pair run on all of them with the same attempts."""
    sealed = {h for h, sp in split_of.items() if sp == PoolSplit.SEALED}
    assert {names[h] for h in sealed} == set(SEALED)
    assert [sorted(r["sealed_tasks"]) for r in rows] == [sorted(sealed)] * GENERATIONS
    assert len({r["sealed_tasks_sha256"] for r in rows}) == 1 and {r["attempts"] for r in rows} == {1}
    # a pair's sealed trials are run once per lineage and read by every later generation: generation 0
    # runs its parent, its successor and the harness-only pair (contract and adapter both changed);
    # each later generation runs only the pair it hands on (its parent and the root were read before)
    for g, new_pairs in zip(range(GENERATIONS), (3, 1, 1), strict=True):
        ran = [r for r in records if r.generation_index == g and r.stage == "sealed"]
        assert {r.task_hash for r in ran} == sealed
        cells: dict[tuple[str, str], list] = defaultdict(list)
        for r in ran:
            cells[(r.contract_hash, r.adapter)].append((r.task_hash, r.attempt))
        assert all(sorted(c) == sorted((t, 0) for t in sealed) for c in cells.values()), cells
        assert len(cells) == new_pairs, sorted(cells)
    every = [(r.contract_hash, r.adapter, r.task_hash, r.attempt) for r in records if r.stage == "sealed"]
    assert len(every) == len(set(every))  # no pair re-read
    assert not {r.task_hash for r in records if r.stage != "sealed"} & sealed  # no other stage ran a sealed task


def _check_chain(gens: list, rows: list[dict], records, split_of: dict, plan_first: dict) -> None:
    """Each generation starts from the pair the one before handed on; contract and adapter both move."""
    names = _adapters()[1:]
    for g, (index, _status, start_contract, start_adapter, record) in enumerate(gens):
        row = rows[g]
        handed_on = record["update"]["next_pair"]
        assert record["update"]["outcome"] == "promoted" and handed_on["adapter"] == names[g], record["update"]
        assert _pair(row["successor"]) == _pair(handed_on) == (record["contract_hash"], names[g])
        assert _pair(row["parent"]) == (start_contract, start_adapter)
        base_eval = [r for r in records if r.generation_index == index and r.stage == "expansion"]
        assert {(r.contract_hash, r.adapter) for r in base_eval} == {(start_contract, start_adapter)}
        assert {split_of[r.task_hash] for r in base_eval} == {PoolSplit.SEARCH}
        if g:
            assert (start_contract, start_adapter) == _pair(rows[g - 1]["successor"])
            assert _pair(row["root"]) == _pair(rows[0]["parent"])
    # generation 0 changed the harness (plan-first, chosen on selection), later ones the weights only
    assert gens[0][4]["successor"]["promoted"] and gens[0][4]["successor"]["decided_on"] == "selection"
    assert not plan_first[gens[0][2]] and all(plan_first[g[4]["contract_hash"]] for g in gens)
    assert rows[0]["harness"] is not None and all(r["harness"] is None for r in rows[1:])
    assert gens[0][3] == "" and len({g[4]["contract_hash"] for g in gens}) == GENERATIONS


def _check_lifts(rows: list[dict], records) -> None:
    """Every pair's sealed score and lift, recomputed from the stored sealed trials, paired by task."""
    want = [0.0, 0.5, 0.75, 1.0]  # pair 0..3: the sealed tasks each pair's adapter level unlocks
    assert rows[0]["parent"]["score"] == want[0]
    ran = [r for r in records if r.stage == "sealed"]  # every generation reads the lineage's sealed trials
    for g, row in enumerate(rows):
        assert row["successor"]["score"] == want[g + 1] and row["parent"]["score"] == want[g]
        for key, base in (("lift_vs_prev", row["parent"]), ("lift_vs_root", row["root"] or row["parent"])):
            mean, n = _paired(ran, _pair(base), _pair(row["successor"]))
            lift = row[key]
            assert lift["mean"] == pytest.approx(mean) and lift["n_tasks"] == n == len(SEALED), (g, key, lift)
            assert lift["lo"] <= lift["mean"] <= lift["hi"] and lift["measured_on"] == "sealed"
        assert row["lift_vs_root"]["mean"] == pytest.approx(want[g + 1] - want[0])
        if g:
            assert row["root"]["score"] == want[0] and row["lift_vs_root"]["baseline"] == "root"
    # attribution: generation 0's harness part (plan-first, base weights) and weights part (its adapter)
    harness, weights = rows[0]["attribution"]["harness"], rows[0]["attribution"]["weights"]
    assert harness["status"] == weights["status"] == "measured"
    by_hand = _paired(ran, _pair(rows[0]["parent"]), _pair(rows[0]["harness"]))
    assert harness["lift"]["mean"] == pytest.approx(by_hand[0]) and harness["lift"]["n_tasks"] == by_hand[1]
    assert harness["lift"]["mean"] == pytest.approx(0.25) and weights["lift"]["mean"] == pytest.approx(0.25)
    for row in rows[1:]:
        assert row["attribution"]["harness"]["status"] == "unchanged"
        assert row["attribution"]["weights"]["lift"] == row["lift_vs_prev"]


def _check_report(report: dict, rows: list[dict]) -> None:
    """``report --format json``: ``generations[i]`` and the compounding rows carry the store's figures.

    The lineage's sealed split is hand-written tasks: its one reading is ``tasks``.
    """
    assert [g["index"] for g in report["generations"]] == list(range(GENERATIONS))
    assert list(report["readings"]) == ["tasks"]
    for g, row in zip(report["generations"], rows, strict=True):
        figures = g["readings"]["tasks"]
        assert figures["sealed"]["score"] == row["successor"]["score"]
        assert figures["sealed_parent"]["score"] == row["parent"]["score"]
        assert figures["lift_vs_prev"] == row["lift_vs_prev"] and figures["lift_vs_root"] == row["lift_vs_root"]
        assert figures["attribution"] == row["attribution"]
    table = report["readings"]["tasks"]["rows"]
    assert [t["pair"] for t in table] == list(range(GENERATIONS + 1))
    assert table[0]["sealed"]["score"] == rows[0]["parent"]["score"]
    for t, row in zip(table[1:], rows, strict=True):
        assert _pair(t) == _pair(row["successor"]) and t["sealed"]["score"] == row["successor"]["score"]
        assert t["lift_vs_prev"] == row["lift_vs_prev"] and t["lift_vs_root"] == row["lift_vs_root"]
