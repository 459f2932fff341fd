"""The test tree collects as one session: no two test modules share a file name.

pytest's default import mode ("prepend") imports each test module by its bare file name, so
two ``test_x.py`` in different folders without ``__init__.py`` break the collection of the
whole run (``import file mismatch``) - but only when both are collected together, as
``./deploy/test.sh`` does and a run of one folder does not. Fixture task folders
(tests/fixtures) are data, never collected.
"""

from __future__ import annotations

from collections import defaultdict

from tests.conftest import REPO


def test_test_module_names_are_unique() -> None:
    tests = REPO / "tests"
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in tests.rglob("test_*.py"):
        rel = path.relative_to(tests)
        if rel.parts[0] == "fixtures":
            continue
        by_name[path.name].append(str(rel))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert clashes == {}, f"test modules sharing a file name (rename one): {clashes}"
