"""The artifact filesystem fills while trials run: the trials it cut short are faults, with the reason.

The sandbox worker's artifact root is a small tmpfs mounted for the test (root only).
At a seeded moment after the policy's second request a ballast file fills it; a few
seconds later the ballast is deleted (an operator freeing space). A trial whose files
could not all be written is an ``infra_error`` naming the path and ``No space left on
device`` (:func:`mindforge.trials.run.storage_failure`), stored as an infrastructure
attempt, and run again from an empty directory once there is room; the store (SQLite,
elsewhere) stays whole. Afterwards every stored trial's ``record.json`` and transcript
parse: nothing half-written is left where a later reader looks. SCRIPTED POLICY behind
the real HTTP API; Temporal, Ray, Docker and SQLite are real.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import trials
from mindforge.store.infra_attempts import list_infra_attempts
from tests.faults.lineage_faults import (
    CONTRACT,
    TASKS,
    assert_nothing_lost,
    fault_counts,
    fault_seeds,
    fault_spec,
    record_result,
    recovery_sec,
    run_with_fault,
    slow_finish_script,
    wait_for_requests,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.temporal,
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a size-limited tmpfs needs root (CI runs as root)"),
]

#: the artifact filesystem's size, and how long it stays full (seconds)
SIZE = "32m"
FULL_SEC = 5.0


def fill(root: Path) -> Path:
    """Write a ballast file under ``root`` until the filesystem refuses more; returns its path."""
    ballast = root / "ballast"
    chunk = b"\0" * (1 << 20)
    with ballast.open("wb") as fh:
        try:
            while True:
                fh.write(chunk)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return ballast


async def fill_for_a_while(base_url: str, root: Path, rng: random.Random, filled: list[datetime]) -> None:
    """Fill ``root`` a seeded moment after the policy's second request; free it ``FULL_SEC`` later."""
    await wait_for_requests(base_url, 2)
    await asyncio.sleep(rng.uniform(0.0, 1.0))
    ballast = await asyncio.to_thread(fill, root)
    filled.append(datetime.now(UTC))
    await asyncio.sleep(FULL_SEC)
    ballast.unlink()


@pytest.fixture
def small_artifacts(tmp_path):
    """A ``SIZE`` tmpfs mounted at ``tmp_path/artifacts``, unmounted afterwards."""
    root = tmp_path / "artifacts"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)], check=True)
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def _readable(path: Path) -> None:
    """``path`` parses: JSON, or JSON lines for ``*.jsonl``."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for line in text.splitlines():
            json.loads(line)
    else:
        json.loads(text)


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_full_artifact_disk_loses_no_trial_and_leaves_nothing_half_written(
    temporal_env, ray_cluster, settings, small_artifacts, seed
) -> None:
    env, _address, loop = temporal_env
    name = f"disk-full-{seed}"
    filled: list[datetime] = []
    on_small_disk = settings.model_copy(update={"artifact_root": small_artifacts})
    script = slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=2.0)
    with start_scripted_policy(script) as policy:
        spec = fault_spec(name, policy.base_url)

        fault = fill_for_a_while(policy.base_url, small_artifacts, random.Random(seed), filled)
        # a lineage that fails leaves the ballast: the fixture's unmount drops it
        loop.run_until_complete(run_with_fault(env, settings, spec, fault, worker_settings=on_small_disk))
    counts = fault_counts(settings, name, planned=len(TASKS) * 2)
    assert filled, "the disk was never filled"
    record_result("artifact disk full", seed, counts, recovery_sec(settings, name, filled[0]))
    assert_nothing_lost(counts)
    with se.session_scope(se.init_db(settings.db_url)) as s:
        faults = list_infra_attempts(session=s, lineage_id=name)
        stored = [r.to_record() for r in trials.list_trials(session=s, lineage_id=name)]
    assert faults, "no trial met the full disk"
    assert any("No space left on device" in f.failure_detail for f in faults), [f.failure_detail for f in faults]
    for rec in stored:  # what a later reader opens: the record and the transcript, whole
        out = Path(rec.artifacts["dir"])
        _readable(out / "record.json")
        if "transcript" in rec.artifacts:
            _readable(Path(rec.artifacts["transcript"]))
