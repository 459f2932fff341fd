"""Hostile task folders (tests/fixtures/hostile/) that loading must refuse, each with a named error.

The ones that load (a stale reward in the image, a fork bomb) are run on Docker in
tests/integration/test_hostile_tasks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.cli.common import load_task_dirs
from mindforge.errors import InputError
from mindforge.tasks.loader import MAX_INSTRUCTION_BYTES, load_task
from tests.conftest import REPO

HOSTILE = REPO / "tests" / "fixtures" / "hostile"

#: fixture -> (the file the error names, relative to the fixture; the field; words of the reason)
REFUSED = {
    "climb_workdir": ("task.toml", "environment.workdir", "without '..'"),
    "climb_copy": ("environment/Dockerfile", "line 4", "not inside the build context"),
    "symlink_instruction": ("instruction.md", "", "pointing outside the task folder"),
    "symlink_tests": ("tests/expected.txt", "", "pointing outside the task folder"),
    "huge_instruction": ("instruction.md", "", f"at most {MAX_INSTRUCTION_BYTES} bytes"),
    "non_utf8_instruction": ("instruction.md", "", "not UTF-8"),
    "non_utf8_toml": ("task.toml", "", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_hostile_task_is_refused_naming_file_field_and_reason(name: str) -> None:
    rel, field, words = REFUSED[name]
    with pytest.raises(InputError) as err:
        load_task(HOSTILE / name)
    assert err.value.path == str(HOSTILE.resolve() / name / rel), err.value
    assert err.value.field == field and words in err.value.reason, err.value
    assert len(str(err.value)) < 1_000


def test_validate_reports_each_refused_task_as_a_load_error() -> None:
    tasks, errors = load_task_dirs([HOSTILE])
    assert sorted(d.name for d, _e in errors) == sorted(REFUSED)
    assert sorted(t.id for t in tasks) == ["fork_bomb", "stale_reward"]


def test_a_link_inside_the_task_folder_still_loads(tmp_path: Path) -> None:
    task = tmp_path / "linked"
    for rel in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_bytes((HOSTILE / "stale_reward" / rel).read_bytes())
    (task / "tests" / "same.sh").symlink_to("test.sh")
    (task / "tests" / "loop").symlink_to("loop")
    with pytest.raises(InputError, match="symbolic link loop"):
        load_task(task)
    (task / "tests" / "loop").unlink()
    assert load_task(task).id == "linked"
