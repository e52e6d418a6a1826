"""Routed host addresses: a node whose NIC holds its address as a /32 (IPv6 /128) and reaches
every other address through its gateway (Hetzner and OVH servers, BGP "routing on the host"
fabrics). No subnet is shared by design, and NCCL needs none: its socket transport connects to
the peer's address with connect(2) and the kernel routes it (src/misc/socket.cc
``ncclSocketConnect``); what it needs is a route to each peer's address.

One exception: with ``NCCL_COMM_ID`` set, NCCL bootstraps only on a local interface in the
subnet of that address (src/bootstrap.cc ``bootstrapNetInit``, src/os/linux.cc
``ncclFindInterfaceMatchSubnet``), which a /32 never shares: every node but the one holding
the address fails with "NET/Socket : No usable listening interface found".

Not a rule: the registry test skips this module.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ncclcheck.rules.base import fact, hostname
from ncclcheck.rules.common import configured


def host_route(subnet: str) -> bool:
    """Whether an address's subnet is the address alone (``/32``, IPv6 ``/128``).

    >>> host_route("198.18.7.11/32"), host_route("2001:db8::11/128"), host_route("198.18.7.0/24")
    (True, True, False)
    """
    try:
        net = ipaddress.ip_network(subnet, strict=False)
    except ValueError:
        return False
    return net.prefixlen == net.max_prefixlen


def unrouted(routes: list[dict[str, Any]], addresses: list[str]) -> list[str]:
    """The IPv4 ``addresses`` that no route of ``routes`` (netpath's, from /proc/net/route)
    covers; none when the routes are unknown (an empty list) or the address is IPv6 (not in
    those facts).

    >>> routes = [{"destination": "0.0.0.0/0", "gateway": "198.18.0.1", "interface": "eth0"},
    ...           {"destination": "198.18.0.1/32", "gateway": None, "interface": "eth0"}]
    >>> unrouted(routes, ["198.19.20.12", "2001:db8::12"]), unrouted(routes[1:], ["198.19.20.12"])
    ([], ['198.19.20.12'])
    >>> unrouted([], ["198.19.20.12"])
    []
    """
    nets = []
    for route in routes or []:
        try:
            nets.append(ipaddress.IPv4Network(str(route.get("destination")), strict=False))
        except ValueError:
            continue
    if not nets:
        return []
    out = []
    for addr in addresses:
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            continue
        if ip.version == 4 and not any(ip in net for net in nets):
            out.append(addr)
    return out


def layout(nodes: list[dict[str, Any]],
           chosen: dict[str, list[tuple[str, str]]]) -> tuple[bool, dict[str, list[str]]]:
    """For the (address, subnet) pairs ``chosen`` on each host (by hostname, in ``nodes``'
    order): whether every one is a host route, and ``{host: [peers' addresses it has no route
    to]}`` where its routes are known.

    >>> node = lambda h, dest: {"hostname": h, "sections": {"netpath": {"status": "ok", "data": {
    ...     "routes": [{"destination": dest, "gateway": None, "interface": "eth0"}]}}}}
    >>> chosen = {"n1": [("198.18.7.11", "198.18.7.11/32")], "n2": [("198.19.7.12", "198.19.7.12/32")]}
    >>> layout([node("n1", "0.0.0.0/0"), node("n2", "198.19.0.0/16")], chosen)
    (True, {'n2': ['198.18.7.11']})
    """
    every = all(host_route(subnet) for pairs in chosen.values() for _, subnet in pairs)
    missing = {}
    for node in nodes:
        host = hostname(node)
        peers = [addr for other, pairs in chosen.items() if other != host for addr, _ in pairs]
        miss = unrouted(fact(node, "netpath.routes", []), peers)
        if miss:
            missing[host] = miss
    return every, missing


def judge(nodes: list[dict[str, Any]], host_routes: bool, missing: dict[str, list[str]],
          where: str) -> tuple[bool, str]:
    """(whether the default-route fallback is the routed layout working as designed, the words
    for where the chosen interfaces are): routed hosts with every peer routed and no
    ``NCCL_COMM_ID`` are; a node without a route to a peer, or NCCL_COMM_ID, is said."""
    comm_id = sorted(hostname(n) for n in nodes if configured(n, "NCCL_COMM_ID"))
    if host_routes:
        where = ("carrying the default route (routed hosts: every node holds its address as a "
                 "/32 or /128 and reaches the others through its gateway, so no subnet is "
                 "shared by design)")
    for host, miss in list(missing.items())[:4]:
        where += f"; {host} has no route to {', '.join(miss[:4])}"
    if host_routes and comm_id:
        where += (f"; NCCL_COMM_ID is set on {', '.join(comm_id[:4])}: NCCL then bootstraps "
                  "only on an interface in the subnet of its address (src/bootstrap.cc "
                  "bootstrapNetInit), which the other nodes lack here")
    return host_routes and not missing and not comm_id, where
