"""The Docker sandbox on the real engine: exec semantics, limits (the pids limit firing), files, builds, orphan reaping.

Task directories are written into tmp_path (task.toml, instruction.md,
environment/Dockerfile FROM the local base image, tests/test.sh) and loaded with the real
loader. No Docker engine answering, or no base image, fails the tests: the test command
brings the dev stack up first, so a missing part is a real failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import docker
import pytest

from mindforge.errors import InfraError
from mindforge.sandbox import owner
from mindforge.sandbox.docker import BuildFailed, BuildTimeout, DockerEngine
from mindforge.settings import Settings
from mindforge.tasks.image_map import load_image_map
from mindforge.tasks.loader import load_task

pytestmark = pytest.mark.docker

BASE_IMAGE = Settings().base_image
REPO = Path(__file__).resolve().parents[2]


def make_task(root: Path, name: str, dockerfile: str, toml_extra: str = "") -> Path:
    """Write a minimal task directory and return its path."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text(f'version = "1.0"\n{textwrap.dedent(toml_extra)}', encoding="utf-8")
    (task / "instruction.md").write_text("Write hello to /app/out.txt.\n", encoding="utf-8")
    (task / "environment" / "Dockerfile").write_text(textwrap.dedent(dockerfile), encoding="utf-8")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n", encoding="utf-8")
    return task


@pytest.fixture(scope="module")
def engine() -> DockerEngine:
    try:
        eng = DockerEngine()
    except InfraError as exc:
        pytest.fail(f"no Docker engine answers: {exc}", pytrace=False)
    try:
        eng.client.api.inspect_image(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"base image {BASE_IMAGE} missing: run `mindforge dev up`", pytrace=False)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def task(engine, tmp_path_factory):
    # a unique marker keeps the content hash (and so the image tag) fresh per session
    path = make_task(
        tmp_path_factory.mktemp("tasks"),
        "sandbox-basic",
        f"""\
        FROM {BASE_IMAGE}
        WORKDIR /app
        RUN echo {uuid.uuid4().hex} > /etc/mindforge-test-marker
        """,
        '[environment]\nenv = { GREETING = "hello" }\n',
    )
    loaded = load_task(path)
    engine.build_image(loaded)
    yield loaded
    engine.client.api.remove_image(loaded.image_tag, force=True)


@pytest.fixture()
def sandbox(engine, task):
    sb = engine.start(task, run_id="test-run", trial_id=f"sandbox-{uuid.uuid4().hex[:8]}")
    yield sb
    sb.close()


# ------------------------------------------------------------------ exec


def test_exit_code_and_streams_kept(sandbox):
    res = sandbox.exec("echo out; echo err >&2; exit 7", timeout_sec=30)
    assert res.exit_code == 7 and not res.timed_out and not res.ok
    assert res.stdout == "out\n" and res.stderr == "err\n"
    assert (res.stdout_bytes, res.stderr_bytes) == (4, 4)


def test_quick_commands_never_wait_for_the_watchdog(sandbox):
    # a command that ends before the script starts waiting must still end the exec at once
    for i in range(30):
        res = sandbox.exec(f"exit {i % 3}", timeout_sec=20)
        assert res.exit_code == i % 3 and res.duration_sec < 10, res  # far under timeout_sec


def test_container_config_from_task(sandbox):
    res = sandbox.exec("pwd; echo $GREETING", timeout_sec=30)
    assert res.stdout.split() == ["/app", "hello"]
    res = sandbox.exec("whoami; pwd; echo $X", timeout_sec=30, user="nobody", workdir="/tmp", env={"X": "y"})
    assert res.stdout.split() == ["nobody", "/tmp", "y"]


def test_fifty_megabytes_capped_quickly(sandbox):
    total = 50 * 1024 * 1024
    start = time.monotonic()
    res = sandbox.exec(
        f"yes 0123456789 | head -c {total}; echo done >&2; exit 3", timeout_sec=60, max_output_bytes=1000
    )
    elapsed = time.monotonic() - start
    assert elapsed < 30, f"took {elapsed:.1f} s"  # half of timeout_sec: it did not wait for the watchdog
    assert res.exit_code == 3
    assert res.stdout_bytes == total and res.stdout_omitted_bytes == total - 1000
    assert f"[... {total - 1000} bytes omitted ...]" in res.stdout
    assert res.stdout.startswith("0123456789\n") and len(res.stdout) < 1100
    assert res.stderr == "done\n" and res.stderr_omitted_bytes == 0


@pytest.mark.parametrize("truncation", ["head", "tail"])
def test_head_or_tail_truncation_in_the_exec_script(sandbox, truncation):
    res = sandbox.exec("seq 1 5000", timeout_sec=30, max_output_bytes=60, truncation=truncation)
    lines = res.stdout.splitlines()
    assert res.stdout_bytes > 60 and res.stdout_omitted_bytes == res.stdout_bytes - 60
    if truncation == "head":
        assert lines[0] == "1" and lines[-1] == f"[... {res.stdout_omitted_bytes} bytes omitted ...]"
    else:
        assert lines[0] == f"[... {res.stdout_omitted_bytes} bytes omitted ...]" and lines[-1] == "5000"


def test_binary_output_decodes_with_replacement(sandbox):
    res = sandbox.exec(r"printf '\xff\xfe ok \xc3\xa9'; head -c 3000 /dev/urandom >&2", timeout_sec=30)
    assert res.ok
    assert res.stdout == "\ufffd\ufffd ok \u00e9" and res.stdout_bytes == 8
    assert res.stderr_bytes == 3000 and isinstance(res.stderr, str)


def test_backgrounded_server_does_not_hold_exec(sandbox):
    start = time.monotonic()
    res = sandbox.exec("sleep 1000 & python3 -m http.server 8765 & echo started", timeout_sec=60)
    assert time.monotonic() - start < 30  # half of timeout_sec: the background jobs did not hold it
    assert res.ok and res.stdout == "started\n"
    # the server keeps running for later commands (no network needed: loopback)
    probe = sandbox.exec(
        "for i in $(seq 50); do curl -fsS -o /dev/null http://127.0.0.1:8765/ && exit 0; sleep 0.1; done; exit 1",
        timeout_sec=30,
    )
    assert probe.ok, probe.stderr


def test_timeout_kills_process_group(sandbox):
    start = time.monotonic()
    res = sandbox.exec("echo before; sleep 300 & sleep 301; echo never", timeout_sec=1)
    assert time.monotonic() - start < 30  # the sleeps (300 s) did not outlive the timeout
    assert res.timed_out and res.exit_code is None and not res.ok
    assert res.stdout == "before\n"
    left = sandbox.exec("ps -eo args | grep -c '^sleep 30[01]$'", timeout_sec=30)
    assert left.stdout.strip() == "0", "timed-out command's processes still run"


def test_wrapper_failure_reports_engine_exit_code(sandbox):
    res = sandbox.exec("pwd", timeout_sec=30, workdir="/no/such/dir")
    assert res.exit_code not in (0, None)
    assert "no such file" in (res.stdout + res.stderr).lower()


def test_network_off_by_default(sandbox):
    res = sandbox.exec("cat /proc/net/dev", timeout_sec=30)
    interfaces = {line.split(":")[0].strip() for line in res.stdout.splitlines()[2:]}
    assert interfaces == {"lo"}


def test_public_network_mode_has_an_interface(engine, tmp_path):
    path = make_task(tmp_path, "public-net", f"FROM {BASE_IMAGE}\n", '[environment]\nnetwork_mode = "public"\n')
    task = load_task(path)
    engine.build_image(task)
    try:
        with engine.start(task, run_id="test-run", trial_id="public-net") as sb:
            res = sb.exec("cat /proc/net/dev", timeout_sec=30)
            interfaces = {line.split(":")[0].strip() for line in res.stdout.splitlines()[2:]}
            assert "lo" in interfaces and len(interfaces) > 1
    finally:
        engine.client.api.remove_image(task.image_tag, force=True)


def test_resource_limits_and_labels(engine, sandbox):
    info = engine.client.api.inspect_container(sandbox.container_id)
    host = info["HostConfig"]
    assert host["NanoCpus"] == 1_000_000_000 and host["Memory"] == 2048 * 1024 * 1024
    assert host["PidsLimit"] == engine.pids_limit and host["Init"] is True and host["NetworkMode"] == "none"
    labels = info["Config"]["Labels"]
    assert labels[owner.MANAGED] == "true" and labels[owner.RUN_ID] == "test-run"
    assert labels[owner.OWNER_PID] == str(os.getpid())
    assert labels[owner.OWNER_START] == owner.process_start_time(os.getpid())


# ------------------------------------------------------------------ files and teardown


def test_files_round_trip(sandbox, tmp_path):
    sandbox.put_file("/data/deep/x.bin", b"\x00\x01binary", mode=0o600)
    assert sandbox.get_file("/data/deep/x.bin") == b"\x00\x01binary"
    assert sandbox.get_file("/data/missing") is None
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "run.sh").write_text("echo run\n")
    (src / "run.sh").chmod(0o755)
    (src / "sub" / "a.txt").write_text("a\n")
    sandbox.put_dir(src, "/tests")
    res = sandbox.exec(
        "stat -c '%a %U %n' /data/deep/x.bin /tests/run.sh; cat /tests/sub/a.txt; stat -c %a /tmp", timeout_sec=30
    )
    assert res.stdout.split("\n")[:4] == ["600 root /data/deep/x.bin", "755 root /tests/run.sh", "a", "1777"]
    with pytest.raises(InfraError):
        sandbox.get_file("/tests/run.sh", max_bytes=3)


def test_close_removes_and_is_idempotent(engine, task):
    sb = engine.start(task, run_id="test-run", trial_id="close")
    spent = sb.close()
    assert 0 < spent < 30 and sb.close() == 0.0
    with pytest.raises(docker.errors.NotFound):
        engine.client.api.inspect_container(sb.container_id)


# ------------------------------------------------------------------ orphans


def test_killed_owner_container_is_reaped(engine, task, sandbox):
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from mindforge.sandbox.docker import DockerEngine
        from mindforge.tasks.loader import load_task
        sb = DockerEngine(reap=False).start(load_task(Path({str(task.path)!r})), run_id="orphan", trial_id="orphan")
        print(sb.container_id, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        orphan_id = proc.stdout.readline().strip()
        assert orphan_id, "child did not start a sandbox"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert engine.client.api.inspect_container(orphan_id)["State"]["Running"]
    DockerEngine().close()  # start-up reaps orphans of this host
    with pytest.raises(docker.errors.NotFound):
        engine.client.api.inspect_container(orphan_id)
    # this process's own sandbox has a live owner: kept
    assert engine.client.api.inspect_container(sandbox.container_id)["State"]["Running"]
    assert engine.reap_orphans() == []


def test_reused_pid_is_not_mistaken_for_the_owner():
    labels = owner.owner_labels("r", "t")
    assert not owner.is_orphan(labels)
    assert owner.is_orphan({**labels, owner.OWNER_START: "1"})
    assert not owner.is_orphan({**labels, owner.OWNER_HOST: "another-host", owner.OWNER_START: "1"})


# ------------------------------------------------------------------ builds


def test_build_is_cached_by_content_hash(engine, tmp_path):
    path = make_task(tmp_path, "cached", f"FROM {BASE_IMAGE}\nRUN echo {uuid.uuid4().hex} > /marker\n")
    task = load_task(path)
    log = tmp_path / "logs" / "build.log"
    try:
        first = engine.build_image(task, log_path=log)
        assert not first.cached and "Successfully tagged" in log.read_text()
        second = engine.build_image(task, log_path=log)
        assert second.cached and second.image == task.image_tag
        assert second.duration_sec < 5.0  # an image lookup, no build
    finally:
        engine.client.api.remove_image(task.image_tag, force=True)


@pytest.mark.slow
def test_build_timeout_stops_the_build(engine, tmp_path):
    path = make_task(
        tmp_path, "slow-build", f"FROM {BASE_IMAGE}\nRUN echo building; sleep 61\n",
        "[environment]\nbuild_timeout_sec = 2\n",
    )
    task = load_task(path)
    log = tmp_path / "build.log"
    start = time.monotonic()
    with pytest.raises(BuildTimeout) as info:
        engine.build_image(task, log_path=log)
    assert time.monotonic() - start < 30  # the build's sleep 61 was cut at build_timeout_sec
    assert "build_timeout_sec" in str(info.value) and "building" in log.read_text()
    # the engine cancels the build when the client goes away: its RUN step stops
    deadline = time.monotonic() + 15
    while any("sleep 61" in c["Command"] for c in engine.client.api.containers()):
        assert time.monotonic() < deadline, "the timed-out build's RUN container still runs"
        time.sleep(0.5)
    with pytest.raises(docker.errors.ImageNotFound):
        engine.client.api.inspect_image(task.image_tag)


def test_failed_build_raises_with_log_tail(engine, tmp_path):
    path = make_task(tmp_path, "bad-build", f"FROM {BASE_IMAGE}\nRUN echo about-to-fail; exit 3\n")
    with pytest.raises(BuildFailed) as info:
        engine.build_image(load_task(path), log_path=tmp_path / "build.log")
    assert not isinstance(info.value, BuildTimeout)
    assert "about-to-fail" in info.value.log_tail


def test_image_map_rewrites_public_base(engine, tmp_path):
    settings = Settings()
    image_map = load_image_map(settings.image_map_file)
    path = make_task(
        tmp_path, "public-base", f"FROM python:3.12-slim\nRUN python3 -c 'print(\"{uuid.uuid4().hex}\")'\n"
    )
    task = load_task(path)
    try:
        result = engine.build_image(task, image_map=image_map, log_path=tmp_path / "build.log")
        assert ("python:3.12-slim", BASE_IMAGE) in result.substitutions
        with engine.start(task, run_id="test-run", trial_id="public-base") as sb:
            assert sb.exec("python3 -c 'print(1 + 1)'", timeout_sec=30).stdout == "2\n"
    finally:
        engine.client.api.remove_image(task.image_tag, force=True)


def test_prebuilt_docker_image_is_tagged(engine, tmp_path):
    path = make_task(tmp_path, "prebuilt", "", f'[environment]\ndocker_image = "{BASE_IMAGE}"\n')
    (path / "environment" / "Dockerfile").unlink()
    (path / "instruction.md").write_text(f"prebuilt {uuid.uuid4().hex}\n")
    task = load_task(path)
    try:
        result = engine.build_image(task)
        assert not result.cached
        assert (
            engine.client.api.inspect_image(task.image_tag)["Id"] == engine.client.api.inspect_image(BASE_IMAGE)["Id"]
        )
    finally:
        engine.client.api.remove_image(task.image_tag)



# ------------------------------------------------------------------ the pids limit

#: the agent leaves sleeping processes behind, as many as the pids limit allows (the
#: fork that fails ends the loop; the sleeps stay when solve.sh exits)
FILL_PIDS = """\
#!/bin/bash
echo hello > /app/out.txt
python3 - <<'PY'
import os
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execvp("sleep", ["sleep", "1000"])
    n += 1
print(f"left {n} sleep processes")
PY
"""
#: the check runs helpers side by side, as test suites do (a server and its client, pytest
#: workers); it passes whenever /app/out.txt says hello and the helpers can start
SIDE_BY_SIDE_TEST = """\
#!/bin/bash
if timeout 30 sh -c 'sleep 0.2 & sleep 0.2 & grep -q hello /app/out.txt && wait'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
PIDS_LIMIT = 64


def _pids_task(root: Path, name: str, solve: str) -> Path:
    path = make_task(root, name, f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (path / "tests" / "test.sh").write_text(SIDE_BY_SIDE_TEST, encoding="utf-8")
    (path / "solution").mkdir()
    (path / "solution" / "solve.sh").write_text(solve, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_pids_engine(engine):
    eng = DockerEngine(pids_limit=PIDS_LIMIT, reap=False)
    yield eng
    eng.close()


def test_pids_usage_counts_and_limit(small_pids_engine, task):
    with small_pids_engine.start(task, run_id="test-run", trial_id="pids-usage") as sb:
        quiet = sb.pids_usage()
        assert quiet.limit == PIDS_LIMIT and 1 <= quiet.current < 10
        assert quiet.refused_forks == 0 and not quiet.fired
        sb.put_file("/solution/solve.sh", FILL_PIDS.encode())
        res = sb.exec("bash /solution/solve.sh", timeout_sec=60)
        assert res.ok and "left" in res.stdout, res
        full = sb.pids_usage()
        assert full.fired and full.refused_forks >= 1 and full.current > PIDS_LIMIT - 10


def test_pids_limit_fired_is_recorded_and_audited(small_pids_engine, tmp_path):
    """The agent's leftover processes use up the pids limit; the verifier's helpers cannot fork.

    The same task passes when the agent leaves nothing behind; with the sandbox full, the
    record keeps the verifier's reward (0) as ``task_failed`` and says that the pids limit
    fired, with the evidence; the audit puts it on the model, with ``pids_limit`` among the
    limits in its evidence.
    """
    from mindforge.agent.simple import OracleAgent
    from mindforge.audit import audit_trial
    from mindforge.store.models import AuditOwner
    from mindforge.trials.record import FailureClass, LimitFired
    from mindforge.trials.run import run_trial

    clean = load_task(_pids_task(tmp_path, "pids-clean", "#!/bin/bash\necho hello > /app/out.txt\n"))
    full = load_task(_pids_task(tmp_path, "pids-full", FILL_PIDS))
    try:
        kw = {"run_id": "pids", "artifact_root": tmp_path / "artifacts"}
        ok = run_trial(clean, OracleAgent(), small_pids_engine, trial_id="clean", **kw)
        assert ok.passed and ok.limit_fired is None, ok
        rec = run_trial(full, OracleAgent(), small_pids_engine, trial_id="full", **kw)
    finally:
        for t in (clean, full):
            small_pids_engine.client.api.remove_image(t.image_tag, force=True)
    assert "left" in Path(rec.artifacts["agent_log"]).read_text()
    assert rec.reward == 0.0 and rec.failure_class == FailureClass.TASK_FAILED
    assert rec.limit_fired == LimitFired.PIDS_LIMIT, rec.failure_detail
    assert "pids limit fired" in rec.failure_detail and f"of {PIDS_LIMIT} processes" in rec.failure_detail
    assert "Cannot fork" in rec.failure_detail  # the verifier output's evidence
    audit = audit_trial(rec, None)
    assert (audit.owner, audit.rule) == (AuditOwner.MODEL, "model.pids_exhausted")
    assert audit.evidence["limits_fired"] == ["pids_limit"] and "pids limit fired" in audit.evidence["detail"]
