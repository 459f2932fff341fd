"""Benchmark: one oracle trial with a cached image, against a floor of plain ``docker`` CLI calls.

Both sides do the same work on the same trivial task in the same run: start a container,
run the reference solution, copy the tests in, run the verifier, read the reward, remove
the container. MindForge's side is :func:`mindforge.trials.run.run_trial` with the oracle
agent (records, artifacts and all); the floor is ``docker create / start / cp / exec /
cp / exec / cp / rm -f`` scripted with subprocess. Prints the median wall time of each
over ``--trials`` runs (interleaved, after one warm-up each) and the ratio; the target is
at most 1.3x the floor. Run on demand: ``.venv/bin/python benchmarks/bench_trial.py``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mindforge.agent.simple import OracleAgent
from mindforge.settings import get_settings
from mindforge.tasks.loader import load_task
from mindforge.trials.run import open_engine, run_trial


def make_task(root: Path) -> Path:
    """A trivial task: write ``ok`` to /app/out.txt."""
    d = root / "bench-trivial"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text('version = "1.0"\n[environment]\ncpus = 1\nmemory_mb = 512\n')
    (d / "instruction.md").write_text("Write ok to /app/out.txt.\n")
    (d / "environment" / "Dockerfile").write_text("FROM mindforge/base:bookworm\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text(
        'if [ "$(cat /app/out.txt 2>/dev/null)" = ok ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    )
    (d / "solution" / "solve.sh").write_text("echo ok > /app/out.txt\n")
    return d


def docker_cli_trial(image: str, task_dir: Path) -> float:
    """The floor: the same steps with plain ``docker`` CLI calls; returns seconds."""

    def sh(*args: str) -> str:
        return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()

    t0 = time.perf_counter()
    cid = sh(
        "create", "--init", "--network", "none", "--cpus", "1", "--memory", "512m", "--pids-limit", "512",
        image, "sleep", "infinity",
    )
    try:
        sh("start", cid)
        sh("cp", str(task_dir / "solution"), f"{cid}:/solution")
        sh("exec", cid, "bash", "-c", "bash /solution/solve.sh; rm -rf /solution")
        sh("exec", cid, "bash", "-c", "rm -rf /tests /logs/verifier && mkdir -p /logs/verifier")
        sh("cp", str(task_dir / "tests"), f"{cid}:/tests")
        sh("exec", cid, "bash", "/tests/test.sh")
        reward = sh("exec", cid, "cat", "/logs/verifier/reward.txt")
        assert reward == "1", reward
    finally:
        sh("rm", "-f", cid)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=15)
    args = parser.parse_args()
    settings = get_settings()
    engine, image_map = open_engine(settings)
    with tempfile.TemporaryDirectory() as tmp:
        task = load_task(make_task(Path(tmp)))
        engine.build_image(task, image_map=image_map)
        ours, floor = [], []
        for i in range(args.trials + 1):  # the first pair is a warm-up
            t0 = time.perf_counter()
            rec = run_trial(
                task, OracleAgent(), engine, run_id="bench-trial", trial_id=f"t{i}",
                artifact_root=Path(tmp) / "art", image_map=image_map,
            )
            took = time.perf_counter() - t0
            assert rec.reward == 1.0, (rec.failure_class, rec.failure_detail)
            f = docker_cli_trial(task.image_tag, task.path)
            if i:
                ours.append(took)
                floor.append(f)
    m_ours, m_floor = statistics.median(ours), statistics.median(floor)
    print(f"trials per side: {len(ours)} (interleaved, after one warm-up)")
    print(f"mindforge run_trial (oracle): median {m_ours:.3f} s  (min {min(ours):.3f}, max {max(ours):.3f})")
    print(f"plain docker CLI floor:       median {m_floor:.3f} s  (min {min(floor):.3f}, max {max(floor):.3f})")
    print(f"ratio mindforge / floor: {m_ours / m_floor:.2f}x  (target <= 1.30x)")


if __name__ == "__main__":
    main()
