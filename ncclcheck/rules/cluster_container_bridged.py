"""cluster-container-bridged: a multi-node job inside a container on a bridged network.

Docker's default network gives the container a veth with a private bridge address (172.17.0.0/16)
and a default route through the bridge: the other nodes cannot reach that address.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname

DOCKER_DEFAULT = ipaddress.ip_network("172.17.0.0/16")


def _addresses(node: dict[str, Any]) -> list[ipaddress.IPv4Address]:
    return [ipaddress.ip_address(a["address"]) for i in fact(node, "network.interfaces", [])
            for a in i.get("ipv4") or [] if a.get("address") and i.get("kind") != "loopback"]


def bridged(node: dict[str, Any], others: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(interface, address/prefix) when the node's default route leaves by a veth whose subnet
    holds none of the other nodes' addresses and looks like a container bridge's; else None."""
    runtime = fact(node, "host.container.runtime")
    if not runtime:
        return None
    defaults = set(fact(node, "network.default_route_interfaces", []))
    peers = [a for o in others for a in _addresses(o)]
    for iface in fact(node, "network.interfaces", []):
        if iface.get("name") not in defaults or iface.get("kind") != "veth":
            continue
        for addr in iface.get("ipv4") or []:
            ip = ipaddress.ip_address(addr["address"])
            net = ipaddress.ip_network(addr.get("subnet") or f"{ip}/32", strict=False)
            if ip in DOCKER_DEFAULT and runtime in ("docker", "podman"):
                return iface["name"], f"{ip}/{net.prefixlen}"  # Docker's default bridge
            if not ip.is_private or any(p in net and p != ip for p in peers):
                continue  # routable, or the peers share it: it is the real network
            if ip in peers or runtime in ("docker", "podman"):
                return iface["name"], f"{ip}/{net.prefixlen}"
    return None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire for each node of a multi-node set whose only way out is a container bridge."""
    if len(nodes) < 2:
        return []
    found = {}
    for node in nodes:
        hit = bridged(node, [n for n in nodes if n is not node])
        if hit:
            found[hostname(node)] = (hit, fact(node, "host.container.runtime"))
    if not found:
        return []
    shown = ", ".join(f"{h} ({r}: {i} {a})" for h, ((i, a), r) in sorted(found.items()))
    return [Finding(
        message=(f"{len(found)} of {len(nodes)} nodes run in a container on a bridged network: "
                 f"{shown}; the other nodes cannot reach these private bridge addresses, so "
                 "NCCL's bootstrap and the c10d rendezvous fail or hang"),
        evidence={"host.container.runtime": {h: r for h, (_, r) in found.items()},
                  "network.default_route": {h: f"{i} {a}" for h, ((i, a), _) in found.items()}},
        hosts=tuple(sorted(found)),
    )]


RULE = Rule(
    id="cluster-container-bridged",
    title="Run multi-node containers on the host network",
    severity=Severity.ERROR,
    reads=("host.container", "network.interfaces", "network.default_route_interfaces"),
    sets=(),
    why=("NCCL bootstraps over the address of the interface it selects (src/misc/socket.cc "
         "ncclFindInterfaces skips docker* and lo, so inside a bridged container it takes the "
         "container's eth0) and sends that address to the other ranks. On Docker's default "
         "bridge that is a private 172.17.x.x address behind NAT that no other node can "
         "connect to; NCCL's docs run containers with --network host (and RDMA devices need "
         "the host's interfaces anyway)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/socket.cc",
    fix=("Start the container with --network host (docker/podman), or hostNetwork: true on the "
         "Kubernetes pod (or an SR-IOV/macvlan network whose addresses the nodes route)."),
    check=check,
    scope="cluster",
)
