"""Test markers: every test under tests/integration/ is ``integration``, under tests/e2e/ ``e2e``.

Checked by collecting the real test tree in a subprocess, with a plugin that prints each
test's markers (``--strict-markers`` is on, so an undeclared marker fails the collection).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.unit.marker_report import PREFIX

pytestmark = pytest.mark.slow  # collects (imports) every integration and e2e module


@pytest.fixture(scope="module")
def markers() -> dict[str, set[str]]:
    """Test id -> its markers, for every test under tests/integration and tests/e2e."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "tests.unit.marker_report", "tests/integration", "tests/e2e"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line[len(PREFIX):]) for line in done.stdout.splitlines() if line.startswith(PREFIX)]
    return {row["id"]: set(row["markers"]) for row in rows}


def test_directory_markers(markers):
    assert any(t.startswith("tests/integration/") for t in markers) and any(t.startswith("tests/e2e/") for t in markers)
    for test, names in markers.items():
        expected = "integration" if test.startswith("tests/integration/") else "e2e"
        assert expected in names, f"{test} is not marked {expected}"
        assert not ({"integration", "e2e"} - {expected}) & names, f"{test}: {names}"


def test_slow_tests_are_marked(markers):
    slow = {re.sub(r"\[.*\]$", "", t.split("::")[-1]) for t, names in markers.items() if "slow" in names}
    assert {
        "test_all_bundled_tasks_are_valid",
        "test_flaky_fixture_is_classified",
        "test_two_generation_lineage",
    } <= slow
    assert any("slow" not in names for names in markers.values())  # quick ones stay unmarked
