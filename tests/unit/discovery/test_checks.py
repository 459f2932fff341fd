"""Static checks: near-duplicates, tests reading the solution, the answer in the instruction (no Docker)."""

from __future__ import annotations

import copy

import pytest

from mindforge.discovery.checks import (
    SIMILARITY_THRESHOLD,
    PoolIndex,
    find_answer_in_instruction,
    find_solution_reads,
    instruction_similarity,
    instruction_tokens,
    static_checks,
)
from mindforge.discovery.materialise import materialise
from mindforge.discovery.records import RejectReason
from mindforge.discovery.schema import TaskProposal
from mindforge.settings import REPO_ROOT
from mindforge.tasks.loader import load_task, load_tasks
from tests.unit.discovery.sample_proposals import (
    BROKEN,
    READS_SOLUTION,
    VALID,
    near_duplicate,
)


def _task(tmp_path, item: dict, name: str | None = None):
    return load_task(materialise(TaskProposal.model_validate(item), tmp_path, task_id=name))


@pytest.fixture(scope="module")
def bundled():
    return load_tasks([REPO_ROOT / "tasks"])


def test_tokens_ignore_case_punctuation_and_markup():
    assert instruction_tokens("Write `/app/OUT.csv`, **now**!") == ["write", "app", "out", "csv", "now"]


def test_similarity_of_copies_edits_and_different_texts():
    a = instruction_tokens("Sort the lines of /app/in.txt numerically and write them to /app/out.txt.")
    b = instruction_tokens("Sort the lines of /app/data.txt numerically and write them to /app/out.txt.")
    c = instruction_tokens("Compile the C project in /src with make and fix the linker error.")
    assert instruction_similarity(a, a) == 1.0
    assert instruction_similarity(a, b) >= SIMILARITY_THRESHOLD
    assert instruction_similarity(a, c) < 0.3
    # reordered sentences: Jaccard catches what the sequence ratio misses
    d = instruction_tokens("Write them to /app/out.txt. Sort the lines of /app/in.txt numerically and")
    assert instruction_similarity(a, d) == 1.0


def test_bundled_tasks_pass_the_static_checks_against_each_other(bundled):
    """No false positives on the hand-written bundled tasks (all distinct, none leaks its answer)."""
    for task in bundled:
        others = PoolIndex.from_tasks(t for t in bundled if t.id != task.id)
        assert static_checks(task, others) is None, task.id


def test_a_bundled_task_duplicates_itself(bundled):
    index = PoolIndex.from_tasks(bundled)
    rejection = index.find_duplicate(bundled[0])
    assert rejection.reason == RejectReason.DUPLICATE_TESTS


def test_near_duplicate_instruction_is_rejected(tmp_path, bundled):
    task = _task(tmp_path, near_duplicate())
    rejection = static_checks(task, PoolIndex.from_tasks(bundled))
    assert rejection.reason == RejectReason.DUPLICATE_INSTRUCTION
    assert "'jsonl-to-csv'" in rejection.detail


def test_identical_tests_are_rejected(tmp_path):
    first = _task(tmp_path, VALID)
    other = {**copy.deepcopy(VALID), "task_id": "other-words", "instruction": "Something else entirely about totals."}
    rejection = static_checks(_task(tmp_path, other), PoolIndex.from_tasks([first]))
    assert rejection.reason == RejectReason.DUPLICATE_TESTS
    assert static_checks(_task(tmp_path, BROKEN), PoolIndex.from_tasks([first])) is None


def test_index_round_trips_as_json(tmp_path, bundled):
    index = PoolIndex.from_tasks(bundled)
    again = PoolIndex.model_validate_json(index.model_dump_json())
    assert again.ids() == {t.id for t in bundled}
    assert again.find_duplicate(_task(tmp_path, near_duplicate())).reason == RejectReason.DUPLICATE_INSTRUCTION


def test_tests_reading_the_solution_are_rejected(tmp_path):
    rejection = find_solution_reads(_task(tmp_path, READS_SOLUTION))
    assert rejection.reason == RejectReason.TESTS_READ_SOLUTION
    assert "tests/test.sh line 3" in rejection.detail
    py = {
        **copy.deepcopy(VALID),
        "task_id": "py-reads",
        "test_files": {"test_outputs.py": "X = open('/app/solve.sh')\n"},
    }
    assert find_solution_reads(_task(tmp_path, py)).reason == RejectReason.TESTS_READ_SOLUTION
    assert find_solution_reads(_task(tmp_path, VALID)) is None


def test_answer_file_of_the_solution_in_the_instruction_is_rejected(tmp_path):
    answer = "alpha 1\nbeta 22\ngamma 333\n"
    item = {
        **copy.deepcopy(BROKEN),
        "task_id": "leaky-answer",
        "instruction": f"Write the word counts to /app/counts.txt:\n\n```\n{answer}```\n",
        "solve_sh": f"#!/usr/bin/env bash\ncat > /app/counts.txt <<'EOF'\n{answer}EOF\n",
    }
    rejection = find_answer_in_instruction(_task(tmp_path, item))
    assert rejection.reason == RejectReason.ANSWER_IN_INSTRUCTION
    assert "solution/solve.sh" in rejection.detail


def test_expected_literal_of_the_tests_in_the_instruction_is_rejected(tmp_path):
    item = {
        **copy.deepcopy(VALID),
        "task_id": "leaky-tests",
        "instruction": (
            VALID["instruction"] + "\nThe result is:\n  region,total\n  east,7.00\n  north,12.75\n  south,3.75\n"
        ),
    }
    rejection = find_answer_in_instruction(_task(tmp_path, item))
    assert rejection.reason == RejectReason.ANSWER_IN_INSTRUCTION
    assert "tests/test_outputs.py" in rejection.detail


def test_input_data_quoted_in_the_instruction_is_not_an_answer(tmp_path):
    data = VALID["files"]["data/sales.csv"]
    item = {
        **copy.deepcopy(VALID),
        "task_id": "quotes-input",
        "instruction": VALID["instruction"] + f"\nThe input looks like this:\n{data}",
        "test_files": {"test_outputs.py": VALID["test_files"]["test_outputs.py"] + f"\nINPUT = {data!r}\n"},
    }
    assert find_answer_in_instruction(_task(tmp_path, item)) is None


def test_single_line_expectations_are_not_answers(tmp_path):
    item = {
        **copy.deepcopy(BROKEN),
        "task_id": "prints-greeting",
        "instruction": "Make /app/hello.sh print exactly `Hello, operator of this machine`.\n",
        "test_sh": (
            "#!/usr/bin/env bash\n"
            "[ \"$(bash /app/hello.sh)\" = 'Hello, operator of this machine' ] && echo 1 > /logs/verifier/reward.txt\n"
        ),
    }
    assert find_answer_in_instruction(_task(tmp_path, item)) is None


def test_a_duplicate_of_a_held_out_task_is_rejected_without_naming_it(tmp_path, bundled):
    """Discovery's one allowed read of sealed tasks: it rejects the copy, and its record names no held-out task."""
    dup = _task(tmp_path, near_duplicate())
    named = PoolIndex.from_tasks(bundled).find_duplicate(dup)
    target = next(t.id for t in bundled if repr(t.id) in named.detail)  # the task it duplicates
    hidden = PoolIndex.from_tasks(bundled, held_out=[target]).find_duplicate(dup)
    assert hidden.reason == RejectReason.DUPLICATE_INSTRUCTION
    assert target not in hidden.detail and "held-out" in hidden.detail
    first = _task(tmp_path, VALID)
    other = {**copy.deepcopy(VALID), "task_id": "other-words", "instruction": "Something else entirely about totals."}
    same_tests = static_checks(_task(tmp_path, other), PoolIndex.from_tasks([first], held_out=[first.id]))
    assert same_tests.reason == RejectReason.DUPLICATE_TESTS and first.id not in same_tests.detail
