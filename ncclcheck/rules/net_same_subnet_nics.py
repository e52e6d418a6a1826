"""net-same-subnet-nics: several interfaces of one node in one IPv4 subnet.

The kernel answers ARP for any local address on any interface and picks among routes with the
same destination by their order, which differs between nodes: traffic leaves by an interface
NCCL did not choose, and replies come back on another (NVIDIA/nccl#1269, #601, #1581).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.cloud_efa_plugin_owned import efa_devices, ofi_plugin
from ncclcheck.rules.net_socket_ifname import exclusion


def data_interfaces(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Interfaces that carry traffic between nodes: up, not lo/docker/veth*/enslaved, with IPv4.

    >>> doc = {"sections": {"network": {"status": "ok", "data": {"interfaces": [
    ...     {"name": "lo", "kind": "loopback", "operstate": "unknown",
    ...      "ipv4": [{"address": "127.0.0.1"}]},
    ...     {"name": "eth0", "kind": "veth", "operstate": "up", "ipv4": [{"address": "198.18.0.2"}]},
    ...     {"name": "eth1", "kind": "physical", "operstate": "down", "ipv4": [{"address": "10.0.0.2"}]}]}}}}
    >>> [i["name"] for i in data_interfaces(doc)]
    ['eth0']
    """
    return [i for i in fact(facts, "network.interfaces", [])
            if exclusion(i) is None and any(not str(a.get("address", "")).startswith(
                ("127.", "169.254.")) for a in i.get("ipv4") or [])]


def shared_subnets(facts: dict[str, Any]) -> dict[str, list[str]]:
    """``{subnet: [interface, ...]}`` for every IPv4 subnet on two or more data interfaces."""
    by_subnet: dict[str, dict[str, None]] = {}  # an ordered set: linear in the interfaces
    for iface in data_interfaces(facts):
        for addr in iface.get("ipv4") or []:
            if addr.get("subnet") and not str(addr.get("address", "")).startswith("169.254."):
                by_subnet.setdefault(str(addr["subnet"]), {})[iface["name"]] = None
    return {s: list(n) for s, n in by_subnet.items() if len(n) > 1}


def effective(sysctl: dict[str, Any], name: str, key: str) -> int | None:
    """The value the kernel applies: the larger of ``all`` and the interface's (rp_filter,
    arp_ignore and arp_announce all work this way); None when neither is known.

    >>> effective({"all": {"rp_filter": 0}, "eth1": {"rp_filter": 1}}, "eth1", "rp_filter")
    1
    >>> effective({}, "eth1", "rp_filter") is None
    True
    """
    values = [v for v in ((sysctl.get("all") or {}).get(key), (sysctl.get(name) or {}).get(key))
              if isinstance(v, int)]
    return max(values) if values else None


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire per subnet shared by several interfaces, unless ARP is pinned to the interface
    (arp_ignore >= 1, arp_announce >= 2) and the routes to it differ in metric."""
    sysctl = fact(facts, "netpath.sysctl", {})
    routes = fact(facts, "netpath.routes", [])
    rdma = fact(facts, "ib.devices", []) or []
    efa = bool(rdma) and len(efa_devices(facts)) == len(rdma) and bool(ofi_plugin(facts))
    findings = []
    by_destination: dict[Any, list[dict[str, Any]]] = {}
    for r in routes:
        if isinstance(r, dict) and isinstance(r.get("destination"), str):
            by_destination.setdefault(r["destination"], []).append(r)
    for subnet, names in shared_subnets(facts).items():
        same = by_destination.get(subnet, [])
        arp = {n: (effective(sysctl, n, "arp_ignore"), effective(sysctl, n, "arp_announce"))
               for n in names}
        arp_pinned = all((i or 0) >= 1 and (a or 0) >= 2 for i, a in arp.values())
        metrics = [r.get("metric") for r in same]
        if arp_pinned and len(set(metrics)) == len(metrics) > 1:
            continue
        keep = next((r["interface"] for r in same if r.get("interface") in names), names[0])
        shown = "; ".join(f"{subnet} dev {r['interface']} metric {r.get('metric')}" for r in same)
        findings.append(Finding(
            message=(f"{', '.join(names[:-1])} and {names[-1]} share {subnet}"
                     + (f" with routes {shown}" if shown else "")
                     + ": ARP replies and outgoing packets may use a different interface than "
                       "the one NCCL chose, in an order that differs between nodes"),
            fix=(f"Give each interface its own subnet (narrower masks), or keep one: set "
                 f"net.ipv4.conf.all.arp_ignore=1 and arp_announce=2, give the routes distinct "
                 f"metrics (or policy routing per source address), and select one interface "
                 f"exactly with NCCL_SOCKET_IFNAME=={keep} (the '=' stops {keep} from also "
                 f"matching names it prefixes; recommend's env file pins the interface every "
                 f"node shares) and NCCL_IB_HCA for RDMA"),
            evidence={"network.interfaces": names, "netpath.routes": same,
                      "netpath.sysctl.arp_ignore/arp_announce": arp},
        ) if not efa else Finding(
            message=(f"{', '.join(names[:-1])} and {names[-1]} share {subnet}: AWS's multi-ENI "
                     "layout; EFA (aws-ofi-nccl) carries NCCL's data, the ENIs only its "
                     "bootstrap"),
            fix=f"Nothing to do; NCCL_SOCKET_IFNAME=={keep} pins the bootstrap to one ENI",
            evidence={"network.interfaces": names, "ib.devices": "EFA"},
            severity=Severity.INFO))
    return findings


RULE = Rule(
    id="net-same-subnet-nics",
    title="Give each NIC its own subnet (or pin ARP and routes)",
    severity=Severity.WARNING,
    reads=("network.interfaces", "netpath.routes?", "netpath.sysctl?", "ib.devices?",
           "nccl.net_plugin?", "nccl.net_plugins?"),
    sets=(),
    why=("NCCL binds its sockets to the address of the interface it chose "
         "(src/misc/socket.cc ncclFindInterfaces), but the kernel routes by destination: with "
         "two interfaces in one subnet the route listed first wins, and that order differs from "
         "node to node; Linux also answers ARP for an address on every interface (arp_ignore=0). "
         "Packets then leave by, or come back to, an interface NCCL did not choose, and "
         "connections stall or hang (NVIDIA/nccl#1269, #601; in #1581 two routes to "
         "192.168.0.0/20 came up in a different order per node)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/socket.cc",
    fix=("One subnet per interface (narrower masks), or arp_ignore=1/arp_announce=2 plus route "
         "metrics or policy routing; or select one interface with NCCL_SOCKET_IFNAME."),
    check=check,
    peers=True,
)
