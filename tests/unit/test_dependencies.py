"""Every third-party module the shipped code imports is declared in pyproject.toml.

The import statements of ``mindforge/``, ``workflows/`` and ``workers/`` are read with
``ast`` (lazy imports inside functions count too); each top-level module is mapped to the
distribution that provides it in this environment, and that distribution must be a
dependency (core or an extra). A module that only arrives through another package's
dependencies breaks the day that package drops it.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import REPO

SHIPPED = ("mindforge", "workflows", "workers")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, str]:
    """Declared distribution -> where (``core`` or the extra's name)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"core": project["dependencies"], **project.get("optional-dependencies", {})}
    return {
        _canonical(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0]): group
        for group, reqs in groups.items()
        for req in reqs
    }


def _imports() -> dict[str, set[str]]:
    """Top-level third-party module -> files importing it."""
    found: dict[str, set[str]] = {}
    for package in SHIPPED:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in SHIPPED:
                        found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_imported_distribution_is_declared():
    declared = _declared()
    providers = packages_distributions()
    problems = []
    for module, files in sorted(_imports().items()):
        dists = {_canonical(d) for d in providers.get(module, [])}
        if not dists:
            problems.append(f"{module}: imported by {min(files)}, but no installed distribution provides it")
        elif not dists & declared.keys():
            problems.append(f"{module} ({', '.join(sorted(dists))}): imported by {sorted(files)} but not declared")
    assert not problems, "\n".join(problems)


def test_numpy_is_a_core_dependency():
    # the coverage ledger's bootstrap intervals (mindforge/ledger.py) import it at module level
    assert _declared()["numpy"] == "core"
