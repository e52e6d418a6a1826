"""network: every interface, its kind, link state, addresses, and whether it has the default route.

NCCL picks its bootstrap and Socket-transport interfaces by name (``NCCL_SOCKET_IFNAME``) and skips
``docker*`` and ``lo`` by default, so the probe reports, per interface:

* its **kind**, from sysfs (no netlink needed): ``loopback`` (ARPHRD 772), ``ipoib`` (ARPHRD 32),
  ``bridge``, ``docker`` (a bridge named ``docker*`` or ``br-<12 hex>``), ``bond``, ``vlan``,
  ``veth``, ``physical`` (it has a ``device`` behind it), or ``virtual`` (anything else
  software-made: dummy, ifb, tun, vxlan...). When ``ip -d -j addr show`` answers, its
  ``linkinfo.info_kind`` (``veth``, ``dummy``, ``bridge``...) confirms the guess and is kept as
  ``link_kind``;
* operstate, carrier, MTU, speed (Mb/s; null when the kernel does not know it) and MAC;
* IPv4 and IPv6 addresses with prefix and subnet, from the ``net_addrs`` query (psutil), else from
  ``ip -j``, else (IPv6 only) from ``/proc/net/if_inet6``;
* for interfaces backed by a device: PCI address, NUMA node and driver;
* the bond or bridge it is enslaved to (``master``), and whether it carries a default route
  (``/proc/net/route``, ``/proc/net/ipv6_route``).

Shell equivalent: ``ip -d addr show; ip route show default; ls -l /sys/class/net``.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import struct
from typing import Any, Optional, TypedDict

from ncclcheck.host import Host, QueryFailed, Unavailable


class Address(TypedDict, total=False):
    """One IP address of an interface."""

    address: str          #: "198.18.0.1" / "fe80::1" (no "%zone")
    prefix: int           #: 24
    subnet: str           #: "198.18.0.0/24"
    scope: str            #: IPv6 only: "global", "link", "host", "site"


class Interface(TypedDict):
    """One network interface."""

    name: str
    kind: str                    #: see :data:`KINDS`
    link_kind: Optional[str]     #: netlink's kind ("veth", "dummy", "bond"...) when ``ip`` told us
    operstate: Optional[str]     #: "up", "down", "unknown", "dormant", "lowerlayerdown"...
    carrier: Optional[bool]      #: null when the kernel refuses to say (interface down)
    mtu: Optional[int]
    speed_mbps: Optional[int]    #: null when unknown (-1, or EINVAL on virtual/down links)
    mac: Optional[str]
    pci_address: Optional[str]   #: "0000:19:00.0" for PCI-backed interfaces
    numa_node: Optional[int]     #: null when unknown or -1
    driver: Optional[str]        #: "mlx5_core", "virtio_net"...
    master: Optional[str]        #: bond or bridge this interface is enslaved to
    ipv4: list[Address]
    ipv6: list[Address]
    default_route: bool


class DefaultRoute(TypedDict):
    """A default route of the main table."""

    family: str                  #: "inet" or "inet6"
    interface: str
    gateway: Optional[str]
    metric: int


class NetworkData(TypedDict):
    """The ``network`` section's data."""

    interfaces: list[Interface]
    default_routes: list[DefaultRoute]
    default_route_interfaces: list[str]
    address_source: Optional[str]   #: "net_addrs query (psutil 7.2.2)", "ip -d -j addr show"...


#: ``{ifname: {"ipv4": [...], "ipv6": [...]}}``
AddressMap = dict[str, dict[str, list[Address]]]


#: Every value ``kind`` takes.
KINDS = ("physical", "bond", "vlan", "bridge", "veth", "docker", "virtual", "ipoib", "loopback")

#: /sys/class/net/<if>/type values (include/uapi/linux/if_arp.h).
ARPHRD_ETHER, ARPHRD_INFINIBAND, ARPHRD_LOOPBACK = 1, 32, 772

_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_DOCKER_BRIDGE = re.compile(r"^(docker\d*|docker_gwbridge|br-[0-9a-f]{12})$")
#: netlink kinds (``ip -d``'s ``info_kind``) that map to a kind of their own.
_LINK_KINDS = {"bridge": "bridge", "bond": "bond", "vlan": "vlan", "veth": "veth", "ipoib": "ipoib"}
#: uevent DEVTYPE values that map to a kind.
_DEVTYPES = {"bridge": "bridge", "bond": "bond", "vlan": "vlan"}
_RTF_UP, _RTF_REJECT = 0x0001, 0x0200
_IPV6_SCOPES = {0x00: "global", 0x10: "host", 0x20: "link", 0x40: "site", 0x80: "compat"}


# -- pure parsers ------------------------------------------------------------------------------

def parse_int(text: Optional[str]) -> Optional[int]:
    """An integer sysfs attribute, or None (missing, garbage, hex accepted with 0x).

    Recorded: ``mtu`` ``1500``, ``speed`` ``-1`` on a virtio NIC, ``flags`` ``0x1003``;
    ``operstate`` ``up`` is not a number.

    >>> parse_int("1500\\n"), parse_int("-1"), parse_int("0x1003"), parse_int(None), parse_int("up")
    (1500, -1, 4099, None, None)
    """
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def natural_key(name: str) -> list[Any]:
    """Sort key that orders numbers by value: mlx5_2 before mlx5_10, eth2 before eth10.

    >>> sorted(["mlx5_10", "mlx5_2", "mlx5_bond_0", "ibp156s0", "ibp26s0"], key=natural_key)
    ['ibp26s0', 'ibp156s0', 'mlx5_2', 'mlx5_10', 'mlx5_bond_0']
    """
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name) if part]


def parse_uevent(text: Optional[str]) -> dict[str, str]:
    """``KEY=VALUE`` lines of a sysfs ``uevent`` file.

    Recorded ``/sys/class/net/docker0/uevent``:

    >>> parse_uevent("DEVTYPE=bridge\\nINTERFACE=docker0\\nIFINDEX=3\\n")
    {'DEVTYPE': 'bridge', 'INTERFACE': 'docker0', 'IFINDEX': '3'}
    >>> parse_uevent(None), parse_uevent("garbage")
    ({}, {})
    """
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_speed(text: Optional[str]) -> Optional[int]:
    """``/sys/class/net/<if>/speed`` in Mb/s; None when unknown (-1, 0, unreadable).

    Recorded: ``400000`` (NDR IPoIB), ``-1`` (virtio), ``4294967295`` (old kernels, unknown).

    >>> parse_speed("400000\\n"), parse_speed("-1"), parse_speed(None), parse_speed("4294967295")
    (400000, None, None, None)
    """
    value = parse_int(text)
    if value is None or value <= 0 or value >= 0xFFFFFFFF:  # SPEED_UNKNOWN read as u32
        return None
    return value


def parse_carrier(text: Optional[str]) -> Optional[bool]:
    """``/sys/class/net/<if>/carrier``: True/False, None when unreadable (EINVAL when down).

    Recorded: ``1`` on a link that is up, ``0`` without a cable; reading it on an
    interface that is down fails with EINVAL (None).

    >>> parse_carrier("1\\n"), parse_carrier("0"), parse_carrier(None), parse_carrier("x")
    (True, False, None, None)
    """
    value = parse_int(text)
    return None if value not in (0, 1) else bool(value)


def parse_numa_node(text: Optional[str]) -> Optional[int]:
    """A ``numa_node`` attribute; None for -1 (no affinity) or unreadable.

    Recorded: ``1`` for a ConnectX-7 on the second socket, ``-1`` on a VM.

    >>> parse_numa_node("1\\n"), parse_numa_node("-1"), parse_numa_node(None)
    (1, None, None)
    """
    value = parse_int(text)
    return value if value is not None and value >= 0 else None


def parse_pci_address(path: Optional[str]) -> Optional[str]:
    """The last PCI address in a sysfs device path (a ``/sys/class/net/<if>`` link target).

    Recorded link targets of an H100 node's IPoIB port and of a virtio VM's eth0 (below).

    >>> parse_pci_address("../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/"
    ...                   "0000:1a:00.0/net/ibp26s0")
    '0000:1a:00.0'
    >>> parse_pci_address("../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0")
    '0000:00:03.0'
    >>> parse_pci_address("../../devices/virtual/net/lo"), parse_pci_address(None)
    (None, None)
    """
    for part in reversed((path or "").split("/")):
        if _PCI_ADDRESS.match(part):
            return part.lower()
    return None


def is_virtual_path(path: Optional[str]) -> Optional[bool]:
    """Whether a ``/sys/class/net/<if>`` link points under ``devices/virtual``; None if unknown.

    >>> is_virtual_path("../../devices/virtual/net/docker0")
    True
    >>> is_virtual_path("../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0")
    False
    >>> is_virtual_path(None) is None
    True
    """
    if not path:
        return None
    return "/devices/virtual/" in "/" + path.lstrip("./")


def classify(name: str, arphrd: Optional[int], devtype: Optional[str], has_device: bool,
             iflink: Optional[int] = None, ifindex: Optional[int] = None,
             link_kind: Optional[str] = None, is_bridge: bool = False,
             is_bond: bool = False) -> str:
    """The kind of an interface, from what sysfs (and optionally netlink) says.

    Args:
        name: interface name.
        arphrd: ``type`` (1 Ethernet, 32 InfiniBand, 772 loopback).
        devtype: uevent ``DEVTYPE`` (bridge, bond, vlan, wlan) or None.
        has_device: a ``device`` is behind it (the class link is not under devices/virtual).
        iflink, ifindex: differ for a veth (iflink is the peer) and stacked devices.
        link_kind: ``ip -d``'s ``linkinfo.info_kind`` when known.
        is_bridge, is_bond: the ``bridge/`` or ``bonding/`` directory exists.

    >>> classify("lo", 772, None, False), classify("ibp25s0", 32, None, True)
    ('loopback', 'ipoib')
    >>> classify("docker0", 1, "bridge", False), classify("br0", 1, "bridge", False)
    ('docker', 'bridge')
    >>> classify("bond0", 1, "bond", False), classify("bond0.100", 1, "vlan", False)
    ('bond', 'vlan')
    >>> classify("eth0", 1, None, False, iflink=12, ifindex=2)  # eth0 inside a container
    'veth'
    >>> classify("dummy0", 1, None, False, iflink=5, ifindex=5, link_kind="dummy")
    'virtual'
    >>> classify("ens5", 1, None, True), classify("wlp2s0", 1, "wlan", True)
    ('physical', 'physical')
    """
    if arphrd == ARPHRD_LOOPBACK:
        return "loopback"
    if arphrd == ARPHRD_INFINIBAND:
        return "ipoib"
    kind = _LINK_KINDS.get(link_kind or "") or _DEVTYPES.get((devtype or "").lower())
    if kind is None and is_bridge:
        kind = "bridge"
    if kind is None and is_bond:
        kind = "bond"
    if kind == "bridge" and _DOCKER_BRIDGE.match(name):
        return "docker"
    if kind is not None:
        return kind
    if has_device:
        return "physical"
    if link_kind:
        return "virtual"
    if arphrd == ARPHRD_ETHER and iflink and ifindex and iflink != ifindex:
        return "veth"
    if name.startswith("veth"):
        return "veth"
    return "virtual"


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
    routes: list[DefaultRoute] = []
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest, gateway, flags = int(fields[1], 16), int(fields[2], 16), int(fields[3], 16)
            metric, mask = int(fields[6]), int(fields[7], 16)
        except ValueError:
            continue
        if dest or mask or not flags & _RTF_UP or flags & _RTF_REJECT:
            continue
        gw = socket.inet_ntoa(struct.pack("<I", gateway)) if gateway else None
        routes.append({"family": "inet", "interface": fields[0], "gateway": gw, "metric": metric})
    return routes


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


# -- collection --------------------------------------------------------------------------------

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


def _interface(host: Host, name: str, link_kind: Optional[str],
               addrs: dict[str, list[Address]], default: bool) -> tuple[Optional[int], Interface]:
    """Read one interface; returns its ifindex (for ordering) and its facts."""
    base = f"sys/class/net/{name}"
    target = host.readlink(base)
    uevent = parse_uevent(host.read(f"{base}/uevent"))
    virtual = is_virtual_path(target)
    has_device = (not virtual) if virtual is not None else host.exists(f"{base}/device")
    pci = parse_pci_address(target) or (
        parse_pci_address(host.readlink(f"{base}/device")) if has_device else None)
    numa = None
    driver = None
    if has_device:
        numa = parse_numa_node(host.read(f"{base}/device/numa_node"))
        if numa is None and pci:
            numa = parse_numa_node(host.read(f"sys/bus/pci/devices/{pci}/numa_node"))
        drv = host.readlink(f"{base}/device/driver")
        driver = drv.rstrip("/").rsplit("/", 1)[-1] if drv else None
    devtype = uevent.get("DEVTYPE")
    is_bridge = is_bond = False
    if devtype is None and link_kind is None and not has_device:
        is_bridge = host.exists(f"{base}/bridge")
        is_bond = not is_bridge and host.exists(f"{base}/bonding")
    arphrd = parse_int(host.read(f"{base}/type"))
    ifindex = parse_int(uevent.get("IFINDEX")) or parse_int(host.read(f"{base}/ifindex"))
    kind = classify(name, arphrd, devtype, has_device,
                    iflink=parse_int(host.read(f"{base}/iflink")), ifindex=ifindex,
                    link_kind=link_kind, is_bridge=is_bridge, is_bond=is_bond)
    master = host.readlink(f"{base}/master")
    operstate = (host.read(f"{base}/operstate") or "").strip() or None
    mac = (host.read(f"{base}/address") or "").strip().lower() or None
    return ifindex, {
        "name": name, "kind": kind, "link_kind": link_kind, "operstate": operstate,
        "carrier": parse_carrier(host.read(f"{base}/carrier")),
        "mtu": parse_int(host.read(f"{base}/mtu")),
        "speed_mbps": parse_speed(host.read(f"{base}/speed")),
        "mac": mac, "pci_address": pci, "numa_node": numa, "driver": driver,
        "master": master.rstrip("/").rsplit("/", 1)[-1] if master else None,
        "ipv4": addrs.get("ipv4", []), "ipv6": addrs.get("ipv6", []),
        "default_route": default,
    }


def collect(host: Host, errors: list[str]) -> NetworkData:
    """Probe every interface of ``host`` (see the module docstring)."""
    names = sorted((n for n in host.listdir("sys/class/net") if n != "bonding_masters"),
                   key=natural_key)
    if not names:
        raise Unavailable("no /sys/class/net: sysfs is not mounted or has no interfaces")
    ip = host.run(["ip", "-d", "-j", "addr", "show"])
    link_kinds, ip_addrs = parse_ip_json(ip.stdout) if ip.ok else ({}, {})
    if not ip.ok and ip.returncode is not None:
        errors.append(ip.why_failed())
    addrs, source = _addresses(host, set(names), errors, ip_addrs)
    routes = (parse_proc_route(host.read("proc/net/route"))
              + parse_ipv6_route(host.read("proc/net/ipv6_route")))
    on_default = {r["interface"] for r in routes}
    found = [_interface(host, n, link_kinds.get(n), addrs.get(n, {}), n in on_default)
             for n in names]
    # `ip link` order: by ifindex; interfaces whose index is unknown go last, by name.
    interfaces = [i for _, i in sorted(found, key=lambda f: (f[0] is None, f[0] or 0))]
    unknown = sorted(set(addrs) - set(names))
    if unknown:
        errors.append(f"addresses of interfaces missing from /sys/class/net: {', '.join(unknown)}")
    return {"interfaces": interfaces, "default_routes": routes,
            "default_route_interfaces": sorted(on_default), "address_source": source}
