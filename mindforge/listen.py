"""Where MindForge's own servers listen: loopback unless the user says otherwise.

The policy server (``--host``), the dev stack's Temporal dev server and Ray head
(settings' ``bind_host``) all default to ``127.0.0.1``; this module says what counts as
loopback, for the checks that refuse or warn beyond it.
"""

from __future__ import annotations

import ipaddress

#: the address every server of MindForge listens on unless told otherwise
LOOPBACK = "127.0.0.1"
#: Ray binds a node's sockets to its node address, and on Linux swaps a loopback
#: ``--node-ip-address`` for the machine's routable one unless this variable is 0 (the
#: switch that keeps single-machine Ray on loopback on macOS and Windows; Ray reads it when
#: first imported). The head and every driver of a loopback head need it: the dev stack
#: starts its head with it, ``workers.main.init_ray`` sets it before importing Ray.
RAY_LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``, ``::ffff:127.x``), else False.

    A host name other than ``localhost`` counts as beyond loopback (it may resolve anywhere);
    so does ``0.0.0.0`` (every interface).
    """
    host = host.strip()
    if host.lower() == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1, as dual-stack sockets show IPv4
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def probe_host(bind_host: str) -> str:
    """Where this machine reaches a server listening on ``bind_host`` (loopback for all interfaces)."""
    return LOOPBACK if bind_host.strip() in ("0.0.0.0", "::", "[::]", "") else bind_host
