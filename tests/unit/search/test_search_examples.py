"""No test-derived worked examples by default: none ship in the search space,
a user's folder (``--examples DIR``) is checked with clear errors, and no example folder shipped
for use restates a bundled task's reference solution (``tasks/**/solution/solve.sh``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.hcp import load_contract
from mindforge.search import operator_edits
from mindforge.search.library import load_example_folder
from mindforge.search.restates import restated_tasks
from mindforge.tasks.shape import command_shape

REPO = Path(__file__).resolve().parents[3]
#: the ten hand-written examples that used to be the default library: they restate bundled
#: tasks, so only bench_experience's reference arm (labelled so) reads them
REFERENCE = REPO / "benchmarks" / "reference_examples"


def _shipped_example_folders() -> list[Path]:
    """Folders of worked-example TOML files shipped for use: any ``examples`` folder outside tests and the reference."""
    found = {p.parent for p in REPO.glob("**/examples/*.toml")}
    skip = (REPO / "tests", REFERENCE, REPO / ".venv")
    return sorted(f for f in found if not any(f.is_relative_to(s) for s in skip))


def test_the_default_search_space_and_the_main_job_offer_no_example():
    for name in ("baseline.toml", "smollm2.toml"):
        root = load_contract(REPO / "hcp_contracts" / name)
        assert not [e for e in operator_edits(root) if e.op == "add_example"], name
        assert not root.resources.examples, name  # the main job's contracts carry none either
    assert not (REPO / "mindforge" / "search" / "examples").exists()
    assert not list((REPO / "mindforge").glob("**/examples/*.toml"))


def test_no_shipped_example_shares_program_and_options_with_a_bundled_solution():
    for folder in _shipped_example_folders():
        assert restated_tasks(load_example_folder(folder), REPO / "tasks") == {}, folder


def test_the_check_finds_what_the_old_library_restated():
    """The check can fail: the hand-written library restates bundled tasks' reference solutions."""
    restated = restated_tasks(load_example_folder(REFERENCE), REPO / "tasks")
    assert restated["count_lines"] == ["micro/count-lines"]
    assert "micro/first-lines" in restated["head_lines"] and "micro/directory-mode" in restated["set_mode"]
    assert "micro/rename-file" in restated["move_file"]


def test_examples_are_shaped_by_the_one_command_shape_of_the_project():
    """The restatement check uses mindforge.tasks.shape, as the family check does."""
    shape = command_shape("wc -l < /app/planets.txt > /app/n.txt")
    assert shape == command_shape("wc -l < a > b") == (("wc", frozenset({"l"})),)
    piped = command_shape("LC_ALL=C sort -u a.txt | head -n 3")
    assert piped == (("sort", frozenset({"u"})), ("head", frozenset({"n"})))
    assert command_shape("wc -w < a > b") != command_shape("wc -l < a > b")


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_example_folder_loads_named_by_file_stems(tmp_path):
    _write(tmp_path, "b_print_date", 'instruction = "Print the date."\n[[steps]]\ncommand = "date -u"\n')
    _write(tmp_path, "a_list", 'instruction = "List /srv."\n[[steps]]\ncommand = "ls /srv"\noutput = "x\\n"\n')
    (tmp_path / "notes.md").write_text("not an example")
    examples = load_example_folder(tmp_path)
    assert [e.name for e in examples] == ["a_list", "b_print_date"]
    assert examples[0].steps[0].output == "x\n"
    edits = [e for e in operator_edits(load_contract(REPO / "hcp_contracts" / "baseline.toml"), examples)]
    assert [e.key for e in edits if e.op == "add_example"] == ["add_example=a_list", "add_example=b_print_date"]


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('instruction = "x"\n[[steps]]\ncommand = \n', "", "malformed TOML"),
        ('[[steps]]\ncommand = "ls"\n', "instruction", ""),
        ('instruction = "x"\nsteps = []\n', "steps", ""),
        ('instruction = "x"\n[[steps]]\ncommand = "  "\n', "steps", "blank"),
        ('name = "other"\ninstruction = "x"\n[[steps]]\ncommand = "ls"\n', "name", "named by its file"),
    ],
)
def test_a_bad_example_file_names_the_file_and_the_field(tmp_path, text, field, reason):
    path = _write(tmp_path, "bad", text)
    with pytest.raises(InputError) as info:
        load_example_folder(tmp_path)
    message = str(info.value)
    assert str(path) in message and field in message and reason in message


def test_a_missing_or_empty_folder_is_refused(tmp_path):
    with pytest.raises(InputError, match="no such directory"):
        load_example_folder(tmp_path / "nope")
    with pytest.raises(InputError, match=r"no \*\.toml"):
        load_example_folder(tmp_path)
