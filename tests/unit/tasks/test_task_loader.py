"""Task loading (Harbor layout): every defect names file, key and reason; hashing."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.tasks.hashing import content_hash
from mindforge.tasks.loader import find_task_dirs, load_task, load_tasks
from mindforge.tasks.model import NetworkMode

GOOD_TOML = """\
version = "1.0"
[metadata]
difficulty = "easy"
category = "files"
tags = ["bash"]
author_name = "someone"
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 300.0
[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
"""


def make_task(root: Path, name: str = "hello", toml: str = GOOD_TOML) -> Path:
    """A valid task directory ``root/name``."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text("Create /app/hello.txt containing 'hi'.\n")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "tests" / "test_outputs.py").write_text("def test_x():\n    assert True\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hi > /app/hello.txt\n")
    return task


def test_valid_task_loads(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    assert task.id == "hello"
    assert task.path == (tmp_path / "hello").resolve()
    assert task.instruction.startswith("Create /app/hello.txt")
    assert task.config.verifier.timeout_sec == 120.0
    assert task.config.agent.timeout_sec == 300.0
    assert task.config.environment.memory_mb == 1024
    assert task.config.metadata.tags == ["bash"]
    assert task.has_solution
    assert len(task.content_hash) == 64
    # [metadata] is free-form in Harbor: its extra keys are kept without a warning.
    assert task.config.metadata.model_extra == {"author_name": "someone"}
    assert task.warnings == []


def _write(rel: str, text: str) -> Callable[[Path], None]:
    def edit(task: Path) -> None:
        (task / rel).write_text(text)

    return edit


def _remove(rel: str) -> Callable[[Path], None]:
    def edit(task: Path) -> None:
        (task / rel).unlink()

    return edit


def _toml(extra: str) -> Callable[[Path], None]:
    return _write("task.toml", 'version = "1.0"\n' + extra)


# (case id, edit, file the error names, field, words the reason must contain)
BAD_TASKS = [
    ("missing task.toml", _remove("task.toml"), "task.toml", "", ["missing file"]),
    ("missing instruction", _remove("instruction.md"), "instruction.md", "", ["missing file"]),
    ("empty instruction", _write("instruction.md", " \n\n"), "instruction.md", "", ["empty"]),
    ("missing Dockerfile", _remove("environment/Dockerfile"), "environment/Dockerfile", "",
     ["missing file", "docker_image"]),
    ("missing test.sh", _remove("tests/test.sh"), "tests/test.sh", "", ["missing file"]),
    ("bad TOML", _write("task.toml", 'version = "1.0"\n[verifier]\ntimeout_sec = = 3\n'),
     "task.toml", "", ["malformed TOML", "line 3", "column"]),
    ("wrong type", _toml('[verifier]\ntimeout_sec = "abc"\n'), "task.toml",
     "verifier.timeout_sec", ["valid number", "'abc'"]),
    ("timeout zero", _toml("[agent]\ntimeout_sec = 0\n"), "task.toml", "agent.timeout_sec",
     ["greater than 0"]),
    ("timeout negative", _toml("[environment]\nbuild_timeout_sec = -5.0\n"), "task.toml",
     "environment.build_timeout_sec", ["greater than 0"]),
    ("unknown network_mode", _toml('[environment]\nnetwork_mode = "internet"\n'), "task.toml",
     "environment.network_mode", ["'no-network'", "'internet'"]),
    ("allowlist", _toml('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'),
     "task.toml", "environment.network_mode", ["unsupported", "allowlist"]),
    ("allowed_hosts alone", _toml('[environment]\nallowed_hosts = ["pypi.org"]\n'), "task.toml",
     "environment.allowed_hosts", ["unsupported"]),
    ("steps", _toml('[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n'), "task.toml", "steps",
     ["unsupported", "multi-step", "2 steps"]),
    ("gpus", _toml("[environment]\ngpus = 1\n"), "task.toml", "environment.gpus",
     ["unsupported", "GPU"]),
    ("separate verifier", _toml('[verifier]\nenvironment_mode = "separate"\n'), "task.toml",
     "verifier.environment_mode", ["unsupported", "separate"]),
    ("unknown environment_mode", _toml('[verifier]\nenvironment_mode = "elsewhere"\n'),
     "task.toml", "verifier.environment_mode", ["'shared'", "'elsewhere'"]),
    ("allow_internet not bool", _toml('[environment]\nallow_internet = "yes"\n'), "task.toml",
     "environment.allow_internet", ["true or false"]),
    ("tags not a list", _toml('[metadata]\ntags = "a"\n'), "task.toml", "metadata.tags",
     ["valid list"]),
    ("tag not a string", _toml('[metadata]\ntags = ["a", 3]\n'), "task.toml", "metadata.tags[1]",
     ["valid string"]),
    ("section not a table", _toml('verifier = 3\n'), "task.toml", "verifier",
     ["expected a table", "got 3"]),
]


@pytest.mark.parametrize(
    ("edit", "file", "field", "words"),
    [case[1:] for case in BAD_TASKS],
    ids=[case[0] for case in BAD_TASKS],
)
def test_malformed_task_names_file_field_reason(
    tmp_path: Path, edit: Callable[[Path], None], file: str, field: str, words: list[str]
) -> None:
    task = make_task(tmp_path)
    edit(task)
    with pytest.raises(InputError) as info:
        load_task(task)
    err = info.value
    assert Path(err.path) == (task / file).resolve()
    assert err.field == field
    for word in words:
        assert word in err.reason, (word, err.reason)
    assert str(err).startswith(str((task / file).resolve()))
    if field:
        assert f": {field}: " in str(err)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such directory"):
        load_task(tmp_path / "absent")


def test_docker_image_makes_dockerfile_optional(tmp_path: Path) -> None:
    task = make_task(tmp_path, toml='[environment]\ndocker_image = "example/prebuilt:1"\n')
    (task / "environment" / "Dockerfile").unlink()
    loaded = load_task(task)
    assert loaded.config.environment.docker_image == "example/prebuilt:1"


def test_unknown_keys_kept_and_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    toml = GOOD_TOML + '[verifier.extra_table]\nx = 1\n[environment.healthcheck]\ncommand = "true"\n'
    toml = 'source = "somewhere"\n' + toml.replace("[agent]\n", "[agent]\nfancy = true\n")
    task_dir = make_task(tmp_path, toml=toml)
    with caplog.at_level(logging.WARNING, logger="mindforge.tasks.loader"):
        task = load_task(task_dir)
    assert task.config.model_extra == {"source": "somewhere"}
    assert task.config.agent.model_extra == {"fancy": True}
    assert task.config.verifier.model_extra == {"extra_table": {"x": 1}}
    assert task.warnings == [
        "task.toml: unknown key 'source' kept",
        "task.toml: unknown key 'verifier.extra_table' kept",
        "task.toml: unknown key 'agent.fancy' kept",
        "task.toml: unknown key 'environment.healthcheck' kept",
    ]
    logged = [r.getMessage() for r in caplog.records]
    for warning in task.warnings:
        assert any(warning in line and str(task.path) in line for line in logged), warning


@pytest.mark.parametrize(
    ("line", "mode"),
    [("allow_internet = true", NetworkMode.PUBLIC), ("allow_internet = false", NetworkMode.NO_NETWORK)],
)
def test_allow_internet_maps_to_network_mode(tmp_path: Path, line: str, mode: NetworkMode) -> None:
    task = load_task(make_task(tmp_path, toml=f"[environment]\n{line}\n"))
    assert task.config.environment.network_mode == mode
    assert "allow_internet" not in (task.config.environment.model_extra or {})
    assert task.warnings == []


def test_network_mode_wins_over_allow_internet(tmp_path: Path) -> None:
    toml = '[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n'
    task = load_task(make_task(tmp_path, toml=toml))
    assert task.config.environment.network_mode == NetworkMode.NO_NETWORK
    assert any("allow_internet" in w and "ignored" in w for w in task.warnings)


def test_schema_1_4_fields_read(tmp_path: Path) -> None:
    toml = """\
schema_version = "1.4"
artifacts = []
steps = []
[task]
name = "org/hello"
description = "says hi"
keywords = ["demo"]
authors = [{ name = "A", email = "a@example.org" }]
[agent]
user = "agent"
[verifier]
user = "root"
environment_mode = "shared"
env = { FOO = "bar" }
[environment]
network_mode = "public"
workdir = "/app"
env = { LANG = "C.UTF-8" }
[solution]
env = { X = "1" }
"""
    task = load_task(make_task(tmp_path, toml=toml))
    assert task.config.schema_version == "1.4"
    assert task.config.task.name == "org/hello"
    assert task.config.task.keywords == ["demo"]
    assert task.config.environment.network_mode == NetworkMode.PUBLIC
    assert task.config.environment.workdir == "/app"
    assert task.config.verifier.env == {"FOO": "bar"}
    assert task.config.solution.env == {"X": "1"}
    assert task.warnings == []


def test_solution_dir_without_solve_sh_warns(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path)
    (task_dir / "solution" / "solve.sh").unlink()
    task = load_task(task_dir)
    assert not task.has_solution
    assert any("solution/solve.sh" in w for w in task.warnings)


def test_find_and_load_tasks(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    for name in ("b-task", "a-task", "c-task"):
        make_task(pool, name)
    (pool / "not-a-task").mkdir()
    (pool / "README.md").write_text("notes")
    assert [p.name for p in find_task_dirs(pool)] == ["a-task", "b-task", "c-task"]
    assert find_task_dirs(pool / "b-task") == [pool / "b-task"]
    single = make_task(tmp_path, "solo")
    tasks = load_tasks([pool, single])
    assert [t.id for t in tasks] == ["a-task", "b-task", "c-task", "solo"]
    with pytest.raises(InputError, match="no task directories"):
        find_task_dirs(pool / "not-a-task")


def test_load_tasks_rejects_duplicate_ids(tmp_path: Path) -> None:
    make_task(tmp_path / "one", "same")
    make_task(tmp_path / "two", "same")
    with pytest.raises(InputError, match="duplicate task id 'same'"):
        load_tasks([tmp_path / "one", tmp_path / "two"])


def test_load_tasks_stops_at_first_bad_task(tmp_path: Path) -> None:
    make_task(tmp_path / "pool", "good")
    bad = make_task(tmp_path / "pool", "zbad")
    (bad / "tests" / "test.sh").unlink()
    with pytest.raises(InputError) as info:
        load_tasks([tmp_path / "pool"])
    assert info.value.path.endswith("zbad/tests/test.sh")


# --------------------------------------------------------------------------- hashing


def test_hash_is_stable_across_copies_and_ignores_pycache(tmp_path: Path) -> None:
    task = make_task(tmp_path / "a")
    first = content_hash(task)
    assert first == content_hash(task)
    copy = tmp_path / "b" / "hello"
    shutil.copytree(task, copy)
    (copy / "tests" / "__pycache__").mkdir()
    (copy / "tests" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x00junk")
    (copy / "tests" / "stray.pyc").write_bytes(b"junk")
    (copy / "tests" / "test.sh").chmod(0o700)
    assert content_hash(copy) == first
    assert load_task(copy).content_hash == first


@pytest.mark.parametrize(
    "change",
    [
        lambda t: (t / "instruction.md").write_text("Something else.\n"),
        lambda t: (t / "tests" / "test_outputs.py").write_text("def test_x():\n    assert 0\n"),
        lambda t: (t / "environment" / "data.txt").write_text(""),
        lambda t: (t / "tests" / "test_outputs.py").rename(t / "tests" / "test_other.py"),
        lambda t: (t / "solution" / "solve.sh").unlink(),
    ],
    ids=["edit instruction", "edit test", "add empty file", "rename file", "delete file"],
)
def test_hash_changes_when_any_file_changes(tmp_path: Path, change: Callable[[Path], object]) -> None:
    task = make_task(tmp_path)
    before = content_hash(task)
    change(task)
    assert content_hash(task) != before


def test_hash_separates_file_boundaries(tmp_path: Path) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "a").write_text("xy")
    (one / "b").write_text("z")
    (two / "a").write_text("x")
    (two / "b").write_text("yz")
    assert content_hash(one) != content_hash(two)


def test_hash_known_value(tmp_path: Path) -> None:
    """The byte layout is fixed (path, NUL, kind, 8-byte size, bytes) so hashes match across hosts."""
    import hashlib

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_bytes(b"abc")
    (tmp_path / "a.txt").write_bytes(b"")
    expected = hashlib.sha256(
        b"a.txt\0F" + (0).to_bytes(8, "big") + b"sub/f.txt\0F" + (3).to_bytes(8, "big") + b"abc"
    ).hexdigest()
    assert content_hash(tmp_path) == expected


FAMILY_TOML = GOOD_TOML.replace('tags = ["bash"]', 'tags = ["bash"]\nfamily = "greeters"')
MARKED = (
    "FROM ubuntu:24.04\nWORKDIR /app\n"
    "# mindforge: instance steps below run when the sandbox starts (one image per family)\n"
    "COPY gen.py /tmp/gen.py\nRUN python3 /tmp/gen.py /app \\\n    && rm /tmp/gen.py\n"
)


def _instance(root: Path, name: str, gen: str, toml: str = FAMILY_TOML) -> Path:
    task = make_task(root, name, toml)
    (task / "environment" / "Dockerfile").write_text(MARKED)
    (task / "environment" / "gen.py").write_text(gen)
    return task


def test_marker_splits_the_dockerfile_into_shared_image_and_instance_steps(tmp_path: Path) -> None:
    one = load_task(_instance(tmp_path, "one", "print(1)\n"))
    two = load_task(_instance(tmp_path, "two", "print(2)\n"))
    assert [(s.kind, s.line) for s in one.instance_steps] == [("copy", 4), ("run", 5)]
    assert one.instance_steps[1].command == "python3 /tmp/gen.py /app  && rm /tmp/gen.py"
    assert one.shared_dockerfile == "FROM ubuntu:24.04\nWORKDIR /app\n"
    # two instances of one family: one shared image (their own files differ, the head does not)
    assert one.content_hash != two.content_hash and one.image_tag != two.image_tag
    assert one.shared_image_tag == two.shared_image_tag == one.run_image
    assert one.shared_image_tag == f"mindforge-family/greeters:{one.env_hash[:16]}"
    # without [metadata] family the task id names the image
    alone = load_task(_instance(tmp_path, "alone", "print(3)\n", GOOD_TOML))
    assert alone.shared_image_tag == f"mindforge-family/alone:{alone.env_hash[:16]}"


def test_task_without_marker_runs_its_own_image(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    assert task.instance_steps == () and task.shared_image_tag is None and task.run_image == task.image_tag


def test_marker_followed_by_other_instructions_is_an_input_error(tmp_path: Path) -> None:
    task = _instance(tmp_path, "bad", "print(1)\n")
    (task / "environment" / "Dockerfile").write_text(MARKED + "ENV LATE=1\n")
    with pytest.raises(InputError) as err:
        load_task(task)
    assert err.value.path.endswith("environment/Dockerfile") and err.value.field == "line 7"
    assert "only COPY and RUN" in err.value.reason
