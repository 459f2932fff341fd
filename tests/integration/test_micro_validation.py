"""The ``tasks/micro`` suite on the real Docker engine.

Covers: a sample of four tasks across categories validates (build, oracle twice, nop); the
verifiers accept common equivalent answers (``wc -l FILE`` output, a missing trailing newline,
an archive made from the absolute path, ``git checkout -b``) and reject near misses. The whole
suite takes minutes to validate, so it is validated with ``mindforge tasks validate tasks/micro``
by hand, not here.
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mindforge.agent.base import Agent, AgentOutcome
from mindforge.agent.shell import PersistentShell
from mindforge.tasks.loader import load_task
from mindforge.trials.run import run_trial
from mindforge.trials.validate import Verdict, validate_task
from tests.conftest import BUNDLED_TASKS

pytestmark = pytest.mark.docker

MICRO = BUNDLED_TASKS / "micro"
#: one task each from files, counting, archives and git
SAMPLE = ["make-directory", "count-lines", "extract-tarball", "git-commit-file"]


class _CommandAgent(Agent):
    """Runs one fixed shell command in the task's working directory, as a model's bash action runs."""

    name = "command"

    def __init__(self, command: str) -> None:
        self.command = command

    def run(self, task, sandbox, *, timeout_sec, artifact_dir: Path) -> AgentOutcome:
        PersistentShell(sandbox, "/app").run(self.command, timeout_sec=min(timeout_sec, 30), max_output_bytes=4096)
        return AgentOutcome()


def test_sample_of_the_micro_suite_is_valid(docker_engine, image_map, settings):
    tasks = [load_task(MICRO / name) for name in SAMPLE]
    assert len({t.config.metadata.category for t in tasks}) == len(SAMPLE)
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda t: validate_task(t, docker_engine, artifact_root=settings.artifacts, image_map=image_map), tasks
            )
        )
    assert {r.task_id: r.verdict for r in results} == dict.fromkeys(SAMPLE, Verdict.VALID), [r.reasons for r in results]


@pytest.mark.parametrize(
    ("task_id", "command", "reward"),
    [
        ("count-lines", "wc -l /app/access.log > /app/line_count.txt", 1.0),
        ("count-lines", "echo 136 > /app/line_count.txt", 0.0),
        ("write-hello-file", "printf 'Hello, World!' > hello.txt", 1.0),
        ("replace-word", "sed -i 's/foo/bar/' /app/config.txt", 0.0),
        ("tar-directory", "tar -cf /app/backup.tar /app/docs", 1.0),
        ("git-create-branch", "cd /app/repo && git checkout -b feature", 1.0),
        ("run-script", "/app/bin/report.sh > /app/report.txt", 0.0),
    ],
)
def test_verifiers_accept_equivalent_answers_and_reject_near_misses(
    task_id, command, reward, docker_engine, image_map, settings
):
    rec = run_trial(
        load_task(MICRO / task_id),
        _CommandAgent(command),
        docker_engine,
        run_id="micro-answers",
        trial_id=f"{task_id}.command.{zlib.crc32(command.encode()):08x}",
        artifact_root=settings.artifacts,
        image_map=image_map,
    )
    assert rec.reward == reward, (rec.failure_class, rec.failure_detail)
