"""The ``tasks/micro`` suite's shape, without Docker: size, parts, categories, limits, base image,
solutions of one to three commands that the instructions do not give away, and the README table.

The suite is loaded with the real loader; the Discovery static checks (answer in the instruction,
tests reading the solution, near-duplicates) run on it as on a proposal.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mindforge.discovery.checks import PoolIndex, static_checks
from mindforge.settings import REPO_ROOT
from mindforge.tasks.loader import load_tasks
from mindforge.tasks.model import NetworkMode, Task

MICRO = REPO_ROOT / "tasks" / "micro"
CATEGORIES = {"files", "permissions", "text", "counting", "archives", "environment", "scripts", "git"}
DIFFICULTIES = {"easy", "medium"}
BASE_IMAGE = "mindforge/base:bookworm"
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
_README_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (\w+) \| (\w+) \| [^|]+ \| (\d+) \|$", re.MULTILINE)


@pytest.fixture(scope="module")
def suite() -> list[Task]:
    return load_tasks([MICRO])


def _normal(text: str) -> str:
    """Lower case, backticks dropped, every run of blanks one space."""
    return " ".join(text.replace("`", " ").lower().split())


def command_lines(task: Task) -> list[str]:
    """The command lines of ``solution/solve.sh``: no shebang, comments, blank lines or ``set`` options."""
    text = (task.solution_dir / "solve.sh").read_text(encoding="utf-8")
    return [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.strip().startswith("set -")
    ]


def test_suite_is_large_enough_and_every_task_is_complete(suite):
    assert len(suite) >= 40
    for task in suite:
        assert task.instruction.strip(), task.id
        assert task.dockerfile.is_file(), task.id
        assert (task.tests_dir / "test.sh").is_file(), task.id
        assert task.has_solution, task.id
        assert not task.warnings, (task.id, task.warnings)


def test_categories_are_declared_and_each_has_four_tasks(suite):
    counts = Counter(t.config.metadata.category for t in suite)
    assert set(counts) <= CATEGORIES, set(counts) - CATEGORIES
    assert min(counts.values()) >= 4, counts
    assert {t.config.metadata.difficulty for t in suite} <= DIFFICULTIES


def test_limits_are_small_and_offline(suite):
    for task in suite:
        cfg = task.config
        assert cfg.environment.network_mode == NetworkMode.NO_NETWORK, task.id
        assert cfg.environment.cpus == 1 and cfg.environment.memory_mb <= 512, task.id
        assert cfg.verifier.timeout_sec <= 60 and cfg.agent.timeout_sec <= 300, task.id
        assert cfg.environment.docker_image is None, task.id


def test_dockerfiles_build_from_the_base_without_installing(suite):
    for task in suite:
        lines = [
            ln.strip()
            for ln in task.dockerfile.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")
        ]
        assert lines[0] == f"FROM {BASE_IMAGE}", task.id
        assert sum(ln.upper().startswith("FROM ") for ln in lines) == 1, task.id
        text = "\n".join(lines)
        assert "<<" not in text, f"{task.id}: heredoc in Dockerfile (no BuildKit here)"
        assert not re.search(r"\b(apt-get|apt|pip|pip3|curl|wget)\b", text), f"{task.id}: installs or downloads"


def test_solutions_take_one_to_three_commands(suite):
    for task in suite:
        assert 1 <= len(command_lines(task)) <= 3, (task.id, command_lines(task))


def test_no_instruction_contains_its_solution_commands(suite):
    """Neither a whole command line nor any part of a pipeline or ``&&`` list of two words or more."""
    for task in suite:
        instruction = _normal(task.instruction)
        for line in command_lines(task):
            parts = [line] + [p for p in _SEGMENT_SPLIT.split(line) if len(p.split()) >= 2]
            for part in parts:
                assert _normal(part) not in instruction, f"{task.id}: instruction contains {part!r}"


def test_suite_passes_the_discovery_static_checks(suite):
    """No answer in an instruction, no test reading the solution, no near-duplicate of another
    micro task or a bundled task."""
    bundled = load_tasks([REPO_ROOT / "tasks"])
    for task in suite:
        pool = PoolIndex.from_tasks(t for t in [*suite, *bundled] if t.id != task.id)
        assert static_checks(task, pool) is None, task.id


def test_verifiers_write_the_reward_and_never_read_the_solution(suite):
    for task in suite:
        test_sh = (task.tests_dir / "test.sh").read_text(encoding="utf-8")
        assert "/logs/verifier/reward.txt" in test_sh, task.id
        assert "/solution" not in test_sh, task.id


def test_readme_table_lists_every_task(suite):
    rows = {m[1]: (m[2], m[3], int(m[4])) for m in _README_ROW.finditer((MICRO / "README.md").read_text("utf-8"))}
    expected = {t.id: (t.config.metadata.category, t.config.metadata.difficulty, len(command_lines(t))) for t in suite}
    assert rows == expected
