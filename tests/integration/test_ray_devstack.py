"""A worker joins the Ray head that ``mindforge dev up`` started (README's test command starts it).

The dev head always runs with Ray's token authentication; a driver process that has
not imported Ray yet must send this machine's token (``workers.main.init_ray``), or the
head refuses it. Each check runs in a fresh interpreter, as a worker would, with the
repository's default settings (where ``dev up`` wrote the head's address).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

JOIN = """
from mindforge.settings import get_settings
from workers.main import init_ray
address = get_settings().ray_address
assert address != "local", "mindforge dev up wrote no Ray head address"
init_ray(address)
import ray
print("nodes", len([n for n in ray.nodes() if n["Alive"]]))
print("sum", ray.get(ray.remote(num_cpus=0)(lambda: 40 + 2).remote()))
"""


def _driver_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINDFORGE_", "RAY_"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def test_a_worker_process_joins_the_dev_head_with_the_machines_token() -> None:
    out = subprocess.run(
        [sys.executable, "-c", JOIN], cwd=REPO, env=_driver_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sum 42" in out.stdout and "nodes " in out.stdout


def test_a_driver_without_the_token_is_refused() -> None:
    """The head really checks the token: the same driver with authentication off fails."""
    out = subprocess.run(
        [sys.executable, "-c", JOIN], cwd=REPO, env=_driver_env(RAY_AUTH_MODE="disabled"),
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode != 0 and "sum 42" not in out.stdout
    assert "InvalidAuthToken" in out.stderr, out.stderr[-3000:]
