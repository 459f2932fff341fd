"""A Ray cluster of containers on one machine that crosses a network: ``mindforge cluster up|status|down``.

``up`` builds the worker image (:mod:`~mindforge.devstack.worker_image`: MindForge and
its pinned packages on the local base image) and the services image (Postgres, Redis),
creates the cluster's own Docker bridge network and starts on it, each at its own address
(:class:`~mindforge.devstack.cluster_nodes.Addresses`) and labelled
``mindforge.cluster=<name>`` / ``mindforge.cluster.role``:

* Postgres (the store), its data in a labelled volume;
* Redis, where the head keeps its GCS state (Ray's GCS fault tolerance): a head that is
  killed and started again resumes the cluster, its workers and their tasks;
* a Ray head with no CPUs and no ``sandbox`` resource (it takes no trial), whose Ray
  Client server is how a driver joins;
* N Ray workers, each with its CPUs and ``sandbox`` slots, running sandboxes on the
  host's Docker engine through its socket.

No node mounts the host's checkout or venv. The host's MindForge worker joins as a Ray
Client (``ray://<head>:10001``) over the network; the nodes reach this machine at the
network's gateway (:attr:`ClusterInfo.host_address`: where a policy server for the
trials must listen). Secrets stay in files under :func:`cluster_dir` (mode 0600): the
store's URL (:attr:`ClusterInfo.database_url_file`, which ``MINDFORGE_DATABASE_URL_FILE``
names), Postgres's password; Ray's token is this machine's (``~/.ray/auth_token``, as
``mindforge dev up`` makes it), mounted into the nodes.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.utils import kwargs_from_env
from pydantic import BaseModel

from mindforge.devstack.base import DevStackError, Say
from mindforge.devstack.cluster_nodes import (
    CLIENT_PORT,
    CLUSTER_LABEL,
    PG_BIN,
    PG_DATA,
    PG_PASSWORD_IN_NODE,
    POSTGRES_PORT,
    ROLE_LABEL,
    Addresses,
    ClusterSpec,
    build_services_image,
    create_network,
    free_subnet,
    head_command,
    network_name,
    postgres_script,
    redis_command,
    run_node,
    worker_command,
    worker_mounts,
)
from mindforge.devstack.services import tcp_answers
from mindforge.devstack.worker_image import build_worker_image
from mindforge.sandbox.owner import MANAGED, OWNER_HOST
from mindforge.settings import Settings

__all__ = ["ClusterInfo", "ClusterSpec", "ClusterStatus", "cluster_down", "cluster_status", "cluster_up"]

#: seconds a node gets to say "Ray runtime started" / Postgres to accept connections
START_TIMEOUT_SEC = 180.0


class ClusterInfo(BaseModel):
    """Where a running cluster is, and the settings of a MindForge worker on this machine.

    Attributes:
        name: the cluster.
        image: the worker image its Ray nodes run.
        containers: its container names (Postgres, Redis, head, workers).
        addresses: container name -> its address on the cluster's network.
        host_address: this machine's address on that network (where the nodes reach it).
        env: ``MINDFORGE_*`` variable -> value for a worker on this host; no secret among them.
        env_file: the file holding ``env`` as ``KEY=value`` lines.
        database_url_file: the file holding the store's URL, password included (mode 0600).
    """

    name: str
    image: str
    containers: list[str]
    addresses: dict[str, str]
    host_address: str
    env: dict[str, str]
    env_file: Path
    database_url_file: Path

    @property
    def ray_address(self) -> str:
        """The head's Ray Client address, ``ray://<head>:10001``."""
        return self.env["MINDFORGE_RAY_ADDRESS"]

    def database_url(self) -> str:
        """The store's URL, read from :attr:`database_url_file`."""
        return self.database_url_file.read_text(encoding="utf-8").strip()


def docker_client() -> docker.DockerClient:
    """A client of the engine ``DOCKER_HOST`` names (default the local socket).

    Raises:
        DevStackError: no engine answers.
    """
    try:
        client = docker.DockerClient(**kwargs_from_env(), version="auto", timeout=1800)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        raise DevStackError(f"no Docker engine answers ({exc}); run `mindforge dev up` first") from exc
    return client


def cluster_dir(settings: Settings, name: str) -> Path:
    """``<data_dir>/cluster/<name>/`` (mode 0700): the host worker's settings and the cluster's secrets."""
    return settings.data_dir / "cluster" / name


def env_file(settings: Settings, name: str) -> Path:
    """The settings a host worker uses for cluster ``name`` (``worker.env`` in :func:`cluster_dir`)."""
    return cluster_dir(settings, name) / "worker.env"


def _secret_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text, encoding="utf-8")
    return path


def ray_token() -> Path:
    """This machine's Ray token, ``~/.ray/auth_token``, made (``ray get-auth-token --generate``) when missing.

    Raises:
        DevStackError: Ray could not make it.
    """
    path = Path.home() / ".ray" / "auth_token"
    if not path.is_file():
        ray = Path(sys.executable).parent / "ray"
        done = subprocess.run([str(ray), "get-auth-token", "--generate"], capture_output=True, text=True, check=False)
        if not path.is_file():
            raise DevStackError(f"no Ray token at {path} and `ray get-auth-token --generate` made none: {done.stderr}")
    return path


def cluster_containers(client: docker.DockerClient, name: str) -> list[Any]:
    """The containers of cluster ``name`` (running or not), found by label."""
    return list(client.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={name}"}))


def wait_for_log(container: Any, text: str, what: str, since: int | None = None) -> None:
    """Wait until ``text`` is in the container's log (written after ``since``, a Unix time, when given).

    Raises:
        DevStackError: the container exited, or the text did not come within :data:`START_TIMEOUT_SEC`.
    """
    deadline = time.monotonic() + START_TIMEOUT_SEC
    while time.monotonic() < deadline:
        container.reload()
        raw = container.logs(since=since) if since else container.logs()
        logs = raw.decode(errors="replace")
        if text in logs:
            return
        if container.status == "exited":
            raise DevStackError(f"{what} ({container.name}) exited:\n" + "\n".join(logs.splitlines()[-15:]))
        time.sleep(0.5)
    raise DevStackError(f"{what} ({container.name}) did not start within {START_TIMEOUT_SEC:g} s")


def _start_postgres(
    client: docker.DockerClient, spec: ClusterSpec, addr: Addresses, image: str, password: Path, say: Say
) -> Any:
    volume = f"{spec.name}-pgdata"
    client.volumes.create(volume, labels={CLUSTER_LABEL: spec.name, MANAGED: "true"})
    say(f"starting Postgres on {addr.postgres}:{POSTGRES_PORT} (volume {volume}) ...")
    container = run_node(
        client, spec, image, "postgres", f"{spec.name}-postgres", addr.postgres, ["sh", "-c", postgres_script()],
        volumes={volume: {"bind": PG_DATA, "mode": "rw"}, str(password): {"bind": PG_PASSWORD_IN_NODE, "mode": "ro"}},
        environment={"MF_ADDR": addr.postgres},
    )
    wait_for_log(container, "database system is ready to accept connections", "Postgres")
    created = container.exec_run(
        ["su", "postgres", "-c", f"{PG_BIN}/createdb -h /tmp -p {POSTGRES_PORT} -U mindforge mindforge"]
    )
    if created.exit_code != 0 and b"already exists" not in created.output:
        raise DevStackError(f"createdb in {container.name} failed: {created.output.decode(errors='replace')}")
    return container


def start_head(client: docker.DockerClient, spec: ClusterSpec, addr: Addresses, image: str, token: Path) -> Any:
    """Start the Ray head and wait until it runs and its Ray Client server answers.

    Raises:
        DevStackError: it exits or does not start within :data:`START_TIMEOUT_SEC`.
    """
    argv, env = head_command(spec, addr)
    mounts = {str(token): {"bind": "/run/secrets/ray-auth-token", "mode": "ro"}}
    head = run_node(client, spec, image, "head", f"{spec.name}-head", addr.head, argv, volumes=mounts, environment=env)
    wait_for_log(head, "Ray runtime started", "Ray head")
    wait_for_port(addr.head, CLIENT_PORT, "the head's Ray Client server")
    return head


def wait_for_port(host: str, port: int, what: str) -> None:
    """Wait until ``host:port`` accepts a TCP connection.

    Raises:
        DevStackError: it did not within :data:`START_TIMEOUT_SEC`.
    """
    deadline = time.monotonic() + START_TIMEOUT_SEC
    while not tcp_answers(host, port):
        if time.monotonic() > deadline:
            raise DevStackError(f"{what} ({host}:{port}) does not answer after {START_TIMEOUT_SEC:g} s")
        time.sleep(0.3)


def start_workers(
    client: docker.DockerClient, settings: Settings, spec: ClusterSpec, addr: Addresses, image: str, token: Path,
    say: Say,
) -> list[Any]:
    """Start Ray worker containers ``<name>-worker-<i>`` (i from 1), all at once, and wait until their raylets run.

    Raises:
        DevStackError: one exits or does not start within :data:`START_TIMEOUT_SEC`.
    """
    mounts = worker_mounts(settings, spec, token)
    started = []
    for index in range(1, spec.workers + 1):
        say(f"starting Ray worker {spec.name}-worker-{index} on {addr.workers[index - 1]} ...")
        argv, env = worker_command(spec, addr, index)
        started.append(run_node(
            client, spec, image, "worker", f"{spec.name}-worker-{index}", addr.workers[index - 1], argv,
            volumes=mounts, environment=env,
        ))
    for container in started:
        wait_for_log(container, "Ray runtime started", "Ray worker")
    return started


def _write_env(settings: Settings, spec: ClusterSpec, addr: Addresses, image: str, password: str) -> ClusterInfo:
    folder = cluster_dir(settings, spec.name)
    url = f"postgresql+psycopg://mindforge:{password}@{addr.postgres}:{POSTGRES_PORT}/mindforge"
    url_file = _secret_file(folder / "database-url", url + "\n")
    env = {
        "MINDFORGE_RAY_ADDRESS": f"ray://{addr.head}:{CLIENT_PORT}",
        "MINDFORGE_DATABASE_URL_FILE": str(url_file),
        "MINDFORGE_ARTIFACT_ROOT": str(settings.artifacts.resolve()),
        "MINDFORGE_DATA_DIR": str(settings.data_dir),
        "MINDFORGE_TEMPORAL_ADDRESS": settings.temporal_address,
        "MINDFORGE_TRIAL_SANDBOXES": "1",
    }
    path = _secret_file(env_file(settings, spec.name), "".join(f"{k}={v}\n" for k, v in env.items()))
    workers = [f"{spec.name}-worker-{i}" for i in range(1, spec.workers + 1)]
    addresses = {f"{spec.name}-postgres": addr.postgres, f"{spec.name}-redis": addr.redis}
    addresses[f"{spec.name}-head"] = addr.head
    addresses |= dict(zip(workers, addr.workers, strict=True))
    return ClusterInfo(
        name=spec.name, image=image, containers=list(addresses), addresses=addresses, host_address=addr.host,
        env=env, env_file=path, database_url_file=url_file,
    )


def cluster_up(settings: Settings, spec: ClusterSpec, say: Say = print) -> ClusterInfo:
    """Build the images, make the network, start Postgres, Redis, the Ray head and ``spec.workers`` Ray workers.

    A cluster of that name that runs already is removed first (``cluster_down``), so
    ``up`` always leaves exactly ``spec``.

    Args:
        settings: the host's settings (base image, artifact root, data dir, Temporal address).
        spec: what to start.
        say: progress lines.

    Returns:
        the cluster's containers, addresses and the host worker's settings.

    Raises:
        DevStackError: no Docker engine, the base image is missing, a build fails, the
            subnet is taken, or a node does not start (what started is removed again).
    """
    client = docker_client()
    try:
        if cluster_containers(client, spec.name) or client.networks.list(names=[network_name(spec.name)]):
            cluster_down(settings, spec.name, say)
        image = build_worker_image(client, settings.base_image, say)
        services = build_services_image(client, settings.base_image, say)
        token = ray_token()
        addr = Addresses.of(spec.subnet or free_subnet(client), spec.workers)
        password = secrets.token_hex(16)
        pw_file = _secret_file(cluster_dir(settings, spec.name) / "postgres-password", password + "\n")
        try:
            create_network(client, spec, addr.subnet)
            _start_postgres(client, spec, addr, services, pw_file, say)
            if spec.gcs_fault_tolerance:
                say(f"starting Redis for the GCS on {addr.redis} ...")
                run_node(client, spec, services, "redis", f"{spec.name}-redis", addr.redis, redis_command(addr))
            say(f"starting the Ray head on {addr.head} (no CPUs, no sandbox: trials run on the workers) ...")
            start_head(client, spec, addr, image, token)
            start_workers(client, settings, spec, addr, image, token, say)
        except BaseException:
            cluster_down(settings, spec.name, say)
            raise
        return _write_env(settings, spec, addr, image, password)
    finally:
        client.close()


class ClusterNode(BaseModel):
    """One container of a cluster, as the engine reports it.

    Attributes:
        container: its name.
        role: ``postgres``, ``redis``, ``head`` or ``worker``.
        state: Docker's state (``running``, ``exited``, ...).
        address: its address on the cluster's network ("" when it has none now).
        sandboxes: running trial sandboxes whose owner host is this container.
    """

    container: str
    role: str
    state: str
    address: str
    sandboxes: int


class ClusterStatus(BaseModel):
    """What runs of cluster ``name`` (``mindforge cluster status``).

    Attributes:
        name: the cluster.
        nodes: its containers, Postgres, Redis and the head first, then the workers by name.
        env_file: the host worker's settings file, or None when ``up`` has not written one.
        ready: Postgres, the head and at least one worker are running.
    """

    name: str
    nodes: list[ClusterNode]
    env_file: Path | None
    ready: bool


_ROLE_ORDER = {"postgres": 0, "redis": 1, "head": 2, "worker": 3}


def _address(container: Any, name: str) -> str:
    nets = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
    return str((nets.get(network_name(name)) or {}).get("IPAddress") or "")


def cluster_status(settings: Settings, name: str = "mfc") -> ClusterStatus:
    """The containers of cluster ``name``, their state, address and the sandboxes each node runs.

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
                        address=_address(c, name), sandboxes=owners.count(c.name))
            for c in containers
        ]
    finally:
        client.close()
    nodes.sort(key=lambda n: (_ROLE_ORDER.get(n.role, 9), n.container))
    up = {n.role for n in nodes if n.state == "running"}
    path = env_file(settings, name)
    return ClusterStatus(
        name=name, nodes=nodes, env_file=path if path.exists() else None, ready={"postgres", "head", "worker"} <= up
    )


def cluster_down(settings: Settings, name: str = "mfc", say: Say = print) -> list[str]:
    """Remove cluster ``name``: its containers, the sandboxes its nodes left, its volume, network and folder.

    Everything is found by label (``mindforge.cluster=<name>``; a sandbox by its owner
    host, which is a node's container name) or by the cluster's name; nothing else is touched.

    Returns:
        what was removed, one line each ("container X", "volume Y", ...).
    """
    client = docker_client()
    removed: list[str] = []
    try:
        containers = cluster_containers(client, name)
        hosts = {c.name for c in containers}
        containers += [
            c for c in client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})
            if c.labels.get(OWNER_HOST) in hosts
        ]
        for c in containers:
            try:
                c.remove(force=True)
                removed.append(f"container {c.name}")
            except docker.errors.NotFound:
                pass
        for v in client.volumes.list(filters={"label": f"{CLUSTER_LABEL}={name}"}):
            v.remove(force=True)
            removed.append(f"volume {v.name}")
        for n in client.networks.list(names=[network_name(name)]):
            if n.name == network_name(name):
                n.remove()
                removed.append(f"network {n.name}")
    finally:
        client.close()
    folder = cluster_dir(settings, name)
    if folder.is_dir():
        shutil.rmtree(folder)
        removed.append(f"folder {folder}")
    for line in removed:
        say(f"removed {line}")
    if not removed:
        say(f"cluster {name}: nothing to remove")
    return removed
