"""Benchmark: a lineage on the cluster that crosses a network (``mindforge cluster up``) against the dev stack.

Same run, same batch: ``--attempts`` x 5 bundled tasks (20 trials by default), cached
images, a scripted policy (answers ``finish`` at once, so a trial is the sandbox's work),
one generation (Expansion's base evaluation, search off) through a Temporal dev server.
Measured, each in this run:

1. the dev stack: Ray on this host with 2 CPUs (what ``mindforge dev up``'s head offers on
   a 2-core machine), the store in SQLite - the baseline;
2. the cluster: 2 worker containers (1 CPU and 4 sandbox slots each; the head has none) on
   the cluster's own Docker network, the worker image, the store on the cluster's Postgres,
   this process joined as a Ray Client, the policy reached across the network (with a key);
3. the head-kill recovery (``--kills``, default 5): with trials' Ray tasks in flight, the
   head container is SIGKILLed and started again (as a supervisor would); recovery is the
   time from the kill until a new Ray task has run through a new Ray Client session
   (``workers.main.ensure_ray``), the workers and Redis-held GCS state surviving.

Printed: each run's trials per minute, the cluster's per-trial time over the dev stack's
(the cluster path's overhead; target <= 1.10x), each recovery and their median. The
cluster is started and removed by the benchmark (name ``mfc-bench``). The scripted policy
is the test double behind the real HTTP API. Run on demand:
``.venv/bin/python benchmarks/bench_cluster.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_orchestration import TASKS, _script, run_lineage  # noqa: E402 - after the sys.path insert above

#: the per-trial time the cluster path may cost over the dev stack's
TARGET_RATIO = 1.10
CLUSTER = "mfc-bench"


def _lineage(tasks: list[Path], attempts: int, policy_url: str, db_url: str) -> float:
    return asyncio.run(run_lineage(f"bench-{uuid.uuid4().hex[:8]}", tasks, attempts, policy_url, db_url))


def head_kill_recovery(head: str) -> float:
    """Kill the head container under running Ray tasks, start it again; seconds until a task runs anew.

    Ray must be connected to the cluster (a Ray Client session, ``workers.main.init_ray``).
    """
    import ray

    from workers.main import ensure_ray

    @ray.remote(num_cpus=0.25, resources={"sandbox": 1}, max_retries=0)
    def hold(sec: float) -> float:
        time.sleep(sec)
        return sec

    ray.get(hold.remote(0.0))
    in_flight = [hold.remote(60.0) for _ in range(4)]
    time.sleep(1.0)
    killed = time.perf_counter()
    subprocess.run(["docker", "kill", head], check=True, capture_output=True)
    subprocess.run(["docker", "start", head], check=True, capture_output=True)
    try:  # the session's calls fail once Ray gives the lost session up
        ray.wait(in_flight, num_returns=len(in_flight), timeout=120)
    except Exception:  # noqa: BLE001 - the failure is the expected signal of the lost session
        pass
    while True:
        try:
            ensure_ray()
            ray.get(hold.remote(0.0), timeout=60)
            return time.perf_counter() - killed
        except Exception:  # noqa: BLE001 - still coming back: try again
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--kills", type=int, default=5, help="head kills to time (0: none)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mf-bench-cluster-"))
    os.environ["MINDFORGE_DATA_DIR"] = str(tmp)
    if (Path.home() / ".ray" / "auth_token").is_file():  # the cluster's nodes take the machine's Ray token
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    from mindforge.devstack.cluster import ClusterSpec, cluster_down, cluster_up
    from mindforge.hcp import load_contract
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.settings import get_settings
    from workers.main import disconnect_ray, init_ray

    settings = get_settings()
    tasks = [REPO / "tasks" / t for t in TASKS]
    n = len(tasks) * args.attempts
    seconds: dict[str, float] = {}
    model_id = load_contract(REPO / "hcp_contracts" / "baseline.toml").model.id
    with start_scripted_policy(_script(model_id)) as policy:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"MINDFORGE_DATA_DIR": str(tmp)}})
        _lineage(tasks, 1, policy.base_url, settings.db_url)  # builds missing images, warms the workers
        seconds["dev stack (2 CPU)"] = _lineage(tasks, args.attempts, policy.base_url, settings.db_url)
        ray.shutdown()
    recoveries: list[float] = []
    try:
        spec = ClusterSpec(name=CLUSTER, workers=2)
        info = cluster_up(settings, spec, say=lambda m: print(f"  {m}", file=sys.stderr))
        key = f"mf-bench-{secrets.token_hex(8)}"
        os.environ.update({
            "MINDFORGE_RAY_ADDRESS": info.ray_address, "MINDFORGE_TRIAL_SANDBOXES": "1",
            "MINDFORGE_POLICY_API_KEY": key,
        })
        get_settings.cache_clear()
        init_ray(info.ray_address)
        with start_scripted_policy(_script(model_id), host=info.host_address, api_key=key) as policy:
            db_url = info.database_url()
            _lineage(tasks, 1, policy.base_url, db_url)  # the nodes' first sandboxes, as on the dev stack
            seconds["cluster, 2 workers"] = _lineage(tasks, args.attempts, policy.base_url, db_url)
        for _ in range(args.kills):
            recoveries.append(head_kill_recovery(f"{CLUSTER}-head"))
            print(f"  head kill: recovered in {recoveries[-1]:.1f} s", file=sys.stderr)
    finally:
        disconnect_ray()
        cluster_down(settings, CLUSTER, say=lambda m: None)
    print(f"batch: {n} trials ({len(tasks)} tasks x {args.attempts} attempts), cached images, scripted policy")
    for label, sec in seconds.items():
        print(f"{label:24s} {sec:7.2f} s = {sec / n:.3f} s/trial = {n / sec * 60:6.1f} trials/minute")
    ratio = seconds["cluster, 2 workers"] / seconds["dev stack (2 CPU)"]
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"per-trial time, cluster (2 workers) / dev stack: {ratio:.2f}x  (target <= {TARGET_RATIO:.2f}x: {verdict})")
    if recoveries:
        listed = ", ".join(f"{r:.1f}" for r in recoveries)
        median = statistics.median(recoveries)
        print(f"head kill -> a task runs again: median {median:.1f} s of {len(recoveries)} ({listed})")


if __name__ == "__main__":
    main()
