"""Terminal-Bench 1 -> native layout import, on small TB1 task folders built in tmp_path."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.tasks.loader import load_task
from mindforge.tasks.model import NetworkMode
from mindforge.tasks.tb1 import TB1_DEFAULT_AGENT_TIMEOUT_SEC, import_tb1

TASK_YAML = """\
instruction: |-
  Write "hello" to /app/out.txt.
author_name: Jane
author_email: jane@example.org
difficulty: medium
category: file-operations
tags:
  - bash
  - files
parser_name: pytest
max_agent_timeout_sec: 360.0
max_test_timeout_sec: 60.0
run_tests_in_same_shell: false
"""

RUN_TESTS = """\
#!/bin/bash
# TB1 style: refuses to run from /, reads tests from $TEST_DIR.
if [ "$PWD" = "/" ]; then echo "no workdir"; exit 1; fi
test -f "$TEST_DIR/test_outputs.py" || exit 3
echo "$PWD" > "$TEST_DIR/ran_in"
exit "${FAKE_STATUS:-0}"
"""


def make_tb1(root: Path, name: str = "hello-tb1", workdir: str = "/app") -> Path:
    src = root / name
    (src / "tests").mkdir(parents=True)
    (src / "assets").mkdir()
    (src / "task.yaml").write_text(TASK_YAML)
    (src / "Dockerfile").write_text(
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\n"
        f"WORKDIR {workdir}\nCOPY assets/ /app/assets/\n"
    )
    (src / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build:\n      dockerfile: Dockerfile\n"
        "    command: [sh, -c, sleep infinity]\n"
    )
    (src / "assets" / "seed.txt").write_text("seed\n")
    (src / "run-tests.sh").write_text(RUN_TESTS)
    (src / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\ndef test_out():\n"
        "    assert Path('/app/out.txt').read_text().strip() == 'hello'\n"
    )
    (src / "solution.sh").write_text("#!/bin/bash\necho hello > /app/out.txt\n")
    return src


def test_round_trip_layout_and_config(tmp_path: Path) -> None:
    src = make_tb1(tmp_path / "tb1")
    out = import_tb1(src, tmp_path / "native")
    assert out == (tmp_path / "native" / "hello-tb1").resolve()

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [
        "environment/Dockerfile",
        "environment/assets/seed.txt",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/run-tests.sh",
        "tests/test.sh",
        "tests/test_outputs.py",
    ]
    assert (out / "environment" / "Dockerfile").read_text() == (src / "Dockerfile").read_text()
    assert (out / "solution" / "solve.sh").read_text() == (src / "solution.sh").read_text()
    assert (out / "tests" / "run-tests.sh").read_text() == RUN_TESTS

    raw = tomllib.loads((out / "task.toml").read_text())
    assert raw["metadata"]["source"] == "terminal-bench-1"
    task = load_task(out)
    assert task.id == "hello-tb1"
    assert task.instruction == 'Write "hello" to /app/out.txt.\n'
    assert task.config.agent.timeout_sec == 360.0
    assert task.config.verifier.timeout_sec == 60.0
    assert task.config.metadata.difficulty == "medium"
    assert task.config.metadata.category == "file-operations"
    assert task.config.metadata.tags == ["bash", "files"]
    assert task.config.metadata.model_extra["author_name"] == "Jane"
    assert task.config.environment.network_mode == NetworkMode.PUBLIC
    assert task.has_solution
    assert task.warnings == []


def _run_wrapper(out: Path, fake: Path, status: int) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the generated test.sh with /tests and /logs/verifier pointed into ``fake``."""
    tests = fake / "tests"
    logs = fake / "logs" / "verifier"
    script = (out / "tests" / "test.sh").read_text()
    script = script.replace("/logs/verifier", str(logs)).replace("/tests", str(tests))
    if not tests.exists():
        tests.mkdir(parents=True)
        for item in (out / "tests").iterdir():
            (tests / item.name).write_bytes(item.read_bytes())
    proc = subprocess.run(
        ["bash", "-c", script], cwd="/", capture_output=True, text=True, timeout=30,
        env={"PATH": "/usr/bin:/bin", "FAKE_STATUS": str(status)},
    )
    return proc, (logs / "reward.txt").read_text().strip()


def test_wrapper_turns_exit_status_into_reward(tmp_path: Path) -> None:
    workdir = tmp_path / "container-app"
    workdir.mkdir()
    out = import_tb1(make_tb1(tmp_path / "tb1", workdir=str(workdir)), tmp_path / "native")
    fake = tmp_path / "fake-root"

    proc, reward = _run_wrapper(out, fake, status=0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert reward == "1"
    # run-tests.sh ran from the image's WORKDIR with TEST_DIR pointing at the tests.
    assert (fake / "tests" / "ran_in").read_text().strip() == str(workdir)

    proc, reward = _run_wrapper(out, fake, status=2)
    assert reward == "0"
    assert "exited 2" in proc.stdout


def test_defaults_and_descriptions_form(tmp_path: Path) -> None:
    src = make_tb1(tmp_path / "tb1")
    (src / "task.yaml").write_text(
        "descriptions:\n  - key: base\n    description: Do the thing.\n"
    )
    (src / "solution.sh").unlink()
    (src / "run-tests.sh").unlink()
    task = load_task(import_tb1(src, tmp_path / "native"))
    assert task.instruction == "Do the thing.\n"
    assert task.config.agent.timeout_sec == TB1_DEFAULT_AGENT_TIMEOUT_SEC
    assert not task.has_solution
    assert "pytest" in (task.tests_dir / "run-tests.sh").read_text()


def test_existing_target_needs_overwrite(tmp_path: Path) -> None:
    src = make_tb1(tmp_path / "tb1")
    out = import_tb1(src, tmp_path / "native")
    with pytest.raises(InputError, match="already exists"):
        import_tb1(src, tmp_path / "native")
    (src / "task.yaml").write_text(TASK_YAML.replace("360.0", "720.0"))
    assert import_tb1(src, tmp_path / "native", overwrite=True) == out
    assert load_task(out).config.agent.timeout_sec == 720.0


def _yaml(text: str):
    return lambda src: (src / "task.yaml").write_text(text)


BAD_TB1 = [
    ("missing task.yaml", lambda s: (s / "task.yaml").unlink(), "task.yaml", "", "missing file"),
    ("malformed yaml", _yaml("instruction: [unclosed\n"), "task.yaml", "", "malformed YAML at line"),
    ("not a mapping", _yaml("- a\n- b\n"), "task.yaml", "", "expected a mapping"),
    ("no instruction", _yaml("difficulty: easy\n"), "task.yaml", "instruction", "missing"),
    ("empty instruction", _yaml("instruction: '  '\n"), "task.yaml", "instruction", "empty"),
    ("timeout text", _yaml("instruction: x\nmax_agent_timeout_sec: soon\n"), "task.yaml",
     "max_agent_timeout_sec", "expected a number"),
    ("timeout zero", _yaml("instruction: x\nmax_test_timeout_sec: 0\n"), "task.yaml",
     "max_test_timeout_sec", "greater than 0"),
    ("tags wrong", _yaml("instruction: x\ntags: bash\n"), "task.yaml", "tags", "list of strings"),
    ("missing Dockerfile", lambda s: (s / "Dockerfile").unlink(), "Dockerfile", "", "missing file"),
    ("multi-container", lambda s: (s / "docker-compose.yaml").write_text(
        "services:\n  client: {build: .}\n  db: {image: postgres}\n"),
     "docker-compose.yaml", "services", "unsupported: multi-container"),
]


@pytest.mark.parametrize(
    ("edit", "file", "field", "reason"), [c[1:] for c in BAD_TB1], ids=[c[0] for c in BAD_TB1]
)
def test_bad_tb1_task(tmp_path: Path, edit, file: str, field: str, reason: str) -> None:
    src = make_tb1(tmp_path / "tb1")
    edit(src)
    with pytest.raises(InputError) as info:
        import_tb1(src, tmp_path / "native")
    assert Path(info.value.path) == (src / file).resolve()
    assert info.value.field == field
    assert reason in info.value.reason
    # Nothing half-written is left behind.
    native = tmp_path / "native"
    assert not native.exists() or list(native.iterdir()) == []
