"""cluster-mtu-mismatch: the interfaces NCCL will use have different MTUs on different nodes.

Checked on the socket interfaces net-socket-ifname chooses (their netdev MTU) when sockets carry
the data, and on the RoCE
ports NCCL will use: there what counts is the port's *active* MTU, an IB MTU of 256 to 4096 that
the kernel derives from the netdev's MTU minus the RoCE headers (``iboe_get_mtu`` in
include/rdma/ib_addr.h: 96 bytes of GRH, UDP, BTH, XRC, AtomicETH and ICRC), so netdevs at 9000
and 4200 both give 4096 and do not differ. A path whose MTU differs between its ends drops or
fragments large frames: sockets stall on big messages, RoCE reports local length errors or
hangs (NVIDIA/nccl#1524).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import outliers
from ncclcheck.rules.ib_roce_gid_index import roce_ports
from ncclcheck.rules.net_socket_ifname import select


#: IB MTUs a RoCE port can run at, and the RoCE header bytes the kernel takes off the netdev MTU.
IB_MTUS = (4096, 2048, 1024, 512, 256)
ROCE_OVERHEAD = 40 + 8 + 12 + 4 + 28 + 4


def roce_active_mtu(port: dict[str, Any], netdev_mtu: Any) -> int | None:
    """The port's active MTU: as the probe read it, else derived from its netdev's MTU as the
    kernel does.

    >>> [roce_active_mtu({}, m) for m in (9000, 4200, 1500, 1024)]
    [4096, 4096, 1024, 512]
    >>> roce_active_mtu({"active_mtu": 2048}, 9000), roce_active_mtu({}, None)
    (2048, None)
    """
    if isinstance(port.get("active_mtu"), int):
        return port["active_mtu"]
    if not isinstance(netdev_mtu, int):
        return None
    return next((m for m in IB_MTUS if netdev_mtu - ROCE_OVERHEAD >= m), None)


def _roce_mtus(nodes: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    out, where = {}, {}
    for node in nodes:
        host = hostname(node)
        ifaces = {i.get("name"): i for i in fact(node, "network.interfaces", [])}
        seen = {}
        for port in roce_ports(node):
            netdev = port.get("netdev")
            mtu = roce_active_mtu(port, (ifaces.get(netdev) or {}).get("mtu"))
            if mtu is not None:
                seen[f"{port['device']}:{port['port']}"] = (
                    mtu, f"{netdev} MTU {(ifaces.get(netdev) or {}).get('mtu')}")
        if seen:
            out[host] = "/".join(map(str, sorted({m for m, _ in seen.values()})))
            where[host] = sorted({w for _, w in seen.values()})
    return out, where


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
    """Fire when the chosen socket interfaces' MTU, or the RoCE ports' active MTU, differs."""
    findings = []
    sel = select(nodes)
    # when IB carries the data, sockets carry only bootstrap, where TCP's MSS takes the smaller
    socket = _mtus(nodes, sel.names) if sel.data_path else {}
    roce, roce_where = _roce_mtus(nodes)
    for what, mtus, names in (("MTU of the socket interfaces", socket, sel.names),
                              ("active MTU of the RoCE ports", roce, roce_where)):
        if len(set(mtus.values())) < 2:
            continue
        common, odd = outliers(mtus)
        listing = ", ".join(f"{h}={mtus[h]} ({'/'.join(names[h])})" for h in odd[:6])
        findings.append(Finding(
            message=f"{what} differs: most nodes use {common}, but {listing}",
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
         "take the smaller of the two ends, but switches still drop oversized frames). For RoCE "
         "the port's active MTU counts (256-4096, the netdev MTU less 96 header bytes: "
         "iboe_get_mtu in the kernel), so 9000 and 4200 both give 4096."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html#rdma-over-converged-ethernet-roce",
    fix="Set the same MTU on these interfaces on every node (and on the switch ports); check "
        "with ping -M do -s <mtu-28>.",
    check=check,
    scope="cluster",
)
