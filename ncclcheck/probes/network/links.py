"""One interface as sysfs shows it: its kind, link state, speed, MTU, PCI address, NUMA node and
driver (``/sys/class/net/<if>``, no netlink needed)."""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host.protocol import Host
from ncclcheck.probes.network.types import Address, Interface


#: /sys/class/net/<if>/type values (include/uapi/linux/if_arp.h).
ARPHRD_ETHER, ARPHRD_INFINIBAND, ARPHRD_LOOPBACK = 1, 32, 772
_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_DOCKER_BRIDGE = re.compile(r"^(docker\d*|docker_gwbridge|br-[0-9a-f]{12})$")
#: netlink kinds (``ip -d``'s ``info_kind``) that map to a kind of their own.
_LINK_KINDS = {"bridge": "bridge", "bond": "bond", "vlan": "vlan", "veth": "veth", "ipoib": "ipoib"}
#: uevent DEVTYPE values that map to a kind.
_DEVTYPES = {"bridge": "bridge", "bond": "bond", "vlan": "vlan"}


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
