"""Who owns a sandbox container: labels written at start-up, and the orphan check.

Every container MindForge starts carries ``mindforge.managed=true`` and its owner's pid,
host name and process start time. A container whose owner is gone (a worker killed with
SIGKILL, a crashed CLI) is an orphan: :func:`is_orphan` says so, and the engine removes
orphans of its own host when it starts. The start time guards against pid reuse: a new
process that got the dead owner's pid has another start time.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

MANAGED = "mindforge.managed"
RUN_ID = "mindforge.run_id"
TRIAL_ID = "mindforge.trial_id"
OWNER_PID = "mindforge.owner_pid"
OWNER_HOST = "mindforge.owner_host"
OWNER_START = "mindforge.owner_start"


def process_start_time(pid: int) -> str | None:
    """A process's start time as the kernel reports it (clock ticks after boot), or None.

    Args:
        pid: the process id.

    Returns:
        Field 22 of ``/proc/<pid>/stat`` as text, or None when no such process runs: it
        does not exist, it has exited and waits to be reaped (a zombie), or ``/proc`` is
        not there.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def can_check_owners() -> bool:
    """True where process start times can be read (Linux ``/proc``)."""
    return process_start_time(os.getpid()) is not None


def owner_labels(run_id: str, trial_id: str) -> dict[str, str]:
    """Labels for a container started by this process.

    Args:
        run_id: the run the trial belongs to.
        trial_id: the trial.

    Returns:
        label name -> value.
    """
    pid = os.getpid()
    return {
        MANAGED: "true",
        RUN_ID: run_id,
        TRIAL_ID: trial_id,
        OWNER_PID: str(pid),
        OWNER_HOST: socket.gethostname(),
        OWNER_START: process_start_time(pid) or "",
    }


def is_orphan(labels: dict[str, str]) -> bool:
    """True when the container's owner ran on this host and is gone.

    A container of another host, or with unreadable owner labels, is never an orphan
    here: it is not ours to judge.

    Args:
        labels: the container's labels.

    Returns:
        whether to remove it.
    """
    if labels.get(MANAGED) != "true" or labels.get(OWNER_HOST) != socket.gethostname():
        return False
    pid_text = labels.get(OWNER_PID, "")
    if not pid_text.isdigit():
        return False
    start = process_start_time(int(pid_text))
    return start is None or start != labels.get(OWNER_START)
