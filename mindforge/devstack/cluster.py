"""A Ray cluster of containers on this one machine: ``mindforge cluster up|status|down``.

``up`` builds a node image from the local base image (Debian bookworm, its python3 and
the host's CA certificates, plus Debian's ``postgresql-15``), then starts, all with host
networking and the labels ``mindforge.cluster=<name>`` / ``mindforge.cluster.role``:

* a Postgres container (the store), its data in a labelled Docker volume;
* a Ray head container with no CPUs (so trials run on the workers only);
* N Ray worker containers with ``cpus_per_worker`` CPUs each.

Every Ray node runs the host's interpreter: the repository, its virtual environment and
the interpreter that environment was made from are bind-mounted read-only at their own
absolute paths, so the venv's paths resolve and every node imports the host's code. The
artifact root is bind-mounted read-write at its own path (records hold paths), and the
Docker socket too, so sandboxes are siblings on the host's engine. Each node's host name
is its container name, which is what a trial record's ``worker`` starts with.

Host networking, not a user-defined bridge, because the Temporal dev server, the policy
endpoint and a driver's raylet connection are all on the host's loopback; the ports are
chosen apart from the dev stack's (Ray 6379, Temporal 7233). The head's Ray temp dir is a
host folder at the same path, so a MindForge worker on the host can join the cluster as
a driver (``ray.init(address=...)`` finds the head's raylet by its process and sockets).
"""

from __future__ import annotations

import io
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.utils import kwargs_from_env
from pydantic import BaseModel, Field

from mindforge.devstack.base import DEFAULT_DOCKER_SOCKET, DevStackError, Say
from mindforge.devstack.services import tcp_answers
from mindforge.sandbox.owner import MANAGED, OWNER_HOST
from mindforge.settings import REPO_ROOT, Settings

CLUSTER_LABEL = "mindforge.cluster"
ROLE_LABEL = "mindforge.cluster.role"
BASE_ID_LABEL = "mindforge.cluster.base_id"
NODE_IMAGE = "mindforge/cluster-node:bookworm"
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_DATA = "/var/lib/postgresql/data"
#: seconds a node gets to say "Ray runtime started" / Postgres to accept connections
START_TIMEOUT_SEC = 120.0

NODE_DOCKERFILE = f"""\
FROM {{base}}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \\
 && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p {PG_DATA} && chown postgres:postgres {PG_DATA}
"""


class ClusterSpec(BaseModel):
    """What ``cluster up`` starts.

    Attributes:
        name: the cluster's name (label value, container and volume prefix).
        workers: Ray worker containers.
        cpus_per_worker: CPUs each worker offers Ray (one trial per CPU).
        gcs_port: the Ray head's GCS port (the ``ray_address`` workers use).
        client_port: the head's Ray Client server port.
        postgres_port: the store's port on 127.0.0.1.
        object_store_mb: each node's Ray object store (MiB; trial results are small).
    """

    name: str = Field(default="mfc", pattern=r"^[a-z][a-z0-9-]{0,20}$")
    workers: int = Field(default=2, ge=1, le=16)
    cpus_per_worker: int = Field(default=1, ge=1)
    gcs_port: int = 6480
    client_port: int = 10480
    postgres_port: int = 5480
    object_store_mb: int = Field(default=256, ge=100)


class ClusterInfo(BaseModel):
    """Where a running cluster is, as ``MINDFORGE_*`` settings.

    Attributes:
        name: the cluster.
        containers: its container names (head, workers, postgres).
        env: ``MINDFORGE_*`` variable -> value for a worker on the host.
        env_file: the file holding ``env`` as ``KEY=value`` lines.
    """

    name: str
    containers: list[str]
    env: dict[str, str]
    env_file: Path


def docker_client() -> docker.DockerClient:
    """A client of the engine ``DOCKER_HOST`` names (default the local socket).

    Raises:
        DevStackError: no engine answers.
    """
    try:
        client = docker.DockerClient(**kwargs_from_env(), version="auto", timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        raise DevStackError(f"no Docker engine answers ({exc}); run `mindforge dev up` first") from exc
    return client


def head_temp_dir(name: str) -> Path:
    """The head's Ray temp dir, the same path on the host and in the head container (short: socket paths)."""
    return Path(f"/tmp/mindforge-cluster-{name}")


def env_file(settings: Settings, name: str) -> Path:
    """``<data_dir>/cluster/<name>.env``: the settings a host worker uses for cluster ``name``."""
    return settings.data_dir / "cluster" / f"{name}.env"


def shared_mounts(settings: Settings) -> dict[str, dict[str, str]]:
    """The bind mounts every Ray node gets, each at its own absolute path.

    The repository, the data dir, the virtual environment (``sys.prefix``) and the
    interpreter it was made from (``sys.base_prefix``, unless that is the image's own
    ``/usr``) read-only;
    the artifact root and the Docker socket read-write; Ray's token when this machine
    has one.
    """
    ro = {"mode": "ro"}
    paths = {REPO_ROOT, Path(sys.prefix)}
    if Path(sys.base_prefix) != Path("/usr"):
        paths.add(Path(sys.base_prefix))
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    paths.add(settings.data_dir)  # the user's image map lives there
    mounts = {str(p): {"bind": str(p), **ro} for p in sorted(paths)}
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    mounts[str(settings.artifacts)] = {"bind": str(settings.artifacts), "mode": "rw"}
    base_url = kwargs_from_env().get("base_url") or DEFAULT_DOCKER_SOCKET
    if not base_url.startswith("unix://"):
        raise DevStackError(f"DOCKER_HOST={base_url}: cluster nodes need the engine's unix socket to mount")
    sock = base_url.removeprefix("unix://")
    mounts[sock] = {"bind": DEFAULT_DOCKER_SOCKET.removeprefix("unix://"), "mode": "rw"}
    token = Path.home() / ".ray" / "auth_token"
    if token.is_file():
        mounts[str(token)] = {"bind": "/root/.ray/auth_token", **ro}
    return mounts


def node_env() -> dict[str, str]:
    """Environment of every Ray node: the repository first on the path, Ray's token auth as on the host."""
    env = {"PYTHONPATH": str(REPO_ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    if (Path.home() / ".ray" / "auth_token").is_file():
        env["RAY_AUTH_MODE"] = "token"
    return env


def build_node_image(client: docker.DockerClient, base_image: str, say: Say) -> str:
    """Build :data:`NODE_IMAGE` from ``base_image`` unless it is built from that very base already.

    Returns:
        the image tag.

    Raises:
        DevStackError: the base image is missing or the build fails (apt needs a mirror).
    """
    try:
        base_id = client.images.get(base_image).id
    except docker.errors.ImageNotFound as exc:
        raise DevStackError(f"base image {base_image} is missing; `mindforge dev up` builds it") from exc
    try:
        if client.images.get(NODE_IMAGE).labels.get(BASE_ID_LABEL) == base_id:
            return NODE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    say(f"building {NODE_IMAGE} from {base_image} (apt: postgresql-15) ...")
    dockerfile = NODE_DOCKERFILE.format(base=base_image).encode()
    try:
        client.images.build(
            fileobj=io.BytesIO(dockerfile), tag=NODE_IMAGE, rm=True, labels={BASE_ID_LABEL: base_id, MANAGED: "true"}
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise DevStackError(f"building {NODE_IMAGE} failed: {exc}") from exc
    return NODE_IMAGE


def cluster_containers(client: docker.DockerClient, name: str) -> list[Any]:
    """The containers of cluster ``name`` (running or not), found by label."""
    return list(client.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={name}"}))


def _run(client: docker.DockerClient, spec: ClusterSpec, role: str, cname: str, command: list[str], **kw: Any) -> Any:
    labels = {CLUSTER_LABEL: spec.name, ROLE_LABEL: role, MANAGED: "true"}
    return client.containers.run(
        NODE_IMAGE, command, name=cname, hostname=cname, labels=labels, network_mode="host", detach=True,
        shm_size=f"{spec.object_store_mb * 2}m", **kw,
    )


def _wait_for_log(container: Any, text: str, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SEC
    while time.monotonic() < deadline:
        container.reload()
        logs = container.logs().decode(errors="replace")
        if text in logs:
            return
        if container.status == "exited":
            raise DevStackError(f"{what} ({container.name}) exited:\n" + "\n".join(logs.splitlines()[-15:]))
        time.sleep(0.5)
    raise DevStackError(f"{what} ({container.name}) did not start within {START_TIMEOUT_SEC:g} s")


def node_ports(spec: ClusterSpec, index: int) -> tuple[int, int, int]:
    """Node ``index``'s dashboard-agent port and its Ray worker-port range ``(agent, first, last)``.

    Derived from the GCS port, so that clusters whose GCS ports differ by 1 to 39 (the
    tests', the benchmark's and the default one) never share a port, and none is the dev
    head's (its agent listens on 52365): agents on 53000 + 20 k + index, worker ports
    21000 + 850 k + 50 index ... + 49, with k = (gcs_port - 6480) mod 40.
    """
    k = (spec.gcs_port - 6480) % 40
    first = 21000 + 850 * k + 50 * index
    return 53000 + 20 * k + index, first, first + 49


def _ray_command(spec: ClusterSpec, index: int) -> list[str]:
    """``ray start`` of node ``index`` (0 = head), with ports apart from other nodes and the dev head."""
    ray = str(Path(sys.prefix) / "bin" / "ray")
    agent, first, last = node_ports(spec, index)
    common = [
        "--block", "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
        "--object-store-memory", str(spec.object_store_mb * 1024 * 1024),
        "--dashboard-agent-listen-port", str(agent), "--min-worker-port", str(first), "--max-worker-port", str(last),
    ]
    if index == 0:
        return [
            ray, "start", "--head", "--port", str(spec.gcs_port), "--ray-client-server-port", str(spec.client_port),
            "--num-cpus", "0", "--include-dashboard", "false", "--temp-dir", str(head_temp_dir(spec.name)), *common,
        ]
    return [ray, "start", "--address", f"127.0.0.1:{spec.gcs_port}", "--num-cpus", str(spec.cpus_per_worker), *common]


def start_worker(client: docker.DockerClient, settings: Settings, spec: ClusterSpec, index: int) -> Any:
    """Start Ray worker container ``<name>-worker-<index>`` (index from 1) and wait until its raylet runs.

    Raises:
        DevStackError: it exits or does not start within :data:`START_TIMEOUT_SEC`.
    """
    container = _run(
        client, spec, "worker", f"{spec.name}-worker-{index}", _ray_command(spec, index),
        volumes=shared_mounts(settings), environment=node_env(),
    )
    _wait_for_log(container, "Ray runtime started", "Ray worker")
    return container


def _start_postgres(client: docker.DockerClient, spec: ClusterSpec, password: str, say: Say) -> Any:
    volume = f"{spec.name}-pgdata"
    client.volumes.create(volume, labels={CLUSTER_LABEL: spec.name, MANAGED: "true"})
    script = (
        f"set -e; if [ ! -s {PG_DATA}/PG_VERSION ]; then echo \"$MF_PG_PASSWORD\" > /tmp/pw; chown postgres /tmp/pw; "
        f"su postgres -c '{PG_BIN}/initdb -D {PG_DATA} -U mindforge --pwfile=/tmp/pw --auth-local=trust "
        f"--auth-host=scram-sha-256 >/dev/null'; rm /tmp/pw; fi; "
        f"exec su postgres -c '{PG_BIN}/postgres -D {PG_DATA} -p {spec.postgres_port} "
        f"-c listen_addresses=127.0.0.1 -k /tmp'"
    )
    say(f"starting Postgres on 127.0.0.1:{spec.postgres_port} (volume {volume}) ...")
    container = _run(
        client, spec, "postgres", f"{spec.name}-postgres", ["sh", "-c", script],
        volumes={volume: {"bind": PG_DATA, "mode": "rw"}}, environment={"MF_PG_PASSWORD": password},
    )
    _wait_for_log(container, "database system is ready to accept connections", "Postgres")
    created = container.exec_run(
        ["su", "postgres", "-c", f"{PG_BIN}/createdb -h /tmp -p {spec.postgres_port} -U mindforge mindforge"]
    )
    if created.exit_code != 0 and b"already exists" not in created.output:
        raise DevStackError(f"createdb in {container.name} failed: {created.output.decode(errors='replace')}")
    return container


def _check_ports(spec: ClusterSpec) -> None:
    taken = [p for p in (spec.gcs_port, spec.client_port, spec.postgres_port) if tcp_answers("127.0.0.1", p)]
    if taken:
        raise DevStackError(
            f"port(s) {', '.join(map(str, taken))} on 127.0.0.1 answer already; pick others "
            "(--gcs-port, --client-port, --postgres-port) or run `mindforge cluster down`"
        )


def _ray_address(spec: ClusterSpec) -> str:
    return f"127.0.0.1:{spec.gcs_port}"


def _write_env(settings: Settings, spec: ClusterSpec, password: str) -> ClusterInfo:
    env = {
        "MINDFORGE_RAY_ADDRESS": _ray_address(spec),
        "MINDFORGE_DATABASE_URL": f"postgresql+psycopg://mindforge:{password}@127.0.0.1:{spec.postgres_port}/mindforge",
        "MINDFORGE_ARTIFACT_ROOT": str(settings.artifacts),
        "MINDFORGE_DATA_DIR": str(settings.data_dir),
        "MINDFORGE_TEMPORAL_ADDRESS": settings.temporal_address,
    }
    path = env_file(settings, spec.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in env.items()), encoding="utf-8")
    workers = [f"{spec.name}-worker-{i}" for i in range(1, spec.workers + 1)]
    names = [f"{spec.name}-postgres", f"{spec.name}-head", *workers]
    return ClusterInfo(name=spec.name, containers=names, env=env, env_file=path)


def cluster_up(settings: Settings, spec: ClusterSpec, say: Say = print) -> ClusterInfo:
    """Build the node image and start Postgres, the Ray head and ``spec.workers`` Ray workers.

    Writes the settings a host worker needs to :func:`env_file` (mode 0600: it holds the
    store's password). A cluster of that name that runs already is stopped first
    (``cluster_down``), so ``up`` always leaves exactly ``spec``.

    Args:
        settings: the host's settings (artifact root, data dir, Temporal address).
        spec: what to start.
        say: progress lines.

    Returns:
        the cluster's containers and its ``MINDFORGE_*`` settings.

    Raises:
        DevStackError: no Docker engine, the base image is missing, the build fails, a
            port is taken, or a node does not start (what started is removed again).
    """
    client = docker_client()
    try:
        if cluster_containers(client, spec.name):
            cluster_down(settings, spec.name, say)
        _check_ports(spec)
        build_node_image(client, settings.base_image, say)
        password = secrets.token_hex(12)
        try:
            _start_postgres(client, spec, password, say)
            temp = head_temp_dir(spec.name)
            temp.mkdir(parents=True, exist_ok=True)
            mounts = {**shared_mounts(settings), str(temp): {"bind": str(temp), "mode": "rw"}}
            say(f"starting Ray head on {_ray_address(spec)} (no CPUs: trials run on the workers) ...")
            head = _run(client, spec, "head", f"{spec.name}-head", _ray_command(spec, 0), volumes=mounts,
                        environment=node_env())
            _wait_for_log(head, "Ray runtime started", "Ray head")
            check = head.exec_run([sys.executable, "-c", "import mindforge, ray, workers.ray_trials"],
                                  environment=node_env())
            if check.exit_code != 0:
                raise DevStackError(f"the host's venv does not import in {head.name}: {check.output.decode()[-800:]}")
            for index in range(1, spec.workers + 1):
                say(f"starting Ray worker {spec.name}-worker-{index} ({spec.cpus_per_worker} CPU) ...")
                start_worker(client, settings, spec, index)
        except BaseException:
            cluster_down(settings, spec.name, say)
            raise
        return _write_env(settings, spec, password)
    finally:
        client.close()


class ClusterNode(BaseModel):
    """One container of a cluster, as the engine reports it.

    Attributes:
        container: its name.
        role: ``postgres``, ``head`` or ``worker``.
        state: Docker's state (``running``, ``exited``, ...).
        sandboxes: running trial sandboxes whose owner host is this container.
    """

    container: str
    role: str
    state: str
    sandboxes: int


class ClusterStatus(BaseModel):
    """What runs of cluster ``name`` (``mindforge cluster status``).

    Attributes:
        name: the cluster.
        nodes: its containers, head and Postgres first, then the workers by name.
        env_file: the host worker's settings file, or None when ``up`` has not written one.
        ready: Postgres, the head and at least one worker are running.
    """

    name: str
    nodes: list[ClusterNode]
    env_file: Path | None
    ready: bool


_ROLE_ORDER = {"postgres": 0, "head": 1, "worker": 2}


def cluster_status(settings: Settings, name: str = "mfc") -> ClusterStatus:
    """The containers of cluster ``name``, their state and the sandboxes each node runs.

    Raises:
        DevStackError: no Docker engine answers.
    """
    client = docker_client()
    try:
        containers = cluster_containers(client, name)
        running = client.containers.list(filters={"label": f"{MANAGED}=true"})
        owners = [c.labels.get(OWNER_HOST) for c in running]
        nodes = [
            ClusterNode(container=c.name, role=c.labels.get(ROLE_LABEL, "?"), state=c.status,
                        sandboxes=owners.count(c.name))
            for c in containers
        ]
    finally:
        client.close()
    nodes.sort(key=lambda n: (_ROLE_ORDER.get(n.role, 3), n.container))
    up = {n.role for n in nodes if n.state == "running"}
    path = env_file(settings, name)
    return ClusterStatus(
        name=name, nodes=nodes, env_file=path if path.exists() else None,
        ready={"postgres", "head", "worker"} <= up,
    )


def cluster_down(settings: Settings, name: str = "mfc", say: Say = print) -> list[str]:
    """Remove cluster ``name``: its containers, its volume, the sandboxes its nodes left, its temp dir and env file.

    Everything is found by label (``mindforge.cluster=<name>``; a sandbox by its owner
    host, which is a node's container name); nothing else is touched.

    Returns:
        what was removed, one line each ("container X", "volume Y", ...).
    """
    client = docker_client()
    removed: list[str] = []
    try:
        containers = cluster_containers(client, name)
        hosts = {c.name for c in containers}
        for c in client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}):
            if c.labels.get(OWNER_HOST) in hosts:
                containers.append(c)
        for c in containers:
            try:
                c.remove(force=True)
                removed.append(f"container {c.name}")
            except docker.errors.NotFound:
                pass
        for v in client.volumes.list(filters={"label": f"{CLUSTER_LABEL}={name}"}):
            v.remove(force=True)
            removed.append(f"volume {v.name}")
    finally:
        client.close()
    for path in (head_temp_dir(name), env_file(settings, name)):
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append(f"{'folder' if path.suffix != '.env' else 'file'} {path}")
    for line in removed:
        say(f"removed {line}")
    if not removed:
        say(f"cluster {name}: nothing to remove")
    return removed
