"""Run one trial end to end: build, start, agent phase, verifier, teardown.

For a task with instance steps (a family instance) the build is its family's shared image
and the start runs the steps: ``start_sec`` includes them, ``instance_steps_sec`` says how
long they took, ``instance.log`` holds their output, and a failed step is
``env_build_failed`` as a failed build is.

The runner is the single place that turns phases into a :class:`TrialRecord`; it is used
by ``mindforge tasks run|validate``, ``mindforge eval`` and, inside Ray tasks, by the
lineage activities. It never raises for anything that happened inside the trial: every
failure becomes a failure class in the record. Containers are always removed.

A trial starts from an empty directory (files an earlier, fault-ended run of the same id
left are removed first), and a trial whose files could not all be written (the artifact
filesystem is full or failing) is an ``infra_error`` with no reward, so no half-written
transcript or verifier output is ever read as a finished trial's.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import time
import traceback
from pathlib import Path

from mindforge.agent.base import Agent, AgentOutcome
from mindforge.errors import InfraError
from mindforge.sandbox.docker import (
    BuildFailed,
    BuildTimeout,
    DockerEngine,
    SandboxStartError,
)
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task
from mindforge.trials.record import (
    FailureClass,
    LimitFired,
    PhaseTimings,
    TrialRecord,
    utcnow,
)
from mindforge.trials.verify import run_verifier


def trial_dir(artifact_root: Path, run_id: str, trial_id: str) -> Path:
    """Artifact directory of one trial: ``<root>/runs/<run_id>/<trial_id>``."""
    return artifact_root / "runs" / _safe(run_id) / _safe(trial_id)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-@" else "_" for c in name)


def run_trial(
    task: Task,
    agent: Agent,
    engine: DockerEngine,
    *,
    run_id: str,
    trial_id: str,
    artifact_root: Path,
    attempt: int = 0,
    image_map: ImageMap | None = None,
) -> TrialRecord:
    """Run ``agent`` on ``task`` in a fresh sandbox and verify the result.

    Args:
        task: the loaded task.
        agent: oracle, nop or the model-driven agent.
        engine: the Docker engine wrapper (builds are cached by content hash).
        run_id / trial_id: identity; written to container labels and the record.
        artifact_root: root of big files; this trial's go to :func:`trial_dir`.
        attempt: 0-based attempt index within its group.
        image_map: rewrites public ``FROM`` images to local ones, or None.

    Returns:
        the trial record (also written as ``record.json`` in the trial's directory).
    """
    out = trial_dir(artifact_root, run_id, trial_id)
    rec = TrialRecord(
        trial_id=trial_id,
        run_id=run_id,
        task_id=task.id,
        task_hash=task.content_hash,
        agent=agent.name,
        contract_hash=agent.contract_hash,
        adapter=agent.adapter,
        attempt=attempt,
        artifacts={"dir": str(out)},
    )
    timings = PhaseTimings()
    try:
        _fresh_dir(out)
        _run_phases(task, agent, engine, rec, timings, out, image_map)
    except InfraError as exc:
        _fail(rec, FailureClass.INFRA_ERROR, str(exc))
    except OSError as exc:
        if not is_storage_failure(exc):
            _unexpected(rec, out, exc)
        else:
            _fail(rec, FailureClass.INFRA_ERROR, storage_failure(exc))
    except Exception as exc:  # noqa: BLE001 - the record must say what happened, whatever it was
        _unexpected(rec, out, exc)
    rec.timings = timings
    rec.finished_at = utcnow()
    try:
        (out / "record.json").write_text(rec.model_dump_json(indent=2), encoding="utf-8")
    except OSError as exc:
        # the store keeps the record, but the trial's files are incomplete: it has no reward
        _fail(rec, FailureClass.INFRA_ERROR, storage_failure(exc))
    return rec


#: errno values that say the artifact filesystem, not the trial, failed
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def is_storage_failure(exc: BaseException) -> bool:
    """True when ``exc`` is an ``OSError`` of a full, read-only or failing filesystem."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def storage_failure(exc: OSError) -> str:
    """The failure detail of a trial whose files could not be written, naming the path and reason."""
    where = f" writing {exc.filename}" if exc.filename else ""
    return f"the artifact filesystem failed{where}: {exc.strerror or exc} (errno {exc.errno}); the trial has no reward"


def _unexpected(rec: TrialRecord, out: Path, exc: Exception) -> None:
    """Record an error no phase expected: an ``infra_error``, its traceback in ``error.txt`` if it can be written."""
    with contextlib.suppress(OSError):
        (out / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    _fail(rec, FailureClass.INFRA_ERROR, f"{type(exc).__name__}: {exc}")


def _fresh_dir(out: Path) -> None:
    """Empty the trial's directory (an earlier, fault-ended run may have left files) and make its parts."""
    if out.exists():
        shutil.rmtree(out)
    (out / "agent").mkdir(parents=True)
    (out / "verifier").mkdir(parents=True)


def _fail(rec: TrialRecord, cls: FailureClass, detail: str, limit: LimitFired | None = None) -> None:
    rec.reward = None
    rec.failure_class = cls
    rec.failure_detail = detail[:2000]
    if limit is not None:
        rec.limit_fired = limit


def _run_phases(
    task: Task,
    agent: Agent,
    engine: DockerEngine,
    rec: TrialRecord,
    timings: PhaseTimings,
    out: Path,
    image_map: ImageMap | None,
) -> None:
    t0 = time.monotonic()
    build_log = out / "build.log"
    try:
        engine.build_image(task, image_map=image_map, log_path=build_log)
    except BuildTimeout as exc:
        timings.build_sec = time.monotonic() - t0
        rec.artifacts["build_log"] = str(build_log)
        return _fail(rec, FailureClass.ENV_BUILD_FAILED, str(exc), LimitFired.BUILD_TIMEOUT)
    except BuildFailed as exc:
        timings.build_sec = time.monotonic() - t0
        rec.artifacts["build_log"] = str(build_log)
        return _fail(rec, FailureClass.ENV_BUILD_FAILED, str(exc))
    timings.build_sec = time.monotonic() - t0

    t0 = time.monotonic()
    steps_log = out / "instance.log" if task.instance_steps else None
    if steps_log is not None:
        rec.artifacts["instance_log"] = str(steps_log)
    try:
        sandbox = engine.start(task, run_id=rec.run_id, trial_id=rec.trial_id, log_path=steps_log)
    except SandboxStartError as exc:
        timings.start_sec = time.monotonic() - t0
        return _fail(rec, FailureClass.ENV_START_FAILED, str(exc))
    except BuildFailed as exc:  # an instance step failed: the environment did not build
        timings.start_sec = timings.instance_steps_sec = time.monotonic() - t0
        limit = LimitFired.BUILD_TIMEOUT if isinstance(exc, BuildTimeout) else None
        return _fail(rec, FailureClass.ENV_BUILD_FAILED, str(exc), limit)
    timings.start_sec = time.monotonic() - t0
    timings.instance_steps_sec = sandbox.instance_steps_sec
    try:
        outcome = _agent_phase(task, agent, sandbox, rec, timings, out)
        if outcome is None:
            return
        t0 = time.monotonic()
        result = run_verifier(task, sandbox, log_dir=out / "verifier")
        timings.verify_sec = time.monotonic() - t0
        rec.artifacts["verifier_output"] = str(out / "verifier" / "test-output.txt")
        if result.failure_class is not None:
            return _fail(rec, result.failure_class, result.detail, result.limit_fired)
        rec.reward = result.reward
        rec.reward_details = result.details
        if rec.passed:
            rec.failure_class = None
        elif outcome.failure_class is not None:
            # the agent phase failed (timeout, parse error, ...): that is why it scored below 1
            rec.failure_class = outcome.failure_class
            rec.failure_detail = outcome.failure_detail
        else:
            rec.failure_class = FailureClass.TASK_FAILED
            rec.failure_detail = f"verifier reward {result.reward:g}"
        if result.limit_fired is not None:  # the pids limit: the verifier ran, short of processes
            rec.limit_fired = result.limit_fired
            rec.failure_detail = f"{rec.failure_detail}; {result.detail}"[:2000]
    finally:
        timings.teardown_sec = sandbox.close()


def _agent_phase(
    task: Task, agent: Agent, sandbox, rec: TrialRecord, timings: PhaseTimings, out: Path
) -> AgentOutcome | None:
    """Run the agent; returns None when the trial must stop here (infra failure)."""
    t0 = time.monotonic()
    try:
        outcome = agent.run(task, sandbox, timeout_sec=task.config.agent.timeout_sec, artifact_dir=out / "agent")
    except InfraError as exc:
        timings.agent_sec = time.monotonic() - t0
        _fail(rec, FailureClass.INFRA_ERROR, str(exc))
        return None
    except Exception as exc:  # noqa: BLE001 - an agent bug is the agent's failure, not the runner's
        timings.agent_sec = time.monotonic() - t0
        if is_storage_failure(exc):  # the transcript could not be written: the filesystem's fault
            raise
        with contextlib.suppress(OSError):
            (out / "agent" / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        outcome = AgentOutcome(failure_class=FailureClass.AGENT_ERROR, failure_detail=f"{type(exc).__name__}: {exc}")
    timings.agent_sec = time.monotonic() - t0
    if outcome.failure_class == FailureClass.ENDPOINT_ERROR:
        # the policy endpoint failed (no answer, 5xx, adapter not served): no reward, and the
        # verifier does not run, so an endpoint outage is never scored as the model's 0
        rec.prompt_tokens, rec.completion_tokens, rec.num_turns = (
            outcome.prompt_tokens, outcome.completion_tokens, outcome.num_turns
        )
        rec.artifacts.update(outcome.artifacts)
        _fail(rec, FailureClass.ENDPOINT_ERROR, outcome.failure_detail)
        return None
    rec.prompt_tokens = outcome.prompt_tokens
    rec.completion_tokens = outcome.completion_tokens
    rec.num_turns = outcome.num_turns
    rec.limit_fired = outcome.limit_fired
    rec.artifacts.update(outcome.artifacts)
    rec.experience_entries = list(outcome.experience_entries)
    if outcome.failure_class is not None:
        rec.failure_class = outcome.failure_class
        rec.failure_detail = outcome.failure_detail
    return outcome


def write_records(records: list[TrialRecord], path: Path) -> None:
    """Write trial records as a JSON list (for ``--json`` output files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.model_dump(mode="json") for r in records], indent=2), encoding="utf-8")


def open_engine(settings) -> tuple[DockerEngine, ImageMap | None]:
    """The Docker engine (orphans reaped on start-up) and the image map, if it is on.

    Args:
        settings: :class:`mindforge.settings.Settings`.

    Returns:
        (engine, image map or None when ``image_map_enabled`` is false).

    Raises:
        InfraError: no Docker engine answers.
        InputError: the image map file is malformed.
    """
    from mindforge.tasks.image_map import default_image_map

    engine = DockerEngine.from_settings(settings)
    return engine, (default_image_map(settings) if settings.image_map_enabled else None)
