"""Default routes of the main table (``/proc/net/route``, ``/proc/net/ipv6_route``)."""

from __future__ import annotations

import ipaddress
import socket
import struct
from typing import Optional

from ncclcheck.probes.network.types import DefaultRoute


_RTF_UP, _RTF_REJECT = 0x0001, 0x0200


def parse_routes(text: Optional[str]) -> list[dict[str, Any]]:
    """Every usable IPv4 route of ``/proc/net/route`` (hex, addresses little-endian).

    As on node2 of the namespace fleet of tests/rules/test_rules_netns.py, with a second NIC in
    eth0's subnet (the case of NVIDIA/nccl#1581: two routes to one subnet):

    >>> text = ("Iface\\tDestination\\tGateway \\tFlags\\tRefCnt\\tUse\\tMetric\\tMask\\t\\tMTU\\t"
    ...         "Window\\tIRTT\\n"
    ...         "eth0\\t000012C6\\t00000000\\t0001\\t0\\t0\\t0\\t00FFFFFF\\t0\\t0\\t0\\n"
    ...         "eth9\\t000012C6\\t00000000\\t0001\\t0\\t0\\t0\\t00FFFFFF\\t0\\t0\\t0\\n"
    ...         "eth0\\t00000000\\t010012C6\\t0003\\t0\\t0\\t100\\t00000000\\t0\\t0\\t0\\n")
    >>> [(r["interface"], r["destination"], r["gateway"], r["metric"]) for r in parse_routes(text)]
    [('eth0', '198.18.0.0/24', None, 0), ('eth9', '198.18.0.0/24', None, 0), \
('eth0', '0.0.0.0/0', '198.18.0.1', 100)]
    >>> parse_routes("garbage\\nx y z"), parse_routes(None)
    ([], [])
    """
    routes = []
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest, gateway, flags = int(fields[1], 16), int(fields[2], 16), int(fields[3], 16)
            metric, mask = int(fields[6]), int(fields[7], 16)
            net = ipaddress.IPv4Network((socket.inet_ntoa(struct.pack("<I", dest)),
                                         socket.inet_ntoa(struct.pack("<I", mask))), strict=False)
        except (ValueError, struct.error):
            continue
        if not flags & _RTF_UP or flags & _RTF_REJECT:
            continue
        routes.append({"interface": fields[0], "destination": str(net),
                       "gateway": socket.inet_ntoa(struct.pack("<I", gateway)) if gateway else None,
                       "metric": metric})
    return routes


def parse_proc_route(text: Optional[str]) -> list[DefaultRoute]:
    """Default routes of ``/proc/net/route`` (main table; hex, addresses little-endian).

    Recorded on a VM whose gateway is 192.0.2.1:

    >>> text = ("Iface\\tDestination\\tGateway \\tFlags\\tRefCnt\\tUse\\tMetric\\tMask"
    ...         "\\t\\tMTU\\tWindow\\tIRTT\\n"
    ...         "eth0\\t00000000\\t010200C0\\t0003\\t0\\t0\\t100\\t00000000\\t0\\t0\\t0\\n"
    ...         "eth0\\t000200C0\\t00000000\\t0001\\t0\\t0\\t0\\t00FFFFFF\\t0\\t0\\t0\\n")
    >>> parse_proc_route(text)
    [{'family': 'inet', 'interface': 'eth0', 'gateway': '192.0.2.1', 'metric': 100}]
    >>> parse_proc_route("garbage\\nx y z"), parse_proc_route(None)
    ([], [])
    """
    return [{"family": "inet", "interface": route["interface"], "gateway": route["gateway"],
             "metric": route["metric"]}
            for route in parse_routes(text) if route["destination"] == "0.0.0.0/0"]


def parse_ipv6_route(text: Optional[str]) -> list[DefaultRoute]:
    """Default routes of ``/proc/net/ipv6_route`` (unreachable/reject entries left out).

    Recorded on a VM whose IPv6 gateway is fd00::1 (the ``lo`` line is the kernel's reject
    route, flags 0x00200200):

    >>> z = "0" * 32
    >>> gw, ll = "fd000000000000000000000000000001", "fe800000000000000000000000000000"
    >>> text = (f"{z} 00 {z} 00 {gw} 00000400 00000002 00000000 00000003     eth0\\n"
    ...         f"{z} 00 {z} 00 {z} ffffffff 00000001 00000000 00200200       lo\\n"
    ...         f"{ll} 40 {z} 00 {z} 00000100 00000002 00000000 00000001     eth0\\n")
    >>> parse_ipv6_route(text)
    [{'family': 'inet6', 'interface': 'eth0', 'gateway': 'fd00::1', 'metric': 1024}]
    >>> parse_ipv6_route("0 1 2"), parse_ipv6_route(None)
    ([], [])
    """
    routes: list[DefaultRoute] = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) != 10:
            continue
        try:
            dest, plen = int(fields[0], 16), int(fields[1], 16)
            gateway, metric, flags = int(fields[4], 16), int(fields[5], 16), int(fields[8], 16)
        except ValueError:
            continue
        if dest or plen or not flags & _RTF_UP or flags & _RTF_REJECT:
            continue
        gw = str(ipaddress.IPv6Address(gateway)) if gateway else None
        routes.append({"family": "inet6", "interface": fields[9], "gateway": gw, "metric": metric})
    return routes
