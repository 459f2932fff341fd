"""The nodes of ``mindforge cluster up``: their network, addresses, images, commands, mounts and environment.

Pure where it can be (addresses, commands, mounts: :mod:`tests.unit.devstack` checks them
without Docker); the few calls to the engine are the network, the services image and
starting one container.

Every node is on the cluster's own Docker bridge network at a fixed address of its subnet
(:class:`Addresses`), so a restarted head comes back where the workers and the driver look
for it. The Ray nodes run the worker image (:mod:`mindforge.devstack.worker_image`: code and
pinned packages inside, nothing of the host's checkout or venv); Postgres and Redis run the
services image, the base image plus Debian's ``postgresql-15`` and ``redis-server``.
"""

from __future__ import annotations

import io
import ipaddress
import json
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
from docker.utils import kwargs_from_env
from pydantic import BaseModel, Field

from mindforge.devstack.base import DEFAULT_DOCKER_SOCKET, DevStackError, Say
from mindforge.sandbox.owner import MANAGED
from mindforge.settings import REPO_ROOT, Settings

CLUSTER_LABEL = "mindforge.cluster"
ROLE_LABEL = "mindforge.cluster.role"
BASE_ID_LABEL = "mindforge.cluster.base_id"
SERVICES_IMAGE = "mindforge/cluster-services:bookworm"
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_DATA = "/var/lib/postgresql/data"
#: the ports inside the cluster's network (every node has its own address, so Ray's defaults)
GCS_PORT, CLIENT_PORT, POSTGRES_PORT, REDIS_PORT = 6379, 10001, 5432, 6379
#: where a node finds Ray's token and the store's password (mounted read-only files)
RAY_TOKEN_IN_NODE = "/run/secrets/ray-auth-token"
PG_PASSWORD_IN_NODE = "/run/secrets/postgres-password"
#: how long a worker's raylet waits for a head that went away before it exits (Ray's default is 60 s)
GCS_RECONNECT_TIMEOUT_SEC = 300
#: the subnets ``up`` picks from when none is given: 172.30.0.0/24, 172.30.1.0/24, ...
SUBNET_POOL = ipaddress.ip_network("172.30.0.0/16")

SERVICES_DOCKERFILE = f"""\
FROM {{base}}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 redis-server \\
 && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p {PG_DATA} && chown postgres:postgres {PG_DATA}
"""


class ClusterSpec(BaseModel):
    """What ``cluster up`` starts.

    Attributes:
        name: the cluster's name (label value, network, container and volume prefix).
        workers: Ray worker containers.
        cpus_per_worker: CPUs each worker offers Ray.
        sandboxes_per_worker: the ``sandbox`` resource each worker offers: trials it runs at
            once (each asks for one, settings' ``trial_sandboxes``).
        subnet: the network's IPv4 subnet (at least a /27); None picks the first /24 of
            :data:`SUBNET_POOL` no Docker network uses.
        gcs_fault_tolerance: keep the head's GCS state in the cluster's Redis, so a
            restarted head resumes the cluster (Ray's GCS fault tolerance).
        object_store_mb: each node's Ray object store (MiB; trial results are small).
        data_paths: host folders the workers read at the same path (the task library);
            the artifact root and the image map files are added to them.
    """

    name: str = Field(default="mfc", pattern=r"^[a-z][a-z0-9-]{0,20}$")
    workers: int = Field(default=2, ge=1, le=16)
    cpus_per_worker: int = Field(default=1, ge=1)
    sandboxes_per_worker: int = Field(default=4, ge=1)
    subnet: str | None = None
    gcs_fault_tolerance: bool = True
    object_store_mb: int = Field(default=256, ge=100)
    data_paths: list[Path] = Field(default_factory=lambda: [REPO_ROOT / "tasks"])


class Addresses(BaseModel):
    """Where each member of a cluster is on its network (host numbers of the subnet).

    Attributes:
        subnet: the network, e.g. ``172.30.0.0/24``.
        host: this machine's address on it (the bridge's gateway): where the nodes reach a
            policy server on the host.
        postgres / redis / head: their addresses.
        workers: worker ``i``'s address at index ``i - 1``.
    """

    subnet: str
    host: str
    postgres: str
    redis: str
    head: str
    workers: list[str]

    @classmethod
    def of(cls, subnet: str, workers: int) -> Addresses:
        """Gateway .1, Postgres .2, Redis .3, the head .10, worker ``i`` .10 + i.

        Raises:
            DevStackError: the subnet is not IPv4 or too small for the nodes.
        """
        try:
            net = ipaddress.ip_network(subnet)
        except ValueError as exc:
            raise DevStackError(f"subnet {subnet!r}: {exc}") from None
        if net.version != 4 or net.num_addresses < 32:
            raise DevStackError(f"subnet {subnet}: an IPv4 network of at least 32 addresses (/27) is needed")
        at = lambda n: str(net.network_address + n)  # noqa: E731 - a one-line helper
        return cls(subnet=str(net), host=at(1), postgres=at(2), redis=at(3), head=at(10),
                   workers=[at(10 + i) for i in range(1, workers + 1)])


def network_name(name: str) -> str:
    """The cluster's Docker network."""
    return f"{name}-net"


def free_subnet(client: docker.DockerClient) -> str:
    """The first /24 of :data:`SUBNET_POOL` that overlaps no subnet of an existing Docker network.

    Raises:
        DevStackError: every one is taken.
    """
    taken = []
    for net in client.networks.list():
        for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
            if cfg.get("Subnet"):
                taken.append(ipaddress.ip_network(cfg["Subnet"], strict=False))
    for candidate in SUBNET_POOL.subnets(new_prefix=24):
        if not any(candidate.overlaps(t) for t in taken):
            return str(candidate)
    raise DevStackError(f"no free /24 in {SUBNET_POOL}; pass --subnet")


def create_network(client: docker.DockerClient, spec: ClusterSpec, subnet: str) -> Any:
    """The cluster's bridge network with ``subnet`` (its gateway is this machine), labelled with the cluster."""
    gateway = Addresses.of(subnet, spec.workers).host
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet, gateway=gateway)])
    try:
        return client.networks.create(
            network_name(spec.name), driver="bridge", ipam=ipam, labels={CLUSTER_LABEL: spec.name, MANAGED: "true"}
        )
    except docker.errors.APIError as exc:
        raise DevStackError(f"creating network {network_name(spec.name)} ({subnet}) failed: {exc}") from exc


def build_services_image(client: docker.DockerClient, base_image: str, say: Say) -> str:
    """Build :data:`SERVICES_IMAGE` (Postgres and Redis) from ``base_image`` unless built from that very base.

    Raises:
        DevStackError: the base image is missing or the build fails (apt needs a mirror).
    """
    try:
        base_id = client.images.get(base_image).id
    except docker.errors.ImageNotFound as exc:
        raise DevStackError(f"base image {base_image} is missing; `mindforge dev up` builds it") from exc
    try:
        if client.images.get(SERVICES_IMAGE).labels.get(BASE_ID_LABEL) == base_id:
            return SERVICES_IMAGE
    except docker.errors.ImageNotFound:
        pass
    say(f"building {SERVICES_IMAGE} from {base_image} (apt: postgresql-15, redis-server) ...")
    dockerfile = SERVICES_DOCKERFILE.format(base=base_image).encode()
    try:
        client.images.build(
            fileobj=io.BytesIO(dockerfile), tag=SERVICES_IMAGE, rm=True, labels={BASE_ID_LABEL: base_id}
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise DevStackError(f"building {SERVICES_IMAGE} failed: {exc}") from exc
    return SERVICES_IMAGE


def ray_token_env() -> dict[str, str]:
    """The environment that makes a node use the mounted Ray token (:data:`RAY_TOKEN_IN_NODE`)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": RAY_TOKEN_IN_NODE, "RAY_USAGE_STATS_ENABLED": "0"}


def head_command(spec: ClusterSpec, addr: Addresses) -> tuple[list[str], dict[str, str]]:
    """The head's ``ray start`` and environment: no CPUs and no ``sandbox`` (it takes no trial), GCS state in Redis."""
    argv = [
        "ray", "start", "--head", "--block", "--node-ip-address", addr.head, "--port", str(GCS_PORT),
        "--ray-client-server-port", str(CLIENT_PORT), "--num-cpus", "0", "--include-dashboard", "false",
        "--disable-usage-stats", "--object-store-memory", str(spec.object_store_mb * 1024 * 1024),
    ]
    env = ray_token_env()
    if spec.gcs_fault_tolerance:
        env |= {"RAY_REDIS_ADDRESS": f"{addr.redis}:{REDIS_PORT}", "RAY_external_storage_namespace": spec.name}
    return argv, env


def worker_command(spec: ClusterSpec, addr: Addresses, index: int) -> tuple[list[str], dict[str, str]]:
    """Worker ``index``'s (from 1) ``ray start`` and environment: its CPUs and ``sandbox`` slots, joined to the head.

    Its raylet outlives a head outage of up to :data:`GCS_RECONNECT_TIMEOUT_SEC` seconds.
    """
    argv = [
        "ray", "start", "--block", "--address", f"{addr.head}:{GCS_PORT}", "--node-ip-address",
        addr.workers[index - 1], "--num-cpus", str(spec.cpus_per_worker),
        "--resources", json.dumps({"sandbox": spec.sandboxes_per_worker}), "--disable-usage-stats",
        "--object-store-memory", str(spec.object_store_mb * 1024 * 1024),
    ]
    return argv, ray_token_env() | {"RAY_gcs_rpc_server_reconnect_timeout_s": str(GCS_RECONNECT_TIMEOUT_SEC)}


def docker_socket() -> str:
    """The engine's unix socket, which worker nodes mount to run sandboxes beside themselves.

    Raises:
        DevStackError: ``DOCKER_HOST`` names an engine that is not a local socket.
    """
    base_url = kwargs_from_env().get("base_url") or DEFAULT_DOCKER_SOCKET
    if not base_url.startswith("unix://"):
        raise DevStackError(f"DOCKER_HOST={base_url}: cluster nodes need the engine's unix socket to mount")
    return base_url.removeprefix("unix://")


def worker_mounts(settings: Settings, spec: ClusterSpec, ray_token: Path) -> dict[str, dict[str, str]]:
    """A worker's mounts: data, never code, and no secret but Ray's token.

    The artifact root read-write and :attr:`ClusterSpec.data_paths` and the image map
    files read-only, each at its own path (trial records and the trial's payload name
    host paths: the rehearsal's stand-in for a volume every node shares); the Docker
    socket, so sandboxes run beside the node; Ray's token. The data dir is not mounted:
    it holds the cluster's secrets.

    Raises:
        DevStackError: a data path is missing, or :func:`docker_socket`'s error.
    """
    ro = {"mode": "ro"}
    mounts: dict[str, dict[str, str]] = {}
    files = [settings.image_map_file, settings.data_dir / "image_map.toml"]
    for path in [*spec.data_paths, *(f for f in files if f.is_file())]:
        if not path.exists():
            raise DevStackError(f"{path}: a data path the workers mount does not exist")
        mounts[str(path.resolve())] = {"bind": str(path.resolve()), **ro}
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    art = str(settings.artifacts.resolve())
    mounts[art] = {"bind": art, "mode": "rw"}
    mounts[docker_socket()] = {"bind": DEFAULT_DOCKER_SOCKET.removeprefix("unix://"), "mode": "rw"}
    mounts[str(ray_token)] = {"bind": RAY_TOKEN_IN_NODE, **ro}
    return mounts


def postgres_script() -> str:
    """The Postgres container's command: initdb once (password from the mounted file), then serve on ``$MF_ADDR``."""
    return (
        f"set -e; if [ ! -s {PG_DATA}/PG_VERSION ]; then install -o postgres -m 600 {PG_PASSWORD_IN_NODE} /tmp/pw; "
        f"su postgres -c '{PG_BIN}/initdb -D {PG_DATA} -U mindforge --pwfile=/tmp/pw --auth-local=trust "
        f"--auth-host=scram-sha-256 >/dev/null'; rm /tmp/pw; "
        f"echo 'host all all 0.0.0.0/0 scram-sha-256' >> {PG_DATA}/pg_hba.conf; fi; "
        f"exec su postgres -c \"{PG_BIN}/postgres -D {PG_DATA} -p {POSTGRES_PORT} "
        "-c listen_addresses=$MF_ADDR -k /tmp\""
    )


def redis_command(addr: Addresses) -> list[str]:
    """Redis for the GCS: on its own address only, no snapshots (it outlives the head, not the cluster)."""
    return ["redis-server", "--bind", addr.redis, "--port", str(REDIS_PORT), "--protected-mode", "no", "--save", ""]


def run_node(
    client: docker.DockerClient, spec: ClusterSpec, image: str, role: str, cname: str, address: str,
    command: list[str], **kw: Any,
) -> Any:
    """Start container ``cname`` of ``spec`` on its network at ``address``, labelled with the cluster and ``role``.

    Ray nodes restart on failure (a head whose GCS crashed comes back and resumes from Redis);
    a container stopped or killed through Docker stays down, as an operator's stop should.
    """
    labels = {CLUSTER_LABEL: spec.name, ROLE_LABEL: role, MANAGED: "true"}
    net = network_name(spec.name)
    endpoint = docker.types.EndpointConfig(client.api.api_version, ipv4_address=address)
    return client.containers.run(
        image, command, name=cname, hostname=cname, labels=labels, detach=True,
        shm_size=f"{spec.object_store_mb * 2}m", network=net, networking_config={net: endpoint},
        restart_policy={"Name": "on-failure"} if role in ("head", "worker") else None, **kw,
    )
