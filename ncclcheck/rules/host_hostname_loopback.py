"""host-hostname-loopback: the hostname, or MASTER_ADDR, resolves to a loopback address."""

from __future__ import annotations

import ipaddress
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def _loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error when MASTER_ADDR is or resolves to loopback; warning when the hostname resolves
    (through /etc/hosts) only to loopback addresses."""
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
    if name and addrs and all(_loopback(a) for a in addrs):
        return [Finding(
            message=(f"the hostname {name} resolves to {', '.join(addrs)} in /etc/hosts: a "
                     "rendezvous hosted here by name (MASTER_ADDR=$(hostname), torchrun "
                     "--rdzv-endpoint, Gloo) binds or advertises loopback, and peers cannot "
                     "connect"),
            fix=(f"Map {name} to this node's cluster address in /etc/hosts (replace its "
                 "loopback line, e.g. the 127.0.1.1 one Debian/Ubuntu installers write), or use "
                 "an IP for MASTER_ADDR"),
            evidence={"netpath.resolve": res})]
    return []


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
