"""Fuzzing task.toml and the task folder layout: every defect is an InputError naming file and field."""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mindforge.errors import InputError
from mindforge.tasks.loader import load_task, load_task_config
from tests.conftest import BUNDLED_TASKS, FIXTURE_TASKS
from tests.unit.fuzz.strategies import FUZZ, HUGE, Mutation, dump_toml, garbage_bytes, mutations, non_utf8

#: a task.toml with every section and key the loader knows
FULL_TASK_TOML = {
    "version": "1.0",
    "schema_version": "1.4",
    "task": {"name": "t", "version": "1", "description": "d", "authors": [{"name": "a"}], "keywords": ["k"]},
    "metadata": {"difficulty": "easy", "category": "c", "tags": ["x"], "family": "f"},
    "verifier": {"timeout_sec": 30.0, "user": "root", "environment_mode": "shared", "env": {"A": "1"}},
    "agent": {"timeout_sec": 60.0, "user": "agent"},
    "environment": {
        "build_timeout_sec": 120.0, "cpus": 1, "memory_mb": 512, "storage_mb": 1024, "gpus": 0,
        "network_mode": "no-network", "allowed_hosts": [], "workdir": "/app", "env": {"B": "2"},
        "allow_internet": False,
    },
    "solution": {"env": {"C": "3"}},
    "steps": [],
    "artifacts": [],
}  # fmt: skip
TOML_DOCUMENTS = [FULL_TASK_TOML] + [
    tomllib.loads((d / "task.toml").read_text(encoding="utf-8"))
    for d in sorted([*FIXTURE_TASKS.iterdir(), *BUNDLED_TASKS.iterdir()])
    if (d / "task.toml").is_file()
]
TEMPLATE_TASK = FIXTURE_TASKS / "trivially_passing"


def _load_config(data: bytes) -> tuple[Path, InputError | None]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "task.toml"
        path.write_bytes(data)
        try:
            load_task_config(path)
        except InputError as exc:
            return path, exc
        return path, None


@FUZZ
@given(garbage_bytes)
@example(b"[environment]\nmemory_mb = 1e999")
@example(b"a = " + b"[" * 5_000)
def test_garbage_task_toml_is_an_input_error(data: bytes) -> None:
    path, error = _load_config(data)
    if error is not None:
        assert error.path == str(path) and str(path) in str(error) and error.reason


@FUZZ
@given(st.sampled_from(TOML_DOCUMENTS).flatmap(mutations))
@example(Mutation("retype", ("environment", "allow_internet"), {"environment": {"allow_internet": "yes"}}))
@example(Mutation("huge", ("environment", "network_mode"), {"environment": {"network_mode": HUGE}}))
@example(Mutation("retype", ("steps",), {"steps": [{"instruction": "x"}]}))
def test_one_mutated_task_toml_field_is_refused_by_key_path(mutation: Mutation) -> None:
    data = dump_toml(mutation.document)
    if data is None:
        return
    path, error = _load_config(data)
    if error is not None:
        assert error.field, f"{mutation}: {error} names no field"
        assert str(path) in str(error) and error.field in str(error) and error.reason
        assert len(str(error)) < 2_000, f"{mutation}: the message echoes the whole value ({len(str(error))} chars)"


@FUZZ
@given(st.sampled_from(TOML_DOCUMENTS[:1]).map(lambda d: dump_toml(d) or b"").flatmap(non_utf8))
def test_non_utf8_task_toml_is_refused(data: bytes) -> None:
    path, error = _load_config(data)
    assert error is not None and "not UTF-8" in error.reason and error.path == str(path)


#: what can be wrong with one file of a task folder
FILE_DEFECTS = st.sampled_from(
    ["ok", "missing", "directory", "empty", "non_utf8", "garbage", "dangling_link", "self_link"]
)
LAYOUT_FILES = ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh")


def _spoil(path: Path, defect: str, garbage: bytes) -> None:
    if defect == "ok":
        return
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if defect == "directory":
        path.mkdir()
    elif defect == "empty":
        path.write_bytes(b"")
    elif defect == "non_utf8":
        path.write_bytes(b"\xff\xfe" + garbage)
    elif defect == "garbage":
        path.write_bytes(garbage)
    elif defect == "dangling_link":
        path.symlink_to(path.parent / "no-such-target")
    elif defect == "self_link":
        path.symlink_to(path)


@FUZZ
@given(st.tuples(*[FILE_DEFECTS] * len(LAYOUT_FILES)), garbage_bytes, st.sampled_from(["", "bad\udcffname", "../x"]))
@example(("ok", "ok", "ok", "ok", "ok"), b"", "bad\udcffname")
@example(("ok", "self_link", "ok", "ok", "ok"), b"", "")
def test_broken_task_folder_is_an_input_error(defects: tuple[str, ...], garbage: bytes, extra_file: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "task"
        shutil.copytree(TEMPLATE_TASK, root, symlinks=True)
        (root / "solution").mkdir(exist_ok=True)
        (root / "solution/solve.sh").write_text("true\n", encoding="utf-8")
        for rel, defect in zip(LAYOUT_FILES, defects, strict=True):
            _spoil(root / rel, defect, garbage)
        if extra_file and extra_file != "../x":
            # a file name that is not UTF-8 (surrogate-escaped bytes, as os.listdir gives it)
            (root / "environment").mkdir(exist_ok=True)
            open(os.fsencode(root / "environment") + b"/" + os.fsencode(extra_file), "wb").close()
        try:
            load_task(root)
        except InputError as exc:
            assert exc.path.startswith(str(root.resolve())) and exc.reason, exc
