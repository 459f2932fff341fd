"""The experience library grows in generation 0 and is shown in generation 1 (Temporal, Ray, Docker, SQLite).

Test double: a SCRIPTED POLICY behind the OpenAI-compatible HTTP API (the one double
MindForge allows) plays a model that

- solves ``count-lines`` under any harness with one command line (so its base-evaluation
  trial passes: a ``model`` candidate);
- on ``copy-file`` answers with prose the harness cannot parse, unless the conversation
  shows it a worked example of another task (``count-lines``'s instruction): then it
  solves it with one command line. Only the search's ``experience_snapshot`` edit, which
  moves the contract to the library the ``oracle`` round seeded, shows one.

Generation 0 therefore seeds the library with both reference solutions (``oracle``), and
its ``model`` round adds the passed base-evaluation trial of ``count-lines`` and the
passed search trial of ``copy-file``. Generation 1's search moves the contract to the
grown library, and its trial on ``copy-file`` is shown generation 0's ``model`` entry.
Sandboxes, replays, verifier, Temporal, Ray and the store are real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.experience import ExperienceEntry, Provenance
from mindforge.payloads import SearchBudgetSpec
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import experience as experience_repo
from mindforge.store import trials
from tests.conftest import BUNDLED_TASKS
from tests.e2e.test_lineage import CONTRACT, _run_in_process, _spec, _stored

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

MICRO = BUNDLED_TASKS / "micro"
EASY = "count-lines"  # solved under any harness
SHOWN = "copy-file"  # solved only when shown a worked example of another task
DONE = "MF-SOLVED"


def _marker(task: str) -> str:
    return (MICRO / task / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]


def _solve_line(task: str) -> str:
    """The reference solution's commands as one line, then a marker (not the oracle entry's commands)."""
    lines = (MICRO / task / "solution" / "solve.sh").read_text(encoding="utf-8").splitlines()
    commands = [ln for ln in lines if ln.strip() and not ln.startswith("#") and not ln.startswith("set ")]
    return " && ".join([*commands, f"echo {DONE}"])


def _bash(command: str) -> dict:
    return {"content": json.dumps({"tool": "bash", "arguments": {"command": command}})}


def _script(model_id: str) -> dict:
    finish = {"content": json.dumps({"tool": "finish", "arguments": {}})}
    rules = [
        {"match": {"last_message_contains": DONE}, "reply": finish},
        {"match": {"last_message_contains": _marker(EASY)}, "reply": _bash(_solve_line(EASY))},
        # a worked example of the other task in the conversation: solve
        {"match": {"last_message_contains": _marker(SHOWN), "conversation_contains": [_marker(EASY)]},
         "reply": _bash(_solve_line(SHOWN))},
        # none: prose, which the JSON action format cannot use (audited config.parse_failure)
        {"match": {"conversation_contains": [_marker(SHOWN)]}, "reply": {"content": "Let me think about it."}},
    ]
    return {"rules": rules, "default": finish, "base_models": [model_id]}


def _library(settings, lineage: str) -> tuple[list[ExperienceEntry], dict[int, list]]:
    """The stored entries, and each generation's passed trials on :data:`SHOWN` by stage."""
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        entries = experience_repo.list_entries(session=s, lineage_id=lineage)
        shown = {
            g: [r.to_record() for r in trials.list_trials(session=s, lineage_id=lineage, generation_index=g)
                if r.task_id == SHOWN and r.reward == 1.0]
            for g in (0, 1)
        }
    return entries, shown


def test_the_library_grows_in_generation_0_and_generation_1_is_shown_its_entries(temporal_env, ray_cluster, settings):
    from mindforge.hcp import load_contract
    from mindforge.reports import gather_report_data, render_report

    env, _address, loop = temporal_env
    with start_scripted_policy(_script(load_contract(CONTRACT).model.id)) as policy:
        spec = _spec("exp-lib", policy.base_url, generations=2, attempts=1,
                     search=SearchBudgetSpec(max_attempts=16, cells_per_step=8, seed=0))
        spec.tasks = [str(MICRO / t) for t in (EASY, SHOWN)]
        loop.run_until_complete(_run_in_process(env, settings, spec))
    _records, gens, status = _stored(settings, "exp-lib")
    assert status == "completed" and [g[1] for g in gens] == ["completed", "completed"]
    first, second = gens[0][3]["experience"], gens[1][3]["experience"]

    # generation 0: both reference solutions seed the library before the search ...
    assert first["oracle"]["added"] == {"oracle": 2, "model": 0} and first["oracle"]["replayed"] == 2
    # ... the search moves the contract to it and solves the task it shows an example for ...
    assert gens[0][3]["search"]["covered"] == 1, gens[0][3]["search"]
    # ... and the model round adds the passed base-evaluation and search trials (one entry per task)
    assert first["model"]["added"] == {"oracle": 0, "model": 2}, first["model"]
    assert first["model"]["entries"] == {"oracle": 2, "model": 2}
    entries, shown = _library(settings, "exp-lib")
    by_id = {e.entry_id: e for e in entries}
    model = {e.task_id: e for e in entries if e.provenance == Provenance.MODEL}
    assert set(model) == {EASY, SHOWN} and all(e.generation == 0 for e in model.values())
    assert model[EASY].trial_id.startswith("t-") and model[SHOWN].trial_id.startswith("s-")  # expansion, search
    assert all(e.validation is not None and e.validation.rewards == [1.0, 1.0] for e in entries)
    assert model[EASY].steps[0].output.strip() == DONE  # the replay's output

    # generation 1: nothing new to seed; its passes repeat generation 0's commands (duplicates)
    assert second["oracle"]["candidates"] == 0 and second["oracle"]["added"] == {"oracle": 0, "model": 0}
    assert second["model"]["added"] == {"oracle": 0, "model": 0} and second["model"]["rejected"]["duplicate"] >= 2
    # generation 1's search trial on the task is shown the library's entries, generation 0's model entry among them
    assert shown[1], "generation 1's search did not solve the task"
    solved = shown[1][-1]
    assert solved.experience_entries and set(solved.experience_entries) <= set(by_id)
    assert model[EASY].entry_id in solved.experience_entries
    assert all(by_id[i].task_id != SHOWN for i in solved.experience_entries)  # never the task's own entry
    trajectory = json.loads(Path(solved.artifacts["trajectory"]).read_text(encoding="utf-8"))
    assert trajectory["extra"]["mindforge"]["experience_entries"] == solved.experience_entries

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        data = gather_report_data(s, "exp-lib")
    assert data.experience.entries == {"oracle": 2, "model": 2}
    assert [(r.generation, r.round) for r in data.experience.rounds] == [(0, "oracle"), (0, "model"), (1, "oracle"),
                                                                          (1, "model")]
    assert data.experience.rejections[1]["duplicate"] == second["model"]["rejected"]["duplicate"]
    assert json.loads(render_report(data, "json"))["experience"]["entries"] == {"oracle": 2, "model": 2}
    assert "experience library: 4 entries (2 oracle, 2 model)" in render_report(data, "md")
