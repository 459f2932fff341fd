"""The quality gate: ruff and mypy find nothing in the gated packages (ruff in tests/ too), and every ignore says why.

The tools run as ``deploy/test.sh`` runs them, with the configuration in ``pyproject.toml``
(``[tool.ruff]``, ``[tool.mypy]``), so ``pytest`` alone enforces the gate too. Ruff's
``PGH`` rules already reject a blanket ``# type: ignore`` or ``# noqa``; the last test asks
each narrow one for its reason on the same line.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # mypy over the whole tree takes about a minute without its cache

#: the packages the gate covers (deploy/test.sh names the same four)
GATED = ("mindforge", "workflows", "workers", "benchmarks")
#: what ruff checks: the four packages and the tests (deploy/test.sh adds the same ``tests``); mypy stays on GATED
RUFF_GATED = (*GATED, "tests")

#: a per-line ignore (mypy's with its error codes, or ruff's noqa with its rule codes), then what follows it
_PRAGMA = re.compile(r"#\s*(?:type:\s*ignore\[[^\]]+\]|noqa:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)(?P<rest>.*)$")


def _run(*argv: str, paths: tuple[str, ...] = GATED) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv, *paths], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", paths=RUFF_GATED)
    assert done.returncode == 0, f"ruff check {' '.join(RUFF_GATED)}:\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing() -> None:
    done = _run("mypy")
    assert done.returncode == 0, f"mypy {' '.join(GATED)}:\n{done.stdout}{done.stderr}"


def test_configuration_has_no_blanket_ignores() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    lint = config["ruff"]["lint"]
    assert {"E", "F", "W", "I", "UP", "B", "PGH"} <= set(lint["select"])
    assert not lint.get("ignore"), "no rule is switched off everywhere"
    assert config["ruff"]["line-length"] == 120
    mypy = config["mypy"]
    assert "ignore_missing_imports" not in mypy, "missing imports are allowed per module only"
    assert mypy["warn_unused_ignores"] and mypy["check_untyped_defs"]
    for override in mypy.get("overrides", []):
        assert override.get("module"), f"an override names its modules: {override}"


def test_every_ignore_states_its_reason() -> None:
    bare = []
    for package in RUFF_GATED:
        for path in sorted((REPO / package).rglob("*.py")):
            if path.match("tests/fixtures/families/*/templates/**/*.py"):
                continue  # not Python until rendered (pyproject.toml's extend-exclude)
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                match = _PRAGMA.search(line)
                if match and not re.search(r"[A-Za-z]{2,}", match.group("rest")):
                    bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not bare, "ignores without a reason on the same line:\n" + "\n".join(bare)
