"""ib: RDMA devices and ports (``/sys/class/infiniband``), ``/dev/infiniband``, GPUDirect RDMA.

What NCCL's internal IB transport looks at (``src/transport/net_ib/init.cc``, ``connect.cc``,
``gdr.cc``), read from sysfs so no verbs library is needed:

* per device: PCI address, NUMA node, firmware, node GUID, HCA type, board id;
* per port: state (``ACTIVE``), physical state (``LinkUp``), rate, link layer (``InfiniBand``, or
  ``Ethernet`` for RoCE), LID, the netdev behind it (RoCE: the GID entries' ``ndevs``; IPoIB: the
  device's ``net/``), and the GID table: each non-empty entry with its type (``IB``, ``RoCE v1``,
  ``RoCE v2``), its IPv4 address when the GID is IPv4-mapped (``::ffff:a.b.c.d``) and its netdev.
  ``roce_v2_ipv4_gid_index`` is the first RoCE v2 IPv4 entry, the one NCCL >= 2.21 picks by
  default (``ncclIbGetGidIndex``) and the value older NCCL needs in ``NCCL_IB_GID_INDEX``;
* whether ``/dev/infiniband`` (uverbs, rdma_cm) is visible: in a container without
  ``--device=/dev/infiniband`` the sysfs devices show but verbs cannot open them;
* GPUDirect RDMA readiness (``gdr``): NCCL offers GPU memory to the NIC when
  ``/sys/kernel/mm/memory_peers/nv_mem/version``, ``.../nv_mem_nc/version`` or
  ``/sys/module/nvidia_peermem/version`` exists, or when DMA-BUF registration works
  (``src/transport/net_ib/gdr.cc``). DMA-BUF can only be proven at run time (a dummy
  ``ibv_reg_dmabuf_mr`` plus ``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED``); the probe infers it,
  and says so, from a kernel >= 5.12 (ib_umem_dmabuf) and the NVIDIA *open* kernel module, which
  ``/proc/driver/nvidia/version`` names ("Open Kernel Module"; the proprietary module reports no
  DMA-BUF support).

Shell equivalents: ``ibstat``, ``ibv_devinfo``, ``show_gids``, ``lsmod | grep peermem``; the
RoCE QoS and PCIe write ordering (``qos``, ``pci_ordering``) come from ``mlnx_qos`` and
``mlxconfig`` (:mod:`~ncclcheck.probes.ib_nicconf`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Optional, TypedDict

from ncclcheck.host.protocol import Host, Unavailable
from ncclcheck.probes.gpu import parse_proc_version
from ncclcheck.probes.ib_nicconf import pci_ordering, qos_entries
from ncclcheck.probes.network.links import (natural_key, parse_int, parse_numa_node,
                                            parse_pci_address)


class Gid(TypedDict):
    """One non-empty GID table entry."""

    index: int
    gid: str                 #: as sysfs prints it: "fe80:0000:0000:0000:5aa2:e1ff:feda:e626"
    type: Optional[str]      #: "IB", "RoCE v1", "RoCE v2"; None when unreadable
    ipv4: Optional[str]      #: "10.20.0.21" for an IPv4-mapped GID
    netdev: Optional[str]    #: gid_attrs/ndevs (RoCE only)


class Port(TypedDict):
    """One port of an RDMA device."""

    port: int
    state: Optional[str]         #: "ACTIVE", "DOWN", "INIT", "ARMED"
    phys_state: Optional[str]    #: "LinkUp", "Polling", "Disabled"...
    rate: Optional[str]          #: "400 Gb/sec (4X NDR)"
    rate_gbps: Optional[float]   #: 400
    link_layer: Optional[str]    #: "InfiniBand" or "Ethernet"
    lid: Optional[int]
    sm_lid: Optional[int]
    netdev: Optional[str]
    gids: list[Gid]
    roce_v2_ipv4_gid_index: Optional[int]


class Device(TypedDict):
    """One RDMA device (``mlx5_0``, ``mlx5_bond_0``...)."""

    name: str
    pci_address: Optional[str]
    numa_node: Optional[int]
    fw_ver: Optional[str]
    node_guid: Optional[str]
    hca_type: Optional[str]
    board_id: Optional[str]
    ports: list[Port]


class DevInfiniband(TypedDict):
    """What ``/dev/infiniband`` holds."""

    visible: bool
    entries: list[str]       #: "rdma_cm", "uverbs0", ...
    uverbs: int              #: how many uverbs* nodes


class Gdr(TypedDict):
    """GPUDirect RDMA readiness."""

    peermem: bool                       #: /sys/module/nvidia_peermem/version exists
    peermem_version: Optional[str]
    nv_peer_mem: bool                   #: legacy Mellanox nv_peer_mem (memory_peers/nv_mem*)
    dmabuf: Optional[bool]              #: inferred; None when it cannot be told
    dmabuf_basis: str                   #: why dmabuf is what it is
    kernel: Optional[str]               #: /proc/sys/kernel/osrelease
    nvidia_kernel_module: Optional[str]  #: "open", "proprietary", None (no driver)
    ready: Optional[bool]
    reason: str


class IbData(TypedDict):
    """The ``ib`` section's data."""

    devices: list[Device]
    dev_infiniband: DevInfiniband
    gdr: Gdr
    qos: list[dict]             #: RoCE ports' PFC/trust (:mod:`~ncclcheck.probes.ib_nicconf`)
    pci_ordering: list[dict]    #: NICs' PCI_WR_ORDERING (:mod:`~ncclcheck.probes.ib_nicconf`)


#: Consecutive empty GID entries after which the scan stops. The kernel's GID cache fills the
#: lowest free slot first (drivers/infiniband/core/cache.c), so a long empty run means the rest
#: of the table (128-256 entries) is empty too; stopping keeps the reads (and facts) small.
GID_EMPTY_RUN = 32
#: Kernel release from which the RDMA core registers DMA-BUF memory (ib_umem_dmabuf, Linux 5.12).
DMABUF_MIN_KERNEL = (5, 12)

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((\d+X)\s*([A-Za-z0-9]*)\))?")
_ZERO_GID = re.compile(r"^[0:]+$")


# -- pure parsers ------------------------------------------------------------------------------

def parse_state(text: Optional[str]) -> Optional[str]:
    """A port ``state`` or ``phys_state`` file ("4: ACTIVE", "5: LinkUp") -> its name.

    Recorded ``state`` and ``phys_state`` values of a ConnectX-7 port (below).

    >>> parse_state("4: ACTIVE\\n"), parse_state("5: LinkUp"), parse_state("3: Disabled")
    ('ACTIVE', 'LinkUp', 'Disabled')
    >>> parse_state(None), parse_state(""), parse_state("ACTIVE")
    (None, None, 'ACTIVE')
    """
    if not text or not text.strip():
        return None
    _, _, name = text.strip().rpartition(":")
    return name.strip() or None


def parse_rate(text: Optional[str]) -> Optional[float]:
    """A port ``rate`` file -> Gb/s (an int when whole).

    Recorded: ``400 Gb/sec (4X NDR)`` (ConnectX-7 NDR), ``10 Gb/sec (4X)`` (a port that is down,
    SDR has no suffix), ``53.125 Gb/sec (1X HDR)``-style fractions exist too.

    >>> parse_rate("400 Gb/sec (4X NDR)\\n"), parse_rate("10 Gb/sec (4X)")
    (400, 10)
    >>> parse_rate("2.5 Gb/sec (1X)"), parse_rate("53.125 Gb/sec (1X HDR)")
    (2.5, 53.125)
    >>> parse_rate(None), parse_rate("fast")
    (None, None)
    """
    match = _RATE.match(text or "")
    if not match:
        return None
    value = float(match.group(1))
    return int(value) if value.is_integer() else value


def parse_gid(text: Optional[str]) -> Optional[str]:
    """A ``gids/<i>`` file -> the GID as sysfs prints it, None when empty or garbage.

    Recorded: the link-local GID of a ConnectX-6 port; unused entries read as zeros.

    >>> parse_gid("fe80:0000:0000:0000:5aa2:e1ff:feda:e626\\n")
    'fe80:0000:0000:0000:5aa2:e1ff:feda:e626'
    >>> parse_gid("0000:0000:0000:0000:0000:0000:0000:0000"), parse_gid(None), parse_gid("zz")
    (None, None, None)
    """
    gid = (text or "").strip().lower()
    if not gid or _ZERO_GID.match(gid):
        return None
    try:
        ipaddress.IPv6Address(gid)
    except ValueError:
        return None
    return gid


def gid_ipv4(gid: Optional[str]) -> Optional[str]:
    """The IPv4 address inside an IPv4-mapped GID (``::ffff:a.b.c.d``), else None.

    >>> gid_ipv4("0000:0000:0000:0000:0000:ffff:c612:0001")
    '198.18.0.1'
    >>> gid_ipv4("fe80:0000:0000:0000:5aa2:e1ff:feda:e626"), gid_ipv4(None), gid_ipv4("x")
    (None, None, None)
    """
    try:
        mapped = ipaddress.IPv6Address(gid or "").ipv4_mapped
    except ValueError:
        return None
    return str(mapped) if mapped else None


def parse_gid_type(text: Optional[str], link_layer: Optional[str]) -> Optional[str]:
    """A ``gid_attrs/types/<i>`` file -> "IB", "RoCE v1" or "RoCE v2".

    Recorded ``gid_attrs/types/<i>`` values: ``IB/RoCE v1`` and ``RoCE v2``.

    The kernel prints ``IB/RoCE v1`` for both IB and RoCE v1 entries; the link layer tells which.

    >>> parse_gid_type("RoCE v2\\n", "Ethernet"), parse_gid_type("IB/RoCE v1", "Ethernet")
    ('RoCE v2', 'RoCE v1')
    >>> parse_gid_type("IB/RoCE v1", "InfiniBand"), parse_gid_type(None, "Ethernet")
    ('IB', None)
    """
    raw = (text or "").strip()
    if not raw:
        return None
    if "v2" in raw:
        return "RoCE v2"
    if link_layer == "InfiniBand":
        return "IB"
    return "RoCE v1" if "v1" in raw else raw


def parse_kernel_release(text: Optional[str]) -> Optional[tuple[int, int]]:
    """``/proc/sys/kernel/osrelease`` -> (major, minor).

    Recorded: ``5.15.0-91-generic`` (Ubuntu), ``6.8.0-1015-nvidia`` (DGX OS).

    >>> parse_kernel_release("5.15.0-91-generic\\n"), parse_kernel_release("6.8.0-1015-nvidia")
    ((5, 15), (6, 8))
    >>> parse_kernel_release("garbage"), parse_kernel_release(None)
    (None, None)
    """
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def gdr_readiness(peermem: bool, nv_peer_mem: bool, kernel: Optional[tuple[int, int]],
                  flavor: Optional[str]) -> tuple[Optional[bool], str, Optional[bool], str]:
    """Decide GPUDirect RDMA readiness like NCCL's gdr.cc, inferring DMA-BUF.

    Returns:
        (ready, reason, dmabuf, dmabuf_basis).

    >>> gdr_readiness(True, False, (5, 15), "proprietary")[:2]
    (True, 'nvidia_peermem is loaded')
    >>> gdr_readiness(False, False, (6, 8), "open")[:3]
    (True, 'DMA-BUF is likely usable (inferred, not tested)', True)
    >>> ready, reason, dmabuf, _ = gdr_readiness(False, False, (5, 15), "proprietary")
    >>> ready, dmabuf, reason.split(":")[0]
    (False, False, 'nvidia_peermem not loaded and DMA-BUF unavailable')
    >>> gdr_readiness(False, False, None, "proprietary")[::2]  # kernel unknown: still no DMA-BUF
    (False, False)
    >>> gdr_readiness(False, False, (5, 4), "open")[2], gdr_readiness(False, False, None, "open")[2]
    (False, None)
    >>> gdr_readiness(False, False, (6, 8), None)[3]
    'no NVIDIA driver seen (/proc/driver/nvidia/version)'
    """
    if flavor == "proprietary":
        dmabuf, basis = False, "the proprietary NVIDIA kernel module has no DMA-BUF support"
    elif kernel is not None and kernel < DMABUF_MIN_KERNEL:
        dmabuf, basis = False, f"kernel {kernel[0]}.{kernel[1]} is older than 5.12"
    elif kernel is None:
        dmabuf, basis = None, "kernel release unknown"
    elif flavor == "open":
        dmabuf, basis = True, (f"inferred: kernel {kernel[0]}.{kernel[1]} >= 5.12 and the NVIDIA "
                               "open kernel module; NCCL confirms at run time")
    else:
        dmabuf, basis = None, "no NVIDIA driver seen (/proc/driver/nvidia/version)"
    if peermem or nv_peer_mem:
        name = "nvidia_peermem" if peermem else "nv_peer_mem"
        return True, f"{name} is loaded", dmabuf, basis
    if dmabuf:
        return True, "DMA-BUF is likely usable (inferred, not tested)", dmabuf, basis
    if dmabuf is False:
        return False, f"nvidia_peermem not loaded and DMA-BUF unavailable: {basis}", dmabuf, basis
    return None, f"nvidia_peermem not loaded; DMA-BUF unknown: {basis}", dmabuf, basis


# -- collection --------------------------------------------------------------------------------

def _text(host: Host, path: str) -> Optional[str]:
    value = (host.read(path) or "").strip()
    return value or None


def _numeric(names: list[str]) -> list[int]:
    return sorted(int(n) for n in names if n.isdigit())


def _gids(host: Host, base: str, link_layer: Optional[str]) -> list[Gid]:
    gids: list[Gid] = []
    empty_run = 0
    for index in _numeric(host.listdir(f"{base}/gids")):
        gid = parse_gid(host.read(f"{base}/gids/{index}"))
        if gid is None:
            empty_run += 1
            if empty_run >= GID_EMPTY_RUN:
                break
            continue
        empty_run = 0
        roce = link_layer == "Ethernet"
        netdev = _text(host, f"{base}/gid_attrs/ndevs/{index}") if roce else None
        gid_type = parse_gid_type(host.read(f"{base}/gid_attrs/types/{index}"), link_layer)
        gids.append({"index": index, "gid": gid, "type": gid_type, "ipv4": gid_ipv4(gid),
                     "netdev": netdev})
    return gids


def _port_netdev(host: Host, dev: str, port: int, gids: list[Gid]) -> Optional[str]:
    """The netdev behind a port: the GIDs' ndev (RoCE), else the device's only/matching net/."""
    for gid in gids:
        if gid["netdev"]:
            return gid["netdev"]
    net_dir = f"sys/class/infiniband/{dev}/device/net"
    nets = host.listdir(net_dir)
    if len(nets) == 1:
        return nets[0]
    for net in nets:  # multi-port functions: dev_port is 0-based (ibdev2netdev does the same)
        if parse_int(host.read(f"{net_dir}/{net}/dev_port")) == port - 1:
            return net
    return None


def _port(host: Host, dev: str, port: int) -> Port:
    base = f"sys/class/infiniband/{dev}/ports/{port}"
    link_layer = _text(host, f"{base}/link_layer")
    gids = _gids(host, base, link_layer)
    rate = _text(host, f"{base}/rate")
    v2 = [g["index"] for g in gids if g["type"] == "RoCE v2" and g["ipv4"]]
    return {
        "port": port,
        "state": parse_state(host.read(f"{base}/state")),
        "phys_state": parse_state(host.read(f"{base}/phys_state")),
        "rate": rate, "rate_gbps": parse_rate(rate), "link_layer": link_layer,
        "lid": parse_int(host.read(f"{base}/lid")),
        "sm_lid": parse_int(host.read(f"{base}/sm_lid")),
        "netdev": _port_netdev(host, dev, port, gids),
        "gids": gids,
        "roce_v2_ipv4_gid_index": v2[0] if v2 else None,
    }


def _device(host: Host, dev: str) -> Device:
    base = f"sys/class/infiniband/{dev}"
    pci = (parse_pci_address(host.readlink(base))
           or parse_pci_address(host.readlink(f"{base}/device")))
    numa = parse_numa_node(host.read(f"{base}/device/numa_node"))
    if numa is None and pci:
        numa = parse_numa_node(host.read(f"sys/bus/pci/devices/{pci}/numa_node"))
    return {
        "name": dev, "pci_address": pci, "numa_node": numa,
        "fw_ver": _text(host, f"{base}/fw_ver"),
        "node_guid": _text(host, f"{base}/node_guid"),
        "hca_type": _text(host, f"{base}/hca_type"),
        "board_id": _text(host, f"{base}/board_id"),
        "ports": [_port(host, dev, p) for p in _numeric(host.listdir(f"{base}/ports"))],
    }


def _dev_infiniband(host: Host) -> DevInfiniband:
    entries = host.listdir("dev/infiniband") if host.isdir("dev/infiniband") else []
    return {"visible": bool(entries), "entries": entries,
            "uverbs": sum(1 for e in entries if e.startswith("uverbs"))}


def _gdr(host: Host) -> Gdr:
    peermem_path = "sys/module/nvidia_peermem/version"
    peermem = host.exists(peermem_path)
    nv_peer_mem = any(host.exists(f"sys/kernel/mm/memory_peers/{name}/version")
                      for name in ("nv_mem", "nv_mem_nc"))
    release = _text(host, "proc/sys/kernel/osrelease")
    module = parse_proc_version(host.read("proc/driver/nvidia/version") or "")
    flavor = None if module is None else "open" if module["open"] else "proprietary"
    ready, reason, dmabuf, basis = gdr_readiness(peermem, nv_peer_mem,
                                                 parse_kernel_release(release), flavor)
    return {"peermem": peermem, "peermem_version": _text(host, peermem_path) if peermem else None,
            "nv_peer_mem": nv_peer_mem, "dmabuf": dmabuf, "dmabuf_basis": basis,
            "kernel": release, "nvidia_kernel_module": flavor, "ready": ready, "reason": reason}


def collect(host: Host, errors: list[str]) -> IbData:
    """Probe RDMA devices of ``host`` (see the module docstring).

    Raises:
        Unavailable: no RDMA device in /sys/class/infiniband.
    """
    names = sorted(host.listdir("sys/class/infiniband"), key=natural_key)
    if not names:
        why = ("is empty" if host.isdir("sys/class/infiniband")
               else "is absent (no RDMA driver loaded, or /sys not mounted)")
        raise Unavailable(f"no RDMA devices: /sys/class/infiniband {why}")
    devices = [_device(host, name) for name in names]
    for dev in devices:
        if not dev["ports"]:
            errors.append(f"{dev['name']}: no ports in /sys/class/infiniband/{dev['name']}/ports")
    dev_ib = _dev_infiniband(host)
    if not dev_ib["visible"]:
        errors.append("/dev/infiniband is not visible: verbs cannot open the devices "
                      "(in a container, pass --device=/dev/infiniband)")
    return {"devices": devices, "dev_infiniband": dev_ib, "gdr": _gdr(host),
            "qos": qos_entries(host, devices, errors),
            "pci_ordering": pci_ordering(host, devices, errors)}
