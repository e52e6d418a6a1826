"""IP addresses of every interface: the ``net_addrs`` query (psutil), else ``ip -d -j addr show``,
else (IPv6 only) ``/proc/net/if_inet6``."""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Optional

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host
from ncclcheck.probes.network.types import Address, AddressMap


_IPV6_SCOPES = {0x00: "global", 0x10: "host", 0x20: "link", 0x40: "site", 0x80: "compat"}


def prefix_from_netmask(netmask: Optional[str]) -> Optional[int]:
    """The prefix length of an IPv4 or IPv6 netmask; None if it is not a contiguous mask.

    >>> prefix_from_netmask("255.255.255.0"), prefix_from_netmask("ffff:ffff:ffff:ffff::")
    (24, 64)
    >>> prefix_from_netmask("255.0.255.0"), prefix_from_netmask(None), prefix_from_netmask("x")
    (None, None, None)
    """
    if not netmask:
        return None
    try:
        mask = ipaddress.ip_address(netmask)
    except ValueError:
        return None
    bits = mask.max_prefixlen
    value = int(mask)
    prefix = bin(value).count("1")
    if value != ((1 << bits) - 1) ^ ((1 << (bits - prefix)) - 1):
        return None
    return prefix


def make_address(address: str, prefix: Optional[int]) -> Optional[Address]:
    """An :class:`Address` with its subnet; None when ``address`` is not an IP address.

    >>> make_address("198.18.0.1", 24)
    {'address': '198.18.0.1', 'prefix': 24, 'subnet': '198.18.0.0/24'}
    >>> make_address("fe80::fc:ff:fe00:1%eth0", 64)
    {'address': 'fe80::fc:ff:fe00:1', 'prefix': 64, 'subnet': 'fe80::/64', 'scope': 'link'}
    >>> make_address("fd00::2", None)
    {'address': 'fd00::2', 'prefix': 128, 'subnet': 'fd00::2/128', 'scope': 'global'}
    >>> make_address("nonsense", 24) is None
    True
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    plen = ip.max_prefixlen if prefix is None or not 0 <= prefix <= ip.max_prefixlen else prefix
    net = ipaddress.ip_network(f"{ip}/{plen}", strict=False)
    out: Address = {"address": str(ip), "prefix": plen, "subnet": str(net)}
    if ip.version == 6:
        out["scope"] = ("host" if ip.is_loopback else "link" if ip.is_link_local
                        else "site" if ip.is_site_local else "global")
    return out


def _base_name(label: str, known: set[str]) -> str:
    """Map an IPv4 alias label ("eth0:1") to its interface when that interface exists."""
    base = label.split(":", 1)[0]
    return base if label not in known and base in known else label


def parse_net_addrs(answer: Any, names: Optional[set[str]] = None) -> AddressMap:
    """The ``net_addrs`` query's answer -> ``{ifname: {"ipv4": [...], "ipv6": [...]}}``.

    Recorded answer (psutil on a virtio VM):

    >>> ans = {"addrs": {"eth0": [
    ...     {"family": "inet", "address": "192.0.2.2", "netmask": "255.255.255.0"},
    ...     {"family": "inet6", "address": "fe80::fc:ff:fe00:1%eth0",
    ...      "netmask": "ffff:ffff:ffff:ffff::"}],
    ...     "eth0:1": [{"family": "inet", "address": "192.0.2.9", "netmask": "255.255.255.255"}]}}
    >>> out = parse_net_addrs(ans, {"eth0"})
    >>> [a["subnet"] for a in out["eth0"]["ipv4"]], out["eth0"]["ipv6"][0]["scope"]
    (['192.0.2.0/24', '192.0.2.9/32'], 'link')
    >>> parse_net_addrs("garbage"), parse_net_addrs({"addrs": {"x": [None, {"family": "inet"}]}})
    ({}, {'x': {'ipv4': [], 'ipv6': []}})
    """
    addrs = answer.get("addrs") if isinstance(answer, dict) else None
    out: AddressMap = {}
    if not isinstance(addrs, dict):
        return out
    for label, entries in addrs.items():
        slot = out.setdefault(_base_name(str(label), set(names or ())), {"ipv4": [], "ipv6": []})
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("address"), str):
                continue
            family = {"inet": "ipv4", "inet6": "ipv6"}.get(entry.get("family"))
            addr = make_address(entry["address"], prefix_from_netmask(entry.get("netmask")))
            if family and addr and (family == "ipv4") == (":" not in addr["address"]):
                slot[family].append(addr)
    return out


def parse_ip_json(text: Optional[str]) -> tuple[dict[str, Optional[str]], AddressMap]:
    """``ip -d -j addr show`` -> (``{ifname: info_kind}``, ``{ifname: {"ipv4", "ipv6"}}``).

    Recorded (trimmed) output of iproute2 6.1 in a namespace with a bridge:

    >>> text = ('[{"ifindex":2,"ifname":"br0","linkinfo":{"info_kind":"bridge"},'
    ...         '"addr_info":[{"family":"inet","local":"198.18.0.1","prefixlen":24}]},'
    ...         '{"ifindex":1,"ifname":"lo",'
    ...         '"addr_info":[{"family":"inet6","local":"::1","prefixlen":128}]}]')
    >>> kinds, addrs = parse_ip_json(text)
    >>> kinds, addrs["br0"]["ipv4"][0]["subnet"], addrs["lo"]["ipv6"][0]["scope"]
    ({'br0': 'bridge', 'lo': None}, '198.18.0.0/24', 'host')
    >>> parse_ip_json("not json"), parse_ip_json(None), parse_ip_json('{"a": 1}')
    (({}, {}), ({}, {}), ({}, {}))
    """
    try:
        links = json.loads(text or "")
    except ValueError:
        return {}, {}
    kinds: dict[str, Optional[str]] = {}
    addrs: AddressMap = {}
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        name = link["ifname"]
        info = link.get("linkinfo")
        kind = info.get("info_kind") if isinstance(info, dict) else None
        kinds[name] = kind if isinstance(kind, str) else None
        slot = addrs.setdefault(name, {"ipv4": [], "ipv6": []})
        for entry in link.get("addr_info") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("local"), str):
                continue
            family = {"inet": "ipv4", "inet6": "ipv6"}.get(entry.get("family"))
            prefix = entry.get("prefixlen") if isinstance(entry.get("prefixlen"), int) else None
            addr = make_address(entry["local"], prefix)
            if family and addr:
                slot[family].append(addr)
    return kinds, addrs


def parse_if_inet6(text: Optional[str]) -> dict[str, list[Address]]:
    """``/proc/net/if_inet6`` -> ``{ifname: [Address, ...]}``.

    Recorded on a virtio VM (address, ifindex, prefix, scope, flags, name; all hex):

    >>> text = ("fe8000000000000000fc00fffe000001 04 40 20 80     eth0\\n"
    ...         "fd000000000000000000000000000002 04 40 00 82     eth0\\n"
    ...         "00000000000000000000000000000001 01 80 10 80       lo\\n")
    >>> out = parse_if_inet6(text)
    >>> [(a["address"], a["prefix"], a["scope"]) for a in out["eth0"]]
    [('fe80::fc:ff:fe00:1', 64, 'link'), ('fd00::2', 64, 'global')]
    >>> out["lo"][0]["scope"], parse_if_inet6("junk line"), parse_if_inet6(None)
    ('host', {}, {})
    """
    out: dict[str, list[Address]] = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            ip = ipaddress.IPv6Address(int(fields[0], 16))
            prefix, scope = int(fields[2], 16), int(fields[3], 16)
        except ValueError:
            continue
        addr = make_address(str(ip), prefix)
        if addr:
            addr["scope"] = _IPV6_SCOPES.get(scope & 0xF0, addr.get("scope", "global"))
            out.setdefault(fields[5], []).append(addr)
    return out


def _addresses(host: Host, names: set[str], errors: list[str],
               ip_addrs: AddressMap) -> tuple[AddressMap, Optional[str]]:
    """Addresses from the best source that answers; the source's name."""
    try:
        answer = host.query("net_addrs")
        source = answer.get("source", "?") if isinstance(answer, dict) else "?"
        return parse_net_addrs(answer, names), f"net_addrs query ({source})"
    except QueryFailed as exc:
        errors.append(f"addresses: {exc}")
    if ip_addrs:
        return ip_addrs, "ip -d -j addr show"
    v6 = parse_if_inet6(host.read("proc/net/if_inet6"))
    if v6:
        errors.append("IPv4 addresses unknown: neither the net_addrs query nor `ip` answered")
        return {n: {"ipv4": [], "ipv6": a} for n, a in v6.items()}, "/proc/net/if_inet6"
    errors.append("addresses unknown: no address source answered")
    return {}, None
