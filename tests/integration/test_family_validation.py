"""Every task family's example instance is a valid Harbor task on the real Docker engine.

Each family under ``tasks/families`` renders its ``[example]`` parameters; the instance is
materialised as a task directory and validated as ``mindforge tasks validate`` does
(:func:`mindforge.tasks.validate.validate_task`: it builds, the reference solution passes
twice, the nop agent fails).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from mindforge.discovery.families import load_families
from mindforge.discovery.materialise import materialise
from mindforge.tasks.loader import load_task
from mindforge.tasks.validate import Verdict, validate_task

pytestmark = pytest.mark.docker


def test_every_family_example_validates(docker_engine, image_map, settings, tmp_path):
    families = load_families()
    tasks = [load_task(materialise(f.render(f.example), tmp_path)) for f in families.values()]
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda t: validate_task(t, docker_engine, artifact_root=settings.artifacts, image_map=image_map), tasks
            )
        )
    verdicts = {r.task_id: (r.verdict, r.oracle_rewards, r.nop_reward) for r in results}
    bad = {k: v for k, v in verdicts.items() if v[0] != Verdict.VALID}
    assert not bad, {r.task_id: r.reasons for r in results if r.verdict != Verdict.VALID}
    assert len(results) == len(families) >= 12
