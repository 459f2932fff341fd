"""The harness features a small model needs, reachable from the plain baseline by recorded edits, and audit-guided."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.simulate import SIM_EXAMPLES
from mindforge.hcp import SHELL_FORMATS, derive, diff_contracts, load_contract
from mindforge.hcp.examples import MAX_EXAMPLES
from mindforge.search import (
    Edit,
    SearchTask,
    edit_changes,
    edit_example,
    example_edit,
    make_candidate,
    materialize_chain,
)
from mindforge.search.affinity import affinity, task_affinity_table
from mindforge.search.edits import MIN_MAX_TOKENS, STOP_PRESETS, operator_edits
from tests.fixtures.examples import COUNT_LINES

EXAMPLE = example_edit(COUNT_LINES)

REPO = Path(__file__).resolve().parents[3]
ROOT = load_contract(REPO / "hcp_contracts" / "baseline.toml")

NEW_FEATURES = {
    "action_format=fenced_bash": ("tools.action_format", "fenced_bash"),
    "action_format=command": ("tools.action_format", "command"),
    "action_format=tool_calls": ("tools.action_format", "tool_calls"),
    "add_example=count_lines": ("resources.examples[0].name", "count_lines"),
    "stop=newline": ("provider_options.stop", ["\n"]),
    "stop=blank_line": ("provider_options.stop", ["\n\n"]),
    "max_tokens=1024": ("model.max_tokens", 1024),
    "max_tokens=512": ("model.max_tokens", 512),
    "observation_truncation=head": ("tools.observation_truncation", "head"),
    "observation_truncation=tail": ("tools.observation_truncation", "tail"),
    "show_exit_code=False": ("tools.show_exit_code", False),
    "show_turn_budget=False": ("tools.show_turn_budget", False),
    "mode=single_command": ("workspace.mode", "single_command"),
    "max_turns=15": ("workspace.max_turns", 15),
    "constrained_decoding=True": ("tools.constrained_decoding", True),
}


def child(contract, *edits: Edit):
    return materialize_chain(contract, list(edits))[-1]


@pytest.mark.parametrize("key", sorted(NEW_FEATURES))
def test_each_feature_is_one_recorded_edit_from_the_baseline(key):
    edit = next(e for e in operator_edits(ROOT, [COUNT_LINES]) if e.key == key)
    contract = child(ROOT, edit)
    assert contract.mindforge.parent == ROOT.ref and contract.mindforge.edit == edit.describe(ROOT)
    path, value = NEW_FEATURES[key]
    changes = {c.key: c.new for c in diff_contracts(ROOT, contract, include_identity=False)}
    assert changes[path] == value, changes
    assert make_candidate(ROOT, [edit], origin="operator", step=0).contract_hash == contract.content_hash


def test_a_shell_format_drops_the_file_tools_and_says_so():
    edit = Edit(op="action_format", value="command")
    assert edit_changes(ROOT, edit) == {
        "tools.action_format": "command",
        "tools.allow": ["bash", "finish"],
        # completion-style command-line prompting: one line per reply, one command per trial
        "provider_options.stop": ["\n"],
        "workspace.mode": "single_command",
    }
    assert "drops read_file, write_file" in edit.describe(ROOT) and "single_command" in edit.describe(ROOT)
    fenced = edit_changes(ROOT, Edit(op="action_format", value="fenced_bash"))
    assert "workspace.mode" not in fenced and "provider_options.stop" not in fenced
    command = child(ROOT, edit)
    keys = {e.key for e in operator_edits(command)}
    assert "add_tool=read_file" not in keys and {"action_format=json", "action_format=fenced_bash"} <= keys
    with pytest.raises(ValueError, match="cannot offer 'read_file'"):
        edit_changes(command, Edit(op="add_tool", value="read_file"))
    back = child(command, Edit(op="action_format", value="json"))
    assert list(back.tools.allow) == ["bash", "finish"]  # back to JSON: the tools stay as they were
    no_bash = derive(ROOT, revision="nb", edit="no bash", changes={"tools.allow": ["read_file", "finish"]})
    assert not any(e.op == "action_format" and e.value in SHELL_FORMATS for e in operator_edits(no_bash))


def test_no_example_edit_by_default_and_the_given_examples_once_each_up_to_the_limit():
    assert not [e for e in operator_edits(ROOT) if e.op == "add_example"]  # no worked example ships
    library = SIM_EXAMPLES
    assert len(library) > MAX_EXAMPLES  # the search chooses which examples a contract carries
    offered = [e for e in operator_edits(ROOT, library) if e.op == "add_example"]
    assert [e.key for e in offered] == [f"add_example={x.name}" for x in library]
    contract = ROOT
    for edit in offered[:MAX_EXAMPLES]:
        contract = child(contract, edit)
    assert [e.name for e in contract.resources.examples] == [x.name for x in library[:MAX_EXAMPLES]]
    assert contract.resources.examples[0] == library[0] == edit_example(offered[0])
    with pytest.raises(ValueError, match="already in the contract"):
        edit_changes(contract, offered[0])
    with pytest.raises(ValueError, match="no worked example as JSON"):
        edit_changes(ROOT, Edit(op="add_example", value="count_lines"))  # a bare name (the old library)
    with pytest.raises(ValueError, match=f"already carries {MAX_EXAMPLES}"):
        edit_changes(contract, offered[MAX_EXAMPLES])
    assert not [e for e in operator_edits(contract, library) if e.op == "add_example"]


def test_an_example_edit_carries_its_example_so_same_name_other_content_is_another_contract():
    other = COUNT_LINES.model_copy(update={"instruction": "Count the lines of comets.txt into n.txt."})
    a, b = child(ROOT, example_edit(COUNT_LINES)), child(ROOT, example_edit(other))
    assert example_edit(COUNT_LINES).key == example_edit(other).key == "add_example=count_lines"
    assert a.content_hash != b.content_hash and b.resources.examples[0].instruction == other.instruction


def test_reply_length_goes_down_as_well_as_up_within_bounds():
    keys = [e.key for e in operator_edits(ROOT) if e.op == "max_tokens"]
    assert keys == ["max_tokens=4096", "max_tokens=1024", "max_tokens=512"]
    lower = Edit(op="max_tokens", value=512)
    assert lower.tags(ROOT) == {"reply_tokens_lower"} and Edit(op="max_tokens", value=4096).tags(ROOT) == {
        "reply_tokens_raise"
    }
    small = derive(ROOT, revision="s", edit="short", changes={"model.max_tokens": 40})
    assert [e.value for e in operator_edits(small) if e.op == "max_tokens"] == [80, MIN_MAX_TOKENS]
    tiny = derive(ROOT, revision="t", edit="short", changes={"model.max_tokens": MIN_MAX_TOKENS})
    assert [e.value for e in operator_edits(tiny) if e.op == "max_tokens"] == [2 * MIN_MAX_TOKENS]


def test_stop_presets_and_their_removal():
    assert {e.key for e in operator_edits(ROOT) if e.op == "stop"} == {"stop=newline", "stop=blank_line"}
    stopped = child(ROOT, Edit(op="stop", value="newline"))
    assert list(stopped.provider_options.stop) == STOP_PRESETS["newline"] == ["\n"]
    assert {e.key for e in operator_edits(stopped) if e.op == "stop"} == {"stop=blank_line", "stop=none"}
    cleared = child(stopped, Edit(op="stop", value="none"))
    assert list(cleared.provider_options.stop) == [] and "stop" not in cleared.to_document()["provider_options"]
    with pytest.raises(ValueError, match="no stop preset"):
        edit_changes(ROOT, Edit(op="stop", value="semicolon"))
    assert Edit(op="stop", value="none").tags() == {"stop_off"} and "stop" in Edit(op="stop", value="newline").tags()


def test_command_format_with_an_example_and_a_blank_line_stop_is_a_three_edit_chain():
    edits = [Edit(op="action_format", value="command"), EXAMPLE,
             Edit(op="stop", value="blank_line")]  # fmt: skip
    chain = materialize_chain(ROOT, edits)
    final = chain[-1]
    assert (final.tools.action_format, final.provider_options.stop[0], final.resources.examples[0].name) == (
        "command",
        "\n\n",
        "count_lines",
    )
    assert final.workspace.mode == "single_command"  # came with the command format
    assert [c.mindforge.parent for c in chain] == [ROOT.ref, chain[0].ref, chain[1].ref]
    assert len({e.slot for e in edits}) == 3  # different slots: the allocator may compose them


def _task(rule: str, cls: str, owner: str = "config") -> SearchTask:
    cluster = f"{owner}:{rule}"
    return SearchTask(task_hash="h" * 64, task_id="t", cluster=cluster, rule=rule, owner=owner, failure_class=cls)


@pytest.mark.parametrize(
    ("cls", "edit", "level"),
    [
        ("parse_error", Edit(op="action_format", value="command"), 2),
        ("parse_error", EXAMPLE, 2),
        ("parse_error", Edit(op="stop", value="newline"), 1),
        ("parse_error", Edit(op="max_tokens", value=512), 1),
        ("truncated_reply", Edit(op="stop", value="newline"), 2),
        ("truncated_reply", Edit(op="constrained_decoding", value=True), 2),
        ("parse_error", Edit(op="constrained_decoding", value=True), 2),
        ("empty_reply", Edit(op="stop", value="none"), 2),
        ("empty_reply", EXAMPLE, 2),
        ("parse_error", Edit(op="hook_on", value="plan_first"), 0),
    ],
)
def test_unusable_replies_point_the_search_at_format_examples_and_stops(cls, edit, level):
    table = task_affinity_table(_task("config.parse_failure", cls))
    assert affinity(table, edit.tags(ROOT)) == level


def test_other_audits_reach_the_display_and_mode_edits():
    stuck = task_affinity_table(_task("model.stuck", "max_turns", owner="model"))
    assert affinity(stuck, Edit(op="mode", value="single_command").tags(ROOT)) == 2  # repeating one action: one command
    cut = task_affinity_table(_task("config.output_cut", "task_failed"))
    assert affinity(cut, Edit(op="observation_truncation", value="tail").tags(ROOT)) == 1
    errors = task_affinity_table(_task("model.finished_on_errors", "task_failed", owner="model"))
    hidden = derive(ROOT, revision="h", edit="no exit code", changes={"tools.show_exit_code": False})
    assert affinity(errors, Edit(op="show_exit_code", value=True).tags(hidden)) == 1


def test_progress_is_a_config_failure_that_moved_on():
    from mindforge.search import CellResult
    from mindforge.search.state import is_progress

    base = _task("config.parse_failure", "parse_error")

    def result(rule: str, reward: float = 0.0, usable: bool = True) -> CellResult:
        fields = {"trial_id": "s", "task_hash": "h", "contract_hash": "c", "attempt": 0}
        return CellResult(**fields, reward=reward, usable=usable, rule=rule)

    assert is_progress(base, result("model.wrong_answer"))
    assert is_progress(base, result("config.output_cut"))
    assert not is_progress(base, result("config.parse_failure"))  # still the same failure
    assert not is_progress(base, result(""))  # not audited: unknown
    assert not is_progress(base, result("model.wrong_answer", usable=False))
    assert not is_progress(base, result("", reward=1.0))  # a pass is a success, not progress
    model_owned = _task("model.wrong_answer", "task_failed", owner="model")
    assert not is_progress(model_owned, result("model.finished_on_errors"))  # the harness was not in the way


def test_cell_results_carry_the_audit_rule_of_a_failure():
    from mindforge.audit import audit_trial
    from mindforge.search import PlannedCell, cell_result_from_record
    from mindforge.trials.record import FailureClass, TrialRecord

    cell = PlannedCell(trial_id="s-1", task_hash="h" * 64, task_id="t", contract_hash="c", attempt=0)
    rec = TrialRecord(trial_id="s-1", run_id="r", task_id="t", task_hash="h" * 64, agent="model", reward=0.0,
                      failure_class=FailureClass.PARSE_ERROR)  # fmt: skip
    audit = audit_trial(rec, [], contract=ROOT)
    assert cell_result_from_record(rec, cell, audit).rule == "config.parse_failure"
    assert cell_result_from_record(rec, cell).rule == ""
    passed = rec.model_copy(update={"reward": 1.0, "failure_class": None})
    assert cell_result_from_record(passed, cell).rule == ""


def test_a_stepping_stone_is_refined_with_what_fits_its_failure_now():
    """A stone whose attempts now fail as ``model.stuck`` is refined with single-command mode first."""
    from mindforge.search.arms import _stone_table
    from mindforge.search.state import CellStats, SearchBudget, SearchState

    task = _task("config.parse_failure", "parse_error")
    state = SearchState(
        job_id="j", root_toml="", root_hash="r", tasks=[task], budget=SearchBudget(max_attempts=10),
        cells={"0:0": CellStats(attempts=2, usable=2, progress=2, progress_rules={"model.stuck": 2})},
    )
    base = task_affinity_table(task)
    now = _stone_table(state, 0, task.cluster, base)
    mode = Edit(op="mode", value="single_command").tags(ROOT)
    assert affinity(base, mode) == 0 and affinity(now, mode) == 2
    assert all(now[tag] >= level for tag, level in base.items())  # the base failure's edits still fit


def test_the_command_format_is_tagged_with_what_it_couples():
    """Switching to ``command`` also sets a newline stop and ``single_command``: the audits those fix see it."""
    edit = Edit(op="action_format", value="command")
    assert edit.tags(ROOT) == {"format", "stop", "stop:newline", "single_command"}
    truncated = task_affinity_table(_task("config.parse_failure", "truncated_reply"))
    stuck = task_affinity_table(_task("model.stuck", "max_turns", owner="model"))
    assert affinity(truncated, edit.tags(ROOT)) == 2 and affinity(stuck, edit.tags(ROOT)) == 2
    # where the parent already stops and runs one command, the switch couples nothing more
    set_up = derive(ROOT, revision="s", edit="stop, one command", changes={
        "provider_options.stop": STOP_PRESETS["newline"], "workspace.mode": "single_command"})
    assert edit.tags(set_up) == {"format"}
    assert Edit(op="action_format", value="fenced_bash").tags(ROOT) == {"format"}


def test_the_stone_that_gets_past_the_failure_most_often_is_refined_first(monkeypatch) -> None:
    """With one stone refined per step, the command format (3 of 4 attempts past the parse
    failure) is refined rather than a worked example that got past it on 4 of 7, though
    the example made more progress attempts in number (seen on SmolLM2 with ten examples)."""
    from mindforge.search.arms import Arms, _progress_rate, offer_new_arms
    from mindforge.search.candidates import make_candidate
    from mindforge.search.state import CellStats, SearchBudget, SearchState

    smollm2 = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    example, command = EXAMPLE, Edit(op="action_format", value="command")
    task = _task("config.parse_failure", "truncated_reply")
    tasks = [task.model_copy(update={"task_hash": c * 64, "task_id": c}) for c in "ab"]
    state = SearchState(
        job_id="j", root_toml="", root_hash="r", tasks=tasks, budget=SearchBudget(max_attempts=99),
        candidates=[make_candidate(smollm2, [e], origin="operator", step=0) for e in (example, command)],
        cells={
            "0:0": CellStats(attempts=4, usable=4, progress=2), "1:0": CellStats(attempts=3, usable=3, progress=2),
            "0:1": CellStats(attempts=2, usable=2, progress=2), "1:1": CellStats(attempts=2, usable=2, progress=1),
        },
    )
    assert (
        _progress_rate([4, 0, 3]) > _progress_rate([7, 0, 4])
        and _progress_rate([4, 0, 4]) > _progress_rate([1, 0, 1])
    )
    monkeypatch.setattr("mindforge.search.arms.STEPPING_STONES_PER_CLUSTER", 1)
    arms = Arms(state, smollm2)
    offer_new_arms(arms, state, operator_edits(smollm2, SIM_EXAMPLES), unsolved=[0, 1])
    refined = [c for c in arms.potential if c.origin == "progress"]
    assert refined and all(c.edits[0] == command for c in refined)
    assert any(e.op == "add_example" for c in refined for e in c.edits[1:])


def test_constrained_decoding_is_a_json_format_edit_that_a_format_switch_undoes():
    on = child(ROOT, Edit(op="constrained_decoding", value=True))
    assert "JSON schema of the allowed actions" in on.mindforge.edit
    assert "constrained_decoding=False" in {e.key for e in operator_edits(on)}
    fenced = child(on, Edit(op="action_format", value="fenced_bash"))
    assert fenced.tools.constrained_decoding is False  # only the json format has an action schema
    assert not any(e.op == "constrained_decoding" for e in operator_edits(fenced))
    with pytest.raises(ValueError, match="needs the json action format"):
        edit_changes(fenced, Edit(op="constrained_decoding", value=True))
