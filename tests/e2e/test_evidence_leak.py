"""The leak test: no decision reads the sealed split (Temporal, two-node Ray, Docker, SQLite, PEFT).

Two lineages run the same search and selection tasks (pinned to the same splits); the
first also has two sealed tasks, the second none. The model is a SCRIPTED POLICY behind
the OpenAI-compatible HTTP API, and it behaves differently on sealed tasks than on
selection tasks:

- under the baseline harness it never solves the search task ``log-5xx-report``, solves
  ``fix-invoice-totals`` and each selection task on every other request, and every sealed
  task;
- with the plan-first hook (a harness edit configuration search can find) it solves
  ``log-5xx-report``, ``fix-invoice-totals`` on every other request (the contrast training
  needs: the Update trains under plan-first, the best contract by search evidence) and
  *both sealed tasks*, but none of the selection tasks: a candidate contract that only
  wins where no decision may look;
- as a newly trained adapter, under any harness, it solves every selection task and *no
  sealed task*: the trained pair beats the kept (parent) pair on selection, which the pair
  gate needs (a tie never passes).

Had the sealed split fed the successor choice, the plan-first candidate would have been
promoted; had it fed the pair gate, the trained pair would have been rejected. Instead
both lineages keep the parent contract and hand on the trained pair (plan-first harness,
new adapter) - identical decisions - and only the first reports a sealed lift (-1: the
adapter fails every sealed task the parent solves), the second none. Each lineage gets its
own scripted server (same script), so the two runs see the same replies.
"""

from __future__ import annotations

import json

import pytest

from mindforge.evaluation import PoolSplit, SplitConfig
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
from mindforge.store import lineages, pool, trials
from tests.conftest import BUNDLED_TASKS
from tests.e2e.test_update import _action, _marker, _run, _solve

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

HARD = "log-5xx-report"  # search: only the plan-first hook unlocks it
SEARCH = [HARD, "fix-invoice-totals"]
SELECTION = ["jsonl-to-csv", "regex-ipv4-extract"]
SEALED = ["shell-ext-summary", "site-permissions"]
PLAN = "numbered plan"  # in the first user message when the plan-first hook is on
LINEAGES = ("leak", "leak-nosealed")


def _script() -> dict:
    """Deterministic in counts: the two rules with a contrast (``fix-invoice-totals`` under the baseline
    and under plan-first) succeed on every other request (``alternate``), so every group of its attempts
    holds a success and a failure whatever the order of its requests."""
    rules: list[dict] = []
    solve_run = {"match": {"last_message_contains": "wrote"}, "reply": _action("bash", command="bash /tmp/solve.sh")}
    adapters = [f"{name}-g0-r0" for name in LINEAGES]
    for name in SEARCH + SELECTION + SEALED:
        marker = _marker(name)
        # a new adapter, under any harness: every selection task, no sealed task
        if name in SELECTION + SEALED:
            reply = _solve(name) if name in SELECTION else _action("finish")
            rules += [{"match": {"turn": 0, "last_message_contains": marker, "model": m}, "reply": reply}
                      for m in adapters]
            # under plan-first its first reply is the plan: it acts (solves, or gives up) on the next turns
            rules += [{"match": {"turn": 1, "conversation_contains": [marker, PLAN], "model": m}, "reply": reply}
                      for m in adapters]
            if name in SELECTION:
                rules += [{"match": {"conversation_contains": [marker, PLAN], "last_message_contains": "wrote",
                                     "model": m}, "reply": solve_run["reply"]} for m in adapters]
        # the plan-first candidate: a plan, then the solution on search and sealed tasks; nothing on selection
        if name in SELECTION:
            rules.append({"match": {"conversation_contains": [marker, PLAN]}, "reply": _action("finish")})
        else:
            rules.append({"match": {"turn": 0, "conversation_contains": [marker, PLAN]},
                          "reply": {"content": "1. solve\n2. run"}})
            # fix-invoice-totals under plan-first: every other request (the Update, which trains under the
            # best contract by search evidence - plan-first - needs a contrast)
            mixed = name in SEARCH and name != HARD
            rules.append({"match": {"turn": 1, "conversation_contains": [marker, PLAN]}, "reply": _solve(name),
                          "alternate": mixed, **({"on_failure": _action("finish")} if mixed else {})})
        # base weights under the baseline harness: never the hard task, half of fix-invoice-totals and of each
        # selection task, every sealed task
        if name == HARD:
            rules.append({"match": {"last_message_contains": marker}, "reply": _action("finish")})
        elif name in SEARCH + SELECTION:
            rules.append(
                {
                    "match": {"turn": 0, "last_message_contains": marker},
                    "reply": _solve(name), "alternate": True, "on_failure": _action("finish"),
                }
            )
        else:
            rules.append({"match": {"turn": 0, "last_message_contains": marker}, "reply": _solve(name)})
    rules.append(solve_run)
    return {"rules": rules, "default": _action("finish"), "base_models": ["tiny"], "seed": 0, "return_token_ids": False}


def _spec(name: str, tasks: list[str], policy_url: str, contract: str, sealed: bool) -> LineageSpec:
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    overrides = {t: PoolSplit.SEARCH for t in SEARCH} | {t: PoolSplit.SELECTION for t in SELECTION}
    if sealed:
        overrides |= {t: PoolSplit.SEALED for t in SEALED}
    return LineageSpec(
        name=name,
        tasks=[str(BUNDLED_TASKS / t) for t in tasks],
        contract_path=contract,
        stages=[Stage.EXPANSION, Stage.UPDATE],
        runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=8, heartbeat_timeout_sec=120),
        expansion=ExpansionSpec(attempts=4, search=SearchBudgetSpec(max_attempts=24, cells_per_step=8, seed=0)),
        update=UpdateSpec(
            base_model_path=str(ensure_tiny_model()),
            # one on-policy iteration: the training contract (plan-first, the best by search evidence) ran one
            # search trial, so its rollouts, not the Expansion's trials, give the group with a contrast
            iterations=1, group_size=4, tasks_per_iteration=2,
            trainer=TrainerConfig(
                lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=1e-3,
                batch_size=4, micro_batch_size=2, max_steps=1, use_bf16=False,
            ),
            max_rank=8,
            # a declared non-inferiority margin on the lower bound (two selection tasks give a narrow
            # bootstrap); the mean lift must still be above 0. What this test checks is that the
            # decision is the same with and without the sealed split
            promotion_margin=0.25,
        ),
        evaluation=EvaluationSpec(
            splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=2, overrides=overrides),
            attempts=2,
        ),
    )


def _evidence(settings, name: str) -> dict:
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        record = dict(lineages.get_generation(session=s, lineage_id=name, index=0).record)
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=name)}
        tasks = {t.id: t.task_id for t in pool.list_pool_tasks(session=s, lineage_id=name)}
        rows = trials.list_trials(session=s, lineage_id=name, generation_index=0)
        sealed_ids = {r.trial_id for r in rows if split_of[r.task_hash] == PoolSplit.SEALED}
        search_wins = {r.task_id for r in rows if r.stage == "search" and r.reward == 1.0}
    return {
        "record": record,
        "splits": {tasks[h]: sp for h, sp in split_of.items()},
        "sealed_ids": sealed_ids,
        "search_wins": search_wins,
    }


def test_decisions_are_the_same_with_and_without_the_sealed_split(temporal_env, ray_cluster, settings, contract_path):
    from mindforge.policy.doubles.scripted import start_scripted_policy

    env, _address, loop = temporal_env
    with start_scripted_policy(_script()) as first, start_scripted_policy(_script()) as second:
        specs = [
            _spec(LINEAGES[0], SEARCH + SELECTION + SEALED, first.base_url, str(contract_path), sealed=True),
            _spec(LINEAGES[1], SEARCH + SELECTION, second.base_url, str(contract_path), sealed=False),
        ]
        with_sealed, without = loop.run_until_complete(_run(env, settings, specs))
    a, b = _evidence(settings, LINEAGES[0]), _evidence(settings, LINEAGES[1])

    # the same search and selection tasks on the same splits
    assert {t: sp for t, sp in a["splits"].items() if t not in SEALED} == b["splits"]
    assert {a["splits"][t] for t in SEALED} == {PoolSplit.SEALED} and not b["sealed_ids"]
    # search found the sealed-only winner in both: plan-first covers the hard search task
    assert HARD in a["search_wins"] and HARD in b["search_wins"]

    for ev in (a, b):
        successor = ev["record"]["successor"]
        promotion = ev["record"]["update"]["promotion"]
        assert successor["decided_on"] == promotion["decided_on"] == "selection"
        assert not set(successor["trial_ids"]) & a["sealed_ids"] and not set(promotion["trial_ids"]) & a["sealed_ids"]
    # identical decisions: the parent contract is kept (the candidate loses on selection), the adapter promoted
    for key in ("promoted", "contract_hash"):
        assert a["record"]["successor"][key] == b["record"]["successor"][key]
    assert a["record"]["successor"]["promoted"] is False
    assert a["record"]["update"]["promotion"]["promoted"] is b["record"]["update"]["promotion"]["promoted"] is True
    assert with_sealed.outcome == without.outcome == UpdateOutcome.PROMOTED
    assert with_sealed.contract_hash != without.contract_hash  # each names its own lineage's adapter
    # only the reported lift differs: measured (a drop) with the sealed split, absent without
    lifts = [lift for lift in a["record"]["sealed_lifts"].values() if lift is not None]  # one per reading
    assert lifts and all(lift["measured_on"] == "sealed" and lift["mean"] == -1.0 for lift in lifts)
    assert sum(lift["n_tasks"] for lift in lifts) == len(SEALED)
    assert not any(b["record"]["sealed_lifts"].values())
    assert "no sealed tasks" in b["record"]["sealed_lift_reasons"]["tasks"]


def _sealed_evidence(settings, name: str) -> tuple[set[str], set[str]]:
    """(ids of the lineage's sealed trials, strings that would show a sealed task's contents)."""
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=name)}
        tasks = pool.list_pool_tasks(session=s, lineage_id=name)
        sealed_tasks = [t for t in tasks if split_of[t.id] == PoolSplit.SEALED]
        rows = trials.list_trials(session=s, lineage_id=name)
        ids = {r.trial_id for r in rows if split_of[r.task_hash] == PoolSplit.SEALED}
    contents: set[str] = set()
    for t in sealed_tasks:
        contents |= {t.task_id, t.id, _marker(t.task_id)}
        text = (BUNDLED_TASKS / t.task_id / "instruction.md").read_text(encoding="utf-8")
        contents |= {line.strip() for line in text.splitlines() if len(line.strip()) >= 30}
    return ids, contents


def _search_task_ids(settings, name: str) -> set[str]:
    """Ids of the lineage's search-split tasks (its starting ones and Discovery's admissions there)."""
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        split_of = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=name)}
        return {
            t.task_id for t in pool.list_pool_tasks(session=s, lineage_id=name) if split_of[t.id] == PoolSplit.SEARCH
        }


def _store_texts(settings, name: str) -> dict[str, str]:
    """What decisions, training and search wrote, as text: each generation's record (less the sealed
    measurement itself), the search jobs and candidates, and (where the tables exist) the experience library."""
    import sqlalchemy as sa

    eng = se.init_db(settings.db_url)
    out: dict[str, str] = {}
    with se.session_scope(eng) as s:
        for g in lineages.list_generations(session=s, lineage_id=name):
            # the sealed measurement itself (sealed_lift*, evaluation, and the compounding tables that
            # measure_sealed_lift writes per sealed reading: every pair's sealed score over the frozen
            # sealed task set) is where sealed trials belong
            measured = (
                "sealed_lift", "sealed_lift_vs_root", "sealed_lift_reason", "evaluation", "compounding",
                "readings", "reading_parts", "sealed_reading", "sealed_lifts", "sealed_lifts_vs_root",
                "sealed_lift_reasons",
            )
            record = {k: v for k, v in dict(g.record).items() if k not in measured}
            out[f"generation {g.index} record"] = json.dumps(record, default=str)
    with eng.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        # search state, and the experience library: its entries, snapshots and rejected
        # candidates (mining reads the search split only, so none may name a sealed task)
        library = ("experience_entries", "experience_snapshots", "experience_rejections")
        scanned = sorted(t for t in tables if t.startswith("search_") or t in library)
        query = sa.text("SELECT id FROM search_jobs WHERE lineage_id = :n")
        jobs = {r[0] for r in conn.execute(query, {"n": name})}

        def ours(row: dict) -> bool:  # this lineage's rows only (the session's store is shared)
            if "job_id" in row:
                return row["job_id"] in jobs
            return row.get("lineage_id", name) == name

        for table in scanned:
            rows = [dict(r) for r in conn.execute(sa.text(f"SELECT * FROM {table}")).mappings()]  # schema names
            out[f"table {table}"] = json.dumps([r for r in rows if ours(r)], default=str)
    return out


def test_two_generations_with_discovery_name_no_sealed_trial_or_task(
    temporal_env, ray_cluster, settings, contract_path
):
    """The whole loop, twice: Discovery, Expansion (search), Update, sealed lift, then generation 1.

    No decision record, training selection, search state, library entry or Discovery prompt
    may name a sealed trial or show a sealed task's contents (its id, hash, marker or
    instruction lines). Discovery's near-duplicate check reads sealed instructions (the one
    allowed read) but its rejections do not name them. SCRIPTED POLICY behind the HTTP API.
    """
    from mindforge.payloads import DiscoverySpec
    from mindforge.policy.doubles.scripted import start_scripted_policy

    env, _address, loop = temporal_env
    name = "leak-loop"
    with start_scripted_policy(_script()) as policy:
        spec = _spec(name, SEARCH + SELECTION + SEALED, policy.base_url, str(contract_path), sealed=True)
        spec = spec.model_copy(
            update={
                "generations": 2,
                "stages": [Stage.DISCOVERY, Stage.EXPANSION, Stage.UPDATE],
                "discovery": DiscoverySpec(count=1, attempts=1),
            }
        )
        spec.expansion.search.max_attempts = 8
        loop.run_until_complete(_run(env, settings, [spec]))
        requests = list(policy.app.state.policy.requests)
    sealed_ids, contents = _sealed_evidence(settings, name)
    assert sealed_ids and contents  # the sealed split was really run: there is something to leak
    texts = _store_texts(settings, name)
    assert {"generation 0 record", "generation 1 record"} <= set(texts)
    assert any(k.startswith("table search_") for k in texts)
    # the library grew (both search tasks' reference solutions at least): its check is not vacuous
    entries = json.loads(texts["table experience_entries"])
    assert {e["task_id"] for e in entries} >= set(SEARCH), entries
    assert {e["task_id"] for e in entries} <= _search_task_ids(settings, name)  # Discovery's admissions may join
    prompts = [
        json.dumps(r["messages"]) for r in requests
        if any("The current task pool." in str(m.get("content", "")) for m in r["messages"])
    ]
    assert len(prompts) >= 2  # Discovery asked in both generations
    texts |= {f"Discovery prompt {i}": p for i, p in enumerate(prompts)}
    leaks = [(where, s) for where, text in texts.items() for s in sealed_ids | contents if s in text]
    assert not leaks, leaks[:5]
