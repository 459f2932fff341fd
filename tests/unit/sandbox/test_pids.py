"""Evidence that the sandbox's pids limit fired: refused-fork messages and the cgroup's counts."""

from __future__ import annotations

import pytest

from mindforge.sandbox.base import PidsUsage
from mindforge.sandbox.pids import fork_failure_line


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "ok\nbash: fork: retry: Resource temporarily unavailable\nmore",
            "bash: fork: retry: Resource temporarily unavailable",
        ),
        (
            "mindforge-exec: fork: Resource temporarily unavailable",
            "mindforge-exec: fork: Resource temporarily unavailable",
        ),
        ("sh: 0: Cannot fork", "sh: 0: Cannot fork"),
        ("ash: can't fork", "ash: can't fork"),
        (
            "timeout: fork system call failed: Resource temporarily unavailable",
            "timeout: fork system call failed: Resource temporarily unavailable",
        ),
        (
            "OCI runtime exec failed: exec failed: unable to start container process: "
            "fork/exec /usr/bin/bash: resource temporarily unavailable",
            "OCI runtime exec failed: exec failed: unable to start container process: "
            "fork/exec /usr/bin/bash: resource temporarily unavailable",
        ),
        (
            "    pid = os.fork()\nBlockingIOError: [Errno 11] Resource temporarily unavailable",
            "BlockingIOError: [Errno 11] Resource temporarily unavailable",
        ),
        # a busy socket is EAGAIN too, but no refused fork
        ("recv: Resource temporarily unavailable", None),
        ("3 passed, 1 failed: fork of the repo is stale", None),
        ("", None),
    ],
)
def test_fork_failure_line(text, line):
    assert fork_failure_line(text) == line


def test_usage_fired_at_the_limit_or_after_a_refused_fork():
    assert not PidsUsage(current=10, limit=64, refused_forks=0).fired
    assert PidsUsage(current=64, limit=64, refused_forks=None).fired
    assert PidsUsage(current=12, limit=64, refused_forks=3).fired
    assert not PidsUsage(current=9000, limit=None, refused_forks=None).fired
    assert PidsUsage(current=58, limit=64, refused_forks=2).describe() == "58 of 64 processes, 2 forks refused"


def test_host_cgroup_is_read_only_for_the_containers_own_id():
    import os

    from mindforge.sandbox.pids import host_refused_forks

    # this test process is no container of that id: nothing is read for it
    assert host_refused_forks(os.getpid(), "f" * 64) is None
    assert host_refused_forks(2**22 + 1, "f" * 64) is None  # no such process
