"""Task validation and the verifier on the real Docker engine.

Covers: every bundled task validates; broken, trivially passing and flaky fixtures are
classified; an agent that fakes the reward or plants files in /tests changes nothing; a
public-style Harbor task (FROM a registry base, apt-get and pip install in its Dockerfile)
builds through the image map and scores 0 under nop.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mindforge.agent.base import Agent, AgentOutcome
from mindforge.agent.simple import NopAgent
from mindforge.tasks.loader import find_task_dirs, load_task
from mindforge.trials.run import run_trial
from mindforge.trials.validate import Verdict, validate_task
from tests.conftest import BUNDLED_TASKS, FIXTURE_TASKS

pytestmark = pytest.mark.docker


def _validate(path: Path, engine, image_map, settings, **kw):
    return validate_task(load_task(path), engine, artifact_root=settings.artifacts, image_map=image_map, **kw)


@pytest.mark.slow
def test_all_bundled_tasks_are_valid(docker_engine, image_map, settings):
    dirs = find_task_dirs(BUNDLED_TASKS)
    assert len(dirs) >= 12
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda d: _validate(d, docker_engine, image_map, settings), dirs))
    bad = {r.task_id: (r.verdict, r.reasons) for r in results if r.verdict != Verdict.VALID}
    assert not bad


@pytest.mark.parametrize(
    ("name", "verdict"), [("broken", Verdict.BROKEN), ("trivially_passing", Verdict.TRIVIALLY_PASSING)]
)
def test_defective_fixtures_are_classified(name, verdict, docker_engine, image_map, settings):
    result = _validate(FIXTURE_TASKS / name, docker_engine, image_map, settings)
    assert result.verdict == verdict, result.reasons


@pytest.mark.slow
def test_flaky_fixture_is_classified(docker_engine, image_map, settings):
    """The flaky fixture's verdict is a fair coin per run, so two oracle runs disagree with
    probability 1/2; with 12 oracle runs all agreeing has probability 2 * 2**-12 (0.05%)."""
    result = _validate(FIXTURE_TASKS / "flaky", docker_engine, image_map, settings, oracle_runs=12)
    assert result.verdict == Verdict.FLAKY, result.reasons


class _CheatAgent(Agent):
    """Writes a fake reward and plants a passing test.sh where the verifier will look."""

    name = "cheat"

    def run(self, task, sandbox, *, timeout_sec, artifact_dir):
        sandbox.exec(
            "mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt && "
            "printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh && touch /tests/planted",
            timeout_sec=30,
        )
        return AgentOutcome()


def test_faked_reward_and_planted_tests_do_not_count(docker_engine, image_map, settings):
    task = load_task(FIXTURE_TASKS / "anti_cheat")
    rec = run_trial(
        task, _CheatAgent(), docker_engine, run_id="anti-cheat", trial_id="cheat.0", artifact_root=settings.artifacts,
        image_map=image_map,
    )
    assert rec.reward == 0.0, rec
    nop = run_trial(
        task, NopAgent(), docker_engine, run_id="anti-cheat", trial_id="nop.0", artifact_root=settings.artifacts,
        image_map=image_map,
    )
    assert nop.reward == rec.reward


def test_public_style_task_runs_through_the_image_map(docker_engine, image_map, settings):
    task = load_task(FIXTURE_TASKS / "public_style")
    assert not task.has_solution
    rec = run_trial(
        task, NopAgent(), docker_engine, run_id="public", trial_id="nop.0", artifact_root=settings.artifacts,
        image_map=image_map,
    )
    assert rec.reward == 0.0, (rec.failure_class, rec.failure_detail)
    result = _validate(FIXTURE_TASKS / "public_style", docker_engine, image_map, settings)
    assert result.verdict == Verdict.NO_REFERENCE
