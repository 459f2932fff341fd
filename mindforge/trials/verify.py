"""The verifier phase: copy ``tests/`` in after the agent, run ``test.sh``, read the reward.

Verifier contract (Terminal-Bench 2 / Harbor, see docs/tasks.md): ``tests/`` is copied to
``/tests`` only after the agent has finished, ``bash /tests/test.sh`` runs with
``/logs/verifier/`` present, and the reward is read from ``/logs/verifier/reward.txt`` (a
number in 0..1) or ``reward.json`` (named sub-scores). Both directories are recreated
empty first, so nothing the agent left there counts. A missing or unparsable reward is a
verifier error, never a silent 0. When the verifier does not give the full reward, the
sandbox's pids limit is checked (:mod:`mindforge.sandbox.pids`): processes the agent left
behind may have kept test.sh's commands from starting, and the result then says so.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from pydantic import BaseModel, Field

from mindforge.sandbox.base import ExecResult, Sandbox
from mindforge.sandbox.pids import fork_failure_line
from mindforge.tasks.model import Task
from mindforge.trials.record import FailureClass, LimitFired

TESTS_DIR = "/tests"
VERIFIER_LOG_DIR = "/logs/verifier"
REWARD_TXT = f"{VERIFIER_LOG_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_LOG_DIR}/reward.json"


class RewardError(ValueError):
    """The reward file is missing, not a number, NaN or outside [0, 1]."""


class VerifierResult(BaseModel):
    """Outcome of one verifier run.

    Attributes:
        reward: the reward in [0, 1], or None on a verifier error or timeout.
        details: named sub-scores from ``reward.json`` (empty for ``reward.txt``).
        failure_class: ``verifier_error`` / ``verifier_timeout`` or None.
        detail: evidence for the failure class or the pids limit (one line).
        limit_fired: ``pids_limit`` when the sandbox's pids limit fired (whatever the
            reward), else ``verifier_timeout`` when the verifier ran out of time.
        exit_code: ``test.sh``'s exit status (None on timeout).
        duration_sec: wall time of the verifier phase, in seconds.
    """

    reward: float | None = None
    details: dict[str, float] = Field(default_factory=dict)
    failure_class: FailureClass | None = None
    detail: str = ""
    limit_fired: LimitFired | None = None
    exit_code: int | None = None
    duration_sec: float = 0.0


def parse_reward_txt(text: bytes) -> float:
    """Parse ``reward.txt``: one number in [0, 1].

    Raises:
        RewardError: empty, not a number, NaN/inf or out of range.
    """
    raw = text.decode("utf-8", errors="replace").strip()
    if not raw:
        raise RewardError("reward.txt is empty")
    try:
        value = float(raw)
    except ValueError:
        raise RewardError(f"reward.txt is not a number: {raw[:80]!r}") from None
    return _check_range(value, "reward.txt")


def parse_reward_json(text: bytes) -> tuple[float, dict[str, float]]:
    """Parse ``reward.json``: an object of named numbers in [0, 1].

    The reward is the ``reward`` key when present, else the only value.

    Returns:
        (reward, sub-scores)

    Raises:
        RewardError: not an object of numbers, ambiguous, NaN or out of range.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:  # not JSON, not UTF-8/16/32, or a number past Python's digit limit
        raise RewardError(f"reward.json is not valid JSON: {str(exc)[:200]}") from None
    except RecursionError:
        raise RewardError("reward.json is not valid JSON: nested too deep") from None
    if not isinstance(data, dict) or not data:
        raise RewardError("reward.json must be a non-empty object of named scores")
    scores: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RewardError(f"reward.json: {key!r} is not a number")
        scores[key] = _check_range(float(value), f"reward.json: {key!r}")
    if "reward" in scores:
        return scores["reward"], scores
    if len(scores) == 1:
        return next(iter(scores.values())), scores
    raise RewardError("reward.json has several scores and no 'reward' key")


def _check_range(value: float, where: str) -> float:
    if math.isnan(value) or math.isinf(value):
        raise RewardError(f"{where} is {value}")
    if not 0.0 <= value <= 1.0:
        raise RewardError(f"{where} is {value}, outside [0, 1]")
    return value


def run_verifier(task: Task, sandbox: Sandbox, *, log_dir: Path) -> VerifierResult:
    """Run the task's tests in ``sandbox`` after the agent phase.

    Args:
        task: the task (its ``tests/`` and ``[verifier]`` limits).
        sandbox: the trial's sandbox, the agent having finished.
        log_dir: existing directory; ``test-output.txt`` (test.sh stdout+stderr, capped)
            and copies of the reward files are written there.

    Returns:
        the verifier result; when the reward is not 1, ``limit_fired`` is ``pids_limit``
        if the sandbox's pids limit fired, and a verifier that could not run because of
        it scores 0 (:func:`score_pids_exhaustion`). Engine failures propagate as
        ``InfraError``.
    """
    start = time.monotonic()
    prep = sandbox.exec(
        f"rm -rf {TESTS_DIR} {VERIFIER_LOG_DIR} && mkdir -p {TESTS_DIR} {VERIFIER_LOG_DIR}",
        timeout_sec=60,
        user="root",
    )
    if prep.ok:
        result, run = _run_tests(task, sandbox, log_dir)
    else:
        run = prep
        result = VerifierResult(
            failure_class=FailureClass.VERIFIER_ERROR,
            detail=f"could not prepare {TESTS_DIR}: exit {prep.exit_code} {prep.stderr[-200:]}",
        )
    if result.reward is None or result.reward < 1.0:
        _check_pids_limit(result, sandbox, run)
    result = score_pids_exhaustion(result)
    result.duration_sec = time.monotonic() - start
    return result


def score_pids_exhaustion(result: VerifierResult) -> VerifierResult:
    """A verifier that could not run because the sandbox's processes were used up scores 0.

    The agent's leftover processes (a fork bomb, a thousand ``sleep &``) can fill the pids
    limit so that the verifier's own commands - even ``docker exec``'s first process - cannot
    start. Left a ``verifier_error`` or ``verifier_timeout``, such a trial would have no
    reward, so an agent could escape every failing score by exhausting its sandbox. The
    processes are the agent's: a validated task's reference solution and tests pass under
    the same limit, and a task whose own tests fill it fails validation the same way (its
    reference run scores 0). So: reward 0, no verifier failure class, ``limit_fired`` stays
    ``pids_limit`` and ``detail`` says what the verifier could not do.

    Args:
        result: the verifier's result, after the pids check.

    Returns:
        ``result`` unchanged unless it is a verifier error or timeout with the pids limit
        fired; then a result with reward 0.0 carrying the same evidence.
    """
    if result.limit_fired is not LimitFired.PIDS_LIMIT or result.failure_class not in (
        FailureClass.VERIFIER_ERROR,
        FailureClass.VERIFIER_TIMEOUT,
    ):
        return result
    return result.model_copy(
        update={
            "reward": 0.0,
            "failure_class": None,
            "detail": f"the verifier could not run ({result.failure_class.value}: {result.detail})"[:2000],
        }
    )


def _run_tests(task: Task, sandbox: Sandbox, log_dir: Path) -> tuple[VerifierResult, ExecResult]:
    """Copy ``tests/`` in, run test.sh, read the reward; returns the result and test.sh's run."""
    cfg = task.config.verifier
    sandbox.put_dir(task.tests_dir, TESTS_DIR)
    run = sandbox.exec(
        f"bash {TESTS_DIR}/test.sh",
        timeout_sec=cfg.timeout_sec,
        workdir=task.config.environment.workdir,
        env=dict(cfg.env) or None,
        user=cfg.user,
    )
    (log_dir / "test-output.txt").write_text(
        f"$ bash /tests/test.sh  (exit {run.exit_code}, {run.duration_sec:.2f} s)\n"
        f"--- stdout ---\n{run.stdout}\n--- stderr ---\n{run.stderr}\n",
        encoding="utf-8",
    )
    if run.timed_out:
        result = VerifierResult(
            failure_class=FailureClass.VERIFIER_TIMEOUT,
            detail=f"test.sh ran past the verifier timeout of {cfg.timeout_sec:g} s",
            limit_fired=LimitFired.VERIFIER_TIMEOUT,
        )
        return result, run
    result = _read_reward(sandbox, log_dir)
    result.exit_code = run.exit_code
    return result, run


def _check_pids_limit(result: VerifierResult, sandbox: Sandbox, run: ExecResult) -> None:
    """Mark ``result`` with ``pids_limit`` when the sandbox's pids limit fired; evidence goes to ``detail``.

    Evidence (:mod:`mindforge.sandbox.pids`): the sandbox at its limit or with refused
    forks, or a refused fork's message in the verifier command's output.

    Raises:
        InfraError: the engine failed.
    """
    line = fork_failure_line(f"{run.stdout}\n{run.stderr}")
    usage = sandbox.pids_usage()
    if line is None and (usage is None or not usage.fired):
        return
    evidence = ["the sandbox's pids limit fired"]
    if usage is not None:
        evidence.append(usage.describe())
    if line is not None:
        evidence.append(f"verifier output: {line[:200]!r}")
    result.limit_fired = LimitFired.PIDS_LIMIT
    result.detail = "; ".join(part for part in (result.detail, ", ".join(evidence)) if part)


def _read_reward(sandbox: Sandbox, log_dir: Path) -> VerifierResult:
    txt = sandbox.get_file(REWARD_TXT, max_bytes=64 * 1024)
    try:
        if txt is not None:
            (log_dir / "reward.txt").write_bytes(txt)
            return VerifierResult(reward=parse_reward_txt(txt))
        js = sandbox.get_file(REWARD_JSON, max_bytes=1024 * 1024)
        if js is not None:
            (log_dir / "reward.json").write_bytes(js)
            reward, details = parse_reward_json(js)
            return VerifierResult(reward=reward, details=details)
    except RewardError as exc:
        return VerifierResult(failure_class=FailureClass.VERIFIER_ERROR, detail=str(exc))
    return VerifierResult(
        failure_class=FailureClass.VERIFIER_ERROR,
        detail=f"test.sh wrote neither {REWARD_TXT} nor {REWARD_JSON}",
    )
