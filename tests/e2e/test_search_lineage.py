"""Expansion's audit and configuration search end to end (Temporal, Ray, Docker, SQLite), and the report.

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API plays a model whose
failing tasks are each unlocked by one particular harness edit - a skill in the
workspace (two tasks, two different skills), the plan-first hook, native tool calls, or
a harness limit: a larger observation cap (or head or tail truncation), where the line
the model needs sits in the middle of a long output that the baseline's head-and-tail
cap cuts.
Under the baseline contract it finishes at once, so every task fails the base
evaluation; search must find each task's edit. Everything else is real.
"""

from __future__ import annotations

import json

import pytest

from mindforge.payloads import SearchBudgetSpec, Stage
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import lineages, registry, trials
from tests.conftest import BUNDLED_TASKS
from tests.e2e.histories import save_histories
from tests.e2e.test_lineage import CONTRACT, _run_in_process, _spec, _stored

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

#: printed between two ~10 KB runs of numbers: past the baseline's 16 KiB cap (head + tail
#: kept), inside the 64 KiB of a x4 raise, and short enough that the prompt stays inside the
#: context window; the command computes the line, so only the output shows it
KEY_LINE = "MINDFORGE-42-KEY"
LONG_OUTPUT = "seq 1 2300; echo MINDFORGE-$((6*7))-KEY; seq 1 2300"

#: task -> how it is unlocked
UNLOCKS = {
    "regex-ipv4-extract": ("skill", "find_files.sh"),
    "jsonl-to-csv": ("skill", "run_tests.sh"),
    "log-5xx-report": ("hook", "numbered plan"),
    "site-permissions": ("format", "Act by calling the provided tools"),
    "shell-ext-summary": ("observation", KEY_LINE),
}


def _json(tool: str, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments})}


def _marker(task: str) -> str:
    return (BUNDLED_TASKS / task / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]


def unlock_script(model_id: str) -> dict:
    """Rules: the unlocking edit present -> write the reference solution, run it, finish."""
    rules = []
    for task, (kind, needle) in UNLOCKS.items():
        solve = (BUNDLED_TASKS / task / "solution" / "solve.sh").read_text(encoding="utf-8")
        marker = _marker(task)
        if kind == "skill":
            rules.append({"match": {"turn": 0, "system_contains": needle, "conversation_contains": [marker]},
                          "reply": _json("write_file", path="/tmp/solve.sh", content=solve)})
        elif kind == "observation":
            rules.append({"match": {"turn": 0, "conversation_contains": [marker]},
                          "reply": _json("bash", command=LONG_OUTPUT)})
            rules.append({"match": {"conversation_contains": [marker], "last_message_contains": needle},
                          "reply": _json("write_file", path="/tmp/solve.sh", content=solve)})
        elif kind == "hook":
            rules.append({"match": {"turn": 0, "conversation_contains": [marker, needle]},
                          "reply": {"content": "1. write the solution script\n2. run it"}})
            rules.append({"match": {"turn": 1, "conversation_contains": [marker, needle]},
                          "reply": _json("write_file", path="/tmp/solve.sh", content=solve)})
        else:
            rules.append({"match": {"turn": 0, "system_contains": needle, "conversation_contains": [marker]},
                          "reply": {"tool_call": {"name": "write_file",
                                                  "arguments": {"path": "/tmp/solve.sh", "content": solve}}}})
            rules.append({"match": {"system_contains": needle, "last_message_contains": "wrote"},
                          "reply": {"tool_call": {"name": "bash", "arguments": {"command": "bash /tmp/solve.sh"}}}})
            rules.append({"match": {"system_contains": needle},
                          "reply": {"tool_call": {"name": "finish", "arguments": {}}}})
    rules.append({"match": {"last_message_contains": "wrote"}, "reply": _json("bash", command="bash /tmp/solve.sh")})
    return {"rules": rules, "default": _json("finish"), "base_models": [model_id]}


def test_search_reaches_full_coverage_and_the_report_shows_single_below_it(
    temporal_env, ray_cluster, settings, tmp_path
):
    from mindforge.hcp import load_contract, loads_contract
    from mindforge.reports import gather_report_data, render_report

    env, _address, loop = temporal_env
    with start_scripted_policy(unlock_script(load_contract(CONTRACT).model.id)) as policy:
        spec = _spec(
            "search",
            policy.base_url,
            generations=1,
            attempts=1,
            # the last task (site-permissions: an edit no audit rule names) fell at trial 147 of 160 in one run
            search=SearchBudgetSpec(max_attempts=200, cells_per_step=8, seed=0),
        )
        spec.tasks = [str(BUNDLED_TASKS / t) for t in UNLOCKS]
        spec.stages = [Stage.EXPANSION]
        loop.run_until_complete(_run_in_process(env, settings, spec))
        loop.run_until_complete(save_histories(env, "search"))
    _records, gens, status = _stored(settings, "search")
    assert status == "completed"
    search = gens[0][3]["search"]
    assert search["failing_tasks"] == len(UNLOCKS)
    assert search["covered"] == len(UNLOCKS), search
    # the race (the default strategy) keeps racing once every task is covered: solved tasks stay in
    # its pool, and the budget ends it
    assert search["strategy"] == "race" and search["stop_reason"] == "budget_attempts"
    assert search["spent"]["attempts"] == 200
    assert search["best_single"]["covered"] < search["covered"]

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        data = gather_report_data(s, "search")
        lineage_id = lineages.get_lineage_by_name(session=s, name="search").id
        rules = {
            trials.get_trial(session=s, trial_id=a.trial_id).task_id: a.evidence["rule"]
            for a in trials.list_audits(session=s, lineage_id=lineage_id, generation_index=0, stage="expansion")
        }
        solved_by = {
            r.contract_hash
            for r in trials.list_trials(session=s, lineage_id=lineage_id, generation_index=0, stage="search")
            if r.task_id == "shell-ext-summary" and r.reward == 1.0
        }
        shown = {
            (c.tools.max_observation_bytes, c.tools.observation_truncation)
            for c in (loads_contract(registry.get_contract(session=s, content_hash=h).toml_text) for h in solved_by)
        }
    root_cap = load_contract(CONTRACT).tools.max_observation_bytes
    assert rules["shell-ext-summary"] == "config.output_cut"  # the audit saw the cut, so search tried the raise
    # every solver shows the key line: a larger cap, or a one-ended truncation (the output is about 20 KB
    # and the key line sits in its middle: the root's 8 KiB head + 8 KiB tail cut it, 16 KiB of either end keeps it)
    assert shown and all(cap > root_cap or truncation != "head_tail" for cap, truncation in shown), shown
    html = render_report(data, "html")
    md = render_report(data, "md")
    assert "cumulative" in md.lower() and "single" in md.lower()
    out = tmp_path / "report.html"
    out.write_text(html)
    assert 'id="coverage-curve"' in html or "coverage" in html
