"""host-hostname-loopback: the hostname, or MASTER_ADDR, resolves to a loopback address."""

from __future__ import annotations

import ipaddress
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import peer_scope


def _loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error when MASTER_ADDR is or resolves to loopback. When the hostname resolves (through
    /etc/hosts) only to loopback addresses: a warning where the facts show this node in a
    multi-node job (a launcher's node count, a world larger than this node's, several nodes
    probed together: :func:`~ncclcheck.rules.common.peer_scope`), else INFO: the cloud-init and
    Debian default on a single machine, harmless until other nodes connect to this one.

    >>> doc = {"sections": {"netpath": {"status": "ok", "data": {"resolve": {
    ...     "hostname": "vm", "hostname_addrs": ["127.0.0.1"]}}}}}
    >>> check(doc)[0].severity.value
    'info'
    >>> doc["sections"]["host"] = {"status": "ok", "data": {"launcher": {"kind": "slurm", "nnodes": 2}}}
    >>> [f.severity for f in check(doc)]
    [None]
    """
    res = fact(facts, "netpath.resolve", {})
    master = res.get("master_addr")
    master_addrs = [master] if master and _loopback(master) else list(res.get("master_addrs") or [])
    if master and master_addrs and all(_loopback(a) for a in master_addrs):
        return [Finding(
            message=(f"MASTER_ADDR={master} resolves to {', '.join(master_addrs)} here: the "
                     "rendezvous and the c10d store are reached through loopback, which no other "
                     "node can connect to"),
            fix=("Set MASTER_ADDR to the master's address on the network the nodes share (or a "
                 "name that resolves to it on every node)"),
            evidence={"netpath.resolve": res}, severity=Severity.ERROR)]
    name, addrs = res.get("hostname"), list(res.get("hostname_addrs") or [])
    if not (name and addrs and all(_loopback(a) for a in addrs)):
        return []
    scope, why = peer_scope(facts)
    fix = (f"Map {name} to this node's cluster address in /etc/hosts (replace its loopback "
           "line, e.g. the 127.0.1.1 one Debian/Ubuntu installers write), or use an IP for "
           "MASTER_ADDR")
    if scope == "multi":
        return [Finding(
            message=(f"the hostname {name} resolves to {', '.join(addrs)} in /etc/hosts and "
                     f"this node is in a multi-node job ({why}): a rendezvous hosted here by "
                     "name (MASTER_ADDR=$(hostname), torchrun --rdzv-endpoint, Gloo) binds or "
                     "advertises loopback, and peers cannot connect"),
            fix=fix, evidence={"netpath.resolve": res, "peers": why})]
    # INFO: the engine's peer gate appends that this matters once other nodes connect to this
    # one, and why (the facts say one node, or do not say how many)
    return [Finding(
        message=(f"the hostname {name} resolves to {', '.join(addrs)} in /etc/hosts: a "
                 "rendezvous hosted here by name (MASTER_ADDR=$(hostname), torchrun "
                 "--rdzv-endpoint, Gloo) would bind or advertise loopback, which other nodes "
                 "cannot reach"),
        fix=fix, evidence={"netpath.resolve": res}, severity=Severity.INFO)]


RULE = Rule(
    id="host-hostname-loopback",
    title="Resolve the hostname and MASTER_ADDR to a routable address",
    severity=Severity.WARNING,
    reads=("netpath.resolve",),
    sets=(),
    why=("NCCL resolves a rendezvous given by name with getaddrinfo "
         "(src/misc/socket.cc ncclSocketGetAddrFromString, used for NCCL_COMM_ID), and PyTorch "
         "does the same for MASTER_ADDR and for Gloo's default device: a name that maps to "
         "127.0.0.1 or 127.0.1.1 on the master (Debian writes '127.0.1.1 <hostname>') makes the "
         "master listen on, or advertise, loopback; the other nodes time out connecting."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/socket.cc",
    fix="Map the hostname to the cluster address in /etc/hosts, or give MASTER_ADDR as an IP.",
    check=check,
    peers=True,
)
