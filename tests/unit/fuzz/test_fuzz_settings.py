"""Fuzzing settings.toml and MINDFORGE_* variables: a bad value is an InputError naming file (or variable) and key."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mindforge.errors import InputError
from mindforge.settings import Settings, get_settings
from tests.unit.fuzz.strategies import FUZZ, HUGE, Mutation, dump_toml, garbage_bytes, mutations, non_utf8

#: a settings.toml with every setting
FULL_SETTINGS = {
    "data_dir": "/tmp/mf", "artifact_root": "/tmp/mf/artifacts", "database_url": "sqlite:///x.db",
    "base_image": "mindforge/base:bookworm", "image_map_file": "/tmp/map.toml", "image_map_enabled": True,
    "docker_pids_limit": 256, "temporal_address": "localhost:7233", "temporal_namespace": "default",
    "temporal_ui_url": "http://localhost:8233", "ray_address": "local", "policy_url": "http://127.0.0.1:8000/v1",
}  # fmt: skip


@contextmanager
def _settings_file(data: bytes, env: dict[str, str] | None = None) -> Iterator[Path]:
    """A data dir whose settings.toml holds ``data``, as the only MINDFORGE_* environment."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        for key in [k for k in os.environ if k.startswith("MINDFORGE_")]:
            del os.environ[key]
        os.environ["MINDFORGE_DATA_DIR"] = tmp
        os.environ.update(env or {})
        (Path(tmp) / "settings.toml").write_bytes(data)
        get_settings.cache_clear()
        try:
            yield Path(tmp) / "settings.toml"
        finally:
            os.environ.clear()
            os.environ.update(saved)
            get_settings.cache_clear()


def _load(data: bytes, env: dict[str, str] | None = None) -> tuple[Path, InputError | None]:
    with _settings_file(data, env) as path:
        try:
            get_settings()
        except InputError as exc:
            return path, exc
        return path, None


def test_the_full_settings_file_loads() -> None:
    with _settings_file(dump_toml(FULL_SETTINGS) or b""):
        assert get_settings().docker_pids_limit == 256 and isinstance(get_settings(), Settings)


@FUZZ
@given(garbage_bytes)
@example(b"docker_pids_limit = " + b"[" * 5_000)
@example(b"\xff")
def test_garbage_settings_file_is_an_input_error(data: bytes) -> None:
    path, error = _load(data)
    if error is not None:
        assert error.path == str(path) and error.reason, error


@FUZZ
@given(mutations(FULL_SETTINGS))
@example(Mutation("retype", ("docker_pids_limit",), {"docker_pids_limit": -1}))
@example(Mutation("retype", ("docker_pids_limit",), {"docker_pids_limit": "many"}))
@example(Mutation("unknown_key", (), {"image_map_enable": False}))
@example(Mutation("huge", ("image_map_enabled",), {"image_map_enabled": HUGE}))
def test_one_mutated_setting_is_refused_by_key(mutation: Mutation) -> None:
    data = dump_toml(mutation.document)
    if data is None:
        return
    path, error = _load(data)
    if error is not None:
        assert error.path == str(path) and error.field and error.field in str(error), error
        assert len(str(error)) < 1_000, "the message echoes the whole value"


@FUZZ
@given(non_utf8(dump_toml(FULL_SETTINGS) or b""))
def test_non_utf8_settings_file_is_refused(data: bytes) -> None:
    path, error = _load(data)
    assert error is not None and error.path == str(path) and "not UTF-8" in error.reason


@FUZZ
@given(st.sampled_from(["DOCKER_PIDS_LIMIT", "IMAGE_MAP_ENABLED", "DATA_DIR"]), st.text(max_size=40))
@example("DOCKER_PIDS_LIMIT", "0")
def test_a_bad_environment_variable_is_named(name: str, value: str) -> None:
    if "\0" in value:  # the environment cannot hold it
        return
    _path, error = _load(b"", {f"MINDFORGE_{name}": value})
    if error is not None:
        assert error.field == f"MINDFORGE_{name}" and error.reason, error
