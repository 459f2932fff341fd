"""Benchmark: a lineage on the container cluster (``mindforge cluster up``) against the dev stack.

Same run, same batch: ``--attempts`` x 5 bundled tasks (20 trials by default), cached
images, a scripted policy (answers ``finish`` at once, so a trial is the sandbox's work),
one generation (Expansion's base evaluation, search off) through a Temporal dev server.
Measured, each in this run:

1. the dev stack: Ray on this host with 2 CPUs (what ``mindforge dev up``'s head offers on
   a 2-core machine), the store in SQLite - the baseline;
2. the cluster with 1 and with 2 worker containers (1 CPU each, the head has none), the
   store on the cluster's Postgres, the driver on the host joined through the head.

Printed: trials per minute of each, the per-trial time of the cluster with 2 workers over
the dev stack's (the cluster path's overhead; target <= 1.10x) and 2 workers over 1. The
cluster is started and removed by the benchmark (ports 6495 / 10495 / 5495). The
scripted policy is the test double behind the real HTTP API. Run on demand:
``.venv/bin/python benchmarks/bench_cluster.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_orchestration import TASKS, _script, run_lineage  # noqa: E402 - after the sys.path insert above

#: the per-trial time the cluster path may cost over the dev stack's
TARGET_RATIO = 1.10


def _lineage(tasks: list[Path], attempts: int, policy_url: str, db_url: str) -> float:
    return asyncio.run(run_lineage(f"bench-{uuid.uuid4().hex[:8]}", tasks, attempts, policy_url, db_url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=4)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mf-bench-cluster-"))
    os.environ["MINDFORGE_DATA_DIR"] = str(tmp)
    if (Path.home() / ".ray" / "auth_token").is_file():  # the cluster's head takes the machine's Ray token
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    from mindforge.devstack.cluster import ClusterSpec, cluster_down, cluster_up
    from mindforge.hcp import load_contract
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.settings import get_settings
    from workers.main import init_ray

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
        try:
            for workers in (1, 2):
                spec = ClusterSpec(name="mfc-bench", workers=workers, gcs_port=6495, client_port=10495,
                                   postgres_port=5495)
                info = cluster_up(settings, spec, say=lambda m: print(f"  {m}", file=sys.stderr))
                os.environ["MINDFORGE_RAY_ADDRESS"] = info.env["MINDFORGE_RAY_ADDRESS"]
                init_ray(info.env["MINDFORGE_RAY_ADDRESS"])
                db_url = info.env["MINDFORGE_DATABASE_URL"]
                _lineage(tasks, 1, policy.base_url, db_url)  # the nodes' first sandboxes, as on the dev stack
                seconds[f"cluster, {workers} worker(s)"] = _lineage(tasks, args.attempts, policy.base_url, db_url)
                ray.shutdown()
        finally:
            cluster_down(settings, "mfc-bench", say=lambda m: None)
    print(f"batch: {n} trials ({len(tasks)} tasks x {args.attempts} attempts), cached images, scripted policy")
    for label, sec in seconds.items():
        print(f"{label:24s} {sec:7.2f} s = {sec / n:.3f} s/trial = {n / sec * 60:6.1f} trials/minute")
    ratio = seconds["cluster, 2 worker(s)"] / seconds["dev stack (2 CPU)"]
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"per-trial time, cluster (2 workers) / dev stack: {ratio:.2f}x  (target <= {TARGET_RATIO:.2f}x: {verdict})")
    scale = seconds["cluster, 1 worker(s)"] / seconds["cluster, 2 worker(s)"]
    print(f"trials/minute, cluster 2 workers / 1 worker: {scale:.2f}x")


if __name__ == "__main__":
    main()
