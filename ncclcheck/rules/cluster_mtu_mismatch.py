"""cluster-mtu-mismatch: the interfaces NCCL will use have different MTUs on different nodes.

Checked on the socket interfaces net-socket-ifname chooses, and on the netdevs behind the RoCE
ports NCCL will use. A path whose MTU differs between its ends drops or fragments large frames:
sockets stall on big messages, RoCE reports local length errors or hangs (NVIDIA/nccl#1524).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import outliers
from ncclcheck.rules.ib_roce_gid_index import roce_ports
from ncclcheck.rules.net_socket_ifname import select


def _mtus(nodes: list[dict[str, Any]], names: dict[str, list[str]]) -> dict[str, str]:
    out = {}
    for node in nodes:
        host = hostname(node)
        ifaces = {i.get("name"): i for i in fact(node, "network.interfaces", [])}
        values = sorted({ifaces[n].get("mtu") for n in names.get(host, []) if n in ifaces
                         and isinstance(ifaces[n].get("mtu"), int)})
        if values:
            out[host] = "/".join(map(str, values))
    return out


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when the chosen socket interfaces, or the RoCE netdevs, differ in MTU across nodes."""
    findings = []
    sel = select(nodes)
    roce = {hostname(n): sorted({p["netdev"] for p in roce_ports(n) if p.get("netdev")})
            for n in nodes}
    for what, names in (("socket interfaces", sel.names), ("RoCE netdevs", roce)):
        mtus = _mtus(nodes, names)
        if len(set(mtus.values())) < 2:
            continue
        common, odd = outliers(mtus)
        listing = ", ".join(f"{h}={mtus[h]} ({'/'.join(names[h])})" for h in odd[:6])
        findings.append(Finding(
            message=f"MTU of the {what} differs: most nodes use {common}, but {listing}",
            evidence={"network.mtu": mtus, "interfaces": {h: names[h] for h in mtus}},
            hosts=tuple(odd)))
    return findings


RULE = Rule(
    id="cluster-mtu-mismatch",
    title="Use one MTU on the interfaces NCCL uses",
    severity=Severity.WARNING,
    reads=("network.interfaces", "ib.devices?", "network.default_route_interfaces?"),
    sets=(),
    why=("Frames larger than the smallest MTU on the path are dropped (jumbo frames on one end "
         "only): TCP stalls on large messages and RoCE fails with IBV_WC_LOC_LEN_ERR or hangs; "
         "NCCL 2.20 did not adjust the QP to the remote MTU (NVIDIA/nccl#1524; later releases "
         "take the smaller of the two ends, but switches still drop oversized frames). RoCE "
         "guidance: port MTU 4200 so the active MTU is 4096 everywhere."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html#rdma-over-converged-ethernet-roce",
    fix="Set the same MTU on these interfaces on every node (and on the switch ports); check "
        "with ping -M do -s <mtu-28>.",
    check=check,
    scope="cluster",
)
