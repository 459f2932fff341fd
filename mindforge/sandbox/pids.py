"""The sandbox's pids limit: did it fire?

A container may hold at most ``docker_pids_limit`` processes. An agent that leaves
processes behind (a server, a fork bomb, a thousand ``sleep &``) can use them all up, and
then the verifier's own commands cannot fork: ``bash: fork: retry: Resource temporarily
unavailable``, a test that fails for want of a process, a reward of 0 that says nothing
about the solution. Two kinds of evidence tell this apart from a wrong answer:

- the pids cgroup: its process count at the limit, or its count of refused forks
  (``pids.events``: ``max N``), read by :func:`docker_pids_usage`;
- the text a refused fork leaves in the verifier's output (:func:`fork_failure_line`).
"""

from __future__ import annotations

import re
from pathlib import Path

import docker
import docker.errors

from mindforge.errors import InfraError
from mindforge.sandbox.base import PidsUsage

#: where a container sees its pids cgroup's event counts: cgroup v2, then v1
PIDS_EVENTS = ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events")
#: a pids limit this large (the kernel's "max" as an engine may report it) is no limit
UNLIMITED_PIDS = 2**62
#: what a refused fork prints: bash (``fork: retry: Resource temporarily unavailable``),
#: dash and busybox (``Cannot fork``, ``can't fork``), coreutils (``fork system call
#: failed``), Go and runc (``fork/exec ...: resource temporarily unavailable``), Python
#: (``BlockingIOError: [Errno 11] Resource temporarily unavailable`` from ``os.fork``)
FORK_FAILURE_RE = re.compile(
    r"fork\b[^\n]{0,120}?resource temporarily unavailable"
    r"|can(?:no|')t fork"
    r"|fork system call failed"
    r"|BlockingIOError: \[Errno 11\]",
    re.IGNORECASE,
)


def fork_failure_line(text: str) -> str | None:
    """The first line of ``text`` that shows a refused fork, stripped, or None."""
    found = FORK_FAILURE_RE.search(text or "")
    if found is None:
        return None
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start : end if end >= 0 else len(text)].strip()


def docker_pids_usage(api: docker.APIClient, container_id: str) -> PidsUsage | None:
    """A running container's processes against its pids limit.

    The count and limit come from the engine's stats (``pids_stats``), which need no
    process in the container. The refused forks are the ``max`` count of the
    container's ``pids.events``, read where no new process is needed when the engine
    runs on this host (the cgroup file, found through ``/proc/<container pid>/cgroup``),
    else with one ``cat`` run in the container directly; None when neither works (a
    remote engine with no pid to spare) - the count is at the limit then, which tells
    as much.

    Args:
        api: the low-level Docker client.
        container_id: the container (full id).

    Returns:
        the usage, or None when the engine reports no process count.

    Raises:
        InfraError: the engine failed.
    """
    try:
        stats = api.stats(container_id, stream=False, one_shot=True)
        pid = api.inspect_container(container_id)["State"]["Pid"]
    except docker.errors.APIError as exc:
        raise InfraError(f"stats of sandbox {container_id[:12]} failed: {exc}") from exc
    pids = stats.get("pids_stats") or {}
    if "current" not in pids:
        return None
    limit = pids.get("limit")
    refused = host_refused_forks(pid, container_id)
    return PidsUsage(
        current=pids["current"],
        limit=limit if limit and limit < UNLIMITED_PIDS else None,
        refused_forks=refused if refused is not None else _refused_forks_inside(api, container_id),
    )


def host_refused_forks(pid: int, container_id: str) -> int | None:
    """The refused-fork count of the pids cgroup of process ``pid`` on this host, or None.

    Only a cgroup whose path names ``container_id`` counts: a process of that id on this
    host that is not the container's (a remote engine) is never read. cgroup v2 (the
    unified ``0::`` line) and v1 (the ``pids`` controller's line) are both read.
    """
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        if controllers == "":
            events = Path("/sys/fs/cgroup") / path.lstrip("/") / "pids.events"
        elif "pids" in controllers.split(","):
            events = Path("/sys/fs/cgroup/pids") / path.lstrip("/") / "pids.events"
        else:
            continue
        try:
            found = re.search(r"^max (\d+)$", events.read_text(encoding="utf-8"), re.MULTILINE)
        except OSError:
            continue
        if found:
            return int(found.group(1))
    return None


def _refused_forks_inside(api: docker.APIClient, container_id: str) -> int | None:
    try:
        exec_id = api.exec_create(container_id, ["cat", *PIDS_EVENTS], user="root")["Id"]
        out = api.exec_start(exec_id)
    except docker.errors.APIError:
        return None  # documented as unknown: the count and the limit still tell
    found = re.search(rb"^max (\d+)$", out or b"", re.MULTILINE)
    return int(found.group(1)) if found else None
