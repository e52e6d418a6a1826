"""platform: the machine below the GPUs and NICs: virtualisation, IOMMU, PCIe ACS, NVSwitch fabric.

* ``virtualized``: the CPU's ``hypervisor`` flag (``/proc/cpuinfo``); None when unknown;
* ``iommu``: the IOMMU options of ``/proc/cmdline``, and the domain type of each IOMMU group
  that holds a GPU or NIC (``/sys/bus/pci/devices/<bdf>/iommu_group/type``: ``identity`` is
  passthrough, ``DMA`` / ``DMA-FQ`` translate every peer-to-peer access);
* ``acs``: the bridges above each GPU and NIC (from the ``/sys/bus/pci/devices/<bdf>`` link) with
  their ``ACSCtl`` line of ``lspci -D -vvv`` (needs root to show capabilities; run only where
  there is an NVIDIA GPU). ``acs_readable`` is False when lspci printed no capability at all;
* ``fabric``: per GPU, the ``Fabric`` section of ``nvidia-smi -q`` (State: Not Started, In
  Progress, Completed; Status: Success or an error such as Insufficient Resources; N/A without
  an NVSwitch fabric; older drivers have no csv field for it, every driver since R525 prints
  the section), and whether the ``nvidia-fabricmanager`` service is active
  (``systemctl is-active``; None without systemd);
* ``imex``: in an NVLink domain (a ClusterUUID in the Fabric section: GB200/GB300), whether the
  ``nvidia-imex`` service is active, and the IMEX channel devices this process sees
  (``/dev/nvidia-caps-imex-channels/channel<N>``; a container needs one passed in).

Shell equivalent: ``cat /proc/cmdline; lspci -vvv | grep ACSCtl; nvidia-smi -q | grep -A2 Fabric``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host.protocol import Host
from ncclcheck.probes.network.links import parse_pci_address

#: PCI classes probed: 3D/VGA controllers (GPUs), Ethernet and InfiniBand controllers (NICs).
GPU_CLASSES, NIC_CLASSES = ("0x0302", "0x0300"), ("0x0200", "0x0207")
NVIDIA = "0x10de"
_BDF = re.compile(r"^((?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s")
_FLAG = re.compile(r"(\w+)([+-])")
IOMMU_OPTIONS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough")
FABRIC_QUERY = ["nvidia-smi", "-q"]
_SMI_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_NA = ("N/A", "Not Supported", "")


def parse_cmdline_iommu(text: Optional[str]) -> dict[str, str]:
    """The IOMMU options of a kernel command line.

    Sample ``/proc/cmdline`` in the form DGX OS 6 boots with (cut):

    >>> parse_cmdline_iommu("BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia root=UUID=1 ro "
    ...                     "intel_iommu=on iommu=pt pci=realloc=off\\n")
    {'intel_iommu': 'on', 'iommu': 'pt'}
    >>> parse_cmdline_iommu("ro quiet"), parse_cmdline_iommu(None)
    ({}, {})
    """
    out = {}
    for token in (text or "").split():
        key, _, value = token.partition("=")
        if key in IOMMU_OPTIONS:
            out[key] = value
    return out


def parse_lspci_acs(text: Optional[str]) -> dict[str, dict[str, bool]]:
    """``lspci -D -vvv`` -> ``{bdf: {"SrcValid": True, "ReqRedir": False, ...}}`` from ACSCtl.

    Recorded real output (tests/fixtures/platform/SOURCES.md): an AMD GPP bridge above a
    ConnectX-6 and two GPUs with ACS on, from ROCm/rccl#547 (plain ``lspci -vvv``, no domain:
    0000 is assumed; the poster cut lines with ``....``):

    >>> text = ("40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP "
    ...         "Bridge (prog-if 00 [Normal decode])\\n....\\n\\tNUMA node: 1\\n....\\n"
    ...         "\\tCapabilities: [2a0 v1] Access Control Services\\n"
    ...         "\\t\\tACSCap:\\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ "
    ...         "EgressCtrl- DirectTrans+\\n"
    ...         "\\t\\tACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
    ...         "EgressCtrl- DirectTrans-\\n....\\n")
    >>> acs = parse_lspci_acs(text)
    >>> sorted(acs), acs["0000:40:01.1"]["ReqRedir"], acs["0000:40:01.1"]["TransBlk"]
    (['0000:40:01.1'], True, False)
    >>> parse_lspci_acs(None), parse_lspci_acs("garbage")
    ({}, {})
    """
    out: dict[str, dict[str, bool]] = {}
    device = None
    for line in (text or "").splitlines():
        head = _BDF.match(line)
        if head:
            device = head.group(1).lower()
            device = device if device.count(":") == 2 else "0000:" + device
            continue
        if device and line.strip().startswith("ACSCtl:"):
            out[device] = {k: v == "+" for k, v in _FLAG.findall(line.split(":", 1)[1])}
    return out


def parse_fabric(text: Optional[str]) -> list[dict[str, Optional[str]]]:
    """The ``Fabric`` section of each GPU in ``nvidia-smi -q``: ``[{pci_bus_id, state, status,
    clique_id, cluster_uuid}]`` (a zero ClusterUUID reads as None: no NVLink domain).

    Recorded real outputs (tests/fixtures/platform/SOURCES.md). A GPU waiting for the fabric
    manager, from NVIDIA/gpu-operator#2511 (driver 580.159.04, GPU header cut by the poster):

    >>> stuck = ("    Fabric\\n"
    ...          "        State                                          : In Progress\\n"
    ...          "        Status                                         : N/A\\n"
    ...          "        CliqueId                                       : N/A\\n")
    >>> parse_fabric(stuck)
    [{'pci_bus_id': None, 'state': 'In Progress', 'status': None, 'clique_id': None, 'cluster_uuid': None}]

    A GPU registered but refused, from Azure/azhpc-images#506 (which quotes the block alone; the
    ``GPU <bus id>`` header line nvidia-smi prints above each GPU's section is added here, in
    nvidia-smi's form, to show that the bus id is taken from it):

    >>> parse_fabric("GPU 00000000:18:00.0\\n"
    ...              "Fabric\\n    State                             : Completed\\n"
    ...              "    Status                            : Insufficient Resources\\n"
    ...              "    CliqueId                          : 0\\n")
    [{'pci_bus_id': '0000:18:00.0', 'state': 'Completed', 'status': 'Insufficient Resources', \
'clique_id': '0', 'cluster_uuid': None}]

    A PCIe GPU (no fabric), and text without the section:

    >>> parse_fabric("GPU 00000000:01:00.0\\n    Fabric\\n        State : N/A\\n"
    ...              "        Status : N/A\\n")
    [{'pci_bus_id': '0000:01:00.0', 'state': None, 'status': None, 'clique_id': None, \
'cluster_uuid': None}]
    >>> parse_fabric("No devices were found"), parse_fabric(None)
    ([], [])

    A GB200 tray in an NVLink domain (kubernetes-sigs/dra-driver-nvidia-gpu#626): its clique
    and the domain's ClusterUUID, which MNNVL needs to match across the job's trays:

    >>> parse_fabric("    Fabric\\n        State                             : Completed\\n"
    ...              "        Status                            : Success\\n"
    ...              "        CliqueId                          : 2\\n"
    ...              "        ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278\\n"
    ...              "        Health\\n            Summary                       : Unhealthy\\n")[0]["clique_id"]
    '2'
    """
    out: list[dict[str, Optional[str]]] = []
    bdf: Optional[str] = None
    block: Optional[dict[str, Optional[str]]] = None
    depth = 0
    for line in (text or "").splitlines():
        head = _SMI_GPU.match(line.strip())
        if head:
            bdf, block = head.group(1).lower()[-12:], None  # 00000000:18:00.0 -> 0000:18:00.0
            continue
        indent = len(line) - len(line.lstrip())
        if line.strip() == "Fabric":
            block, depth = {"pci_bus_id": bdf, "state": None, "status": None,
                            "clique_id": None, "cluster_uuid": None}, indent
            out.append(block)
            continue
        if block is None or not line.strip():
            continue
        if indent <= depth:
            block = None
            continue
        key, _, value = line.partition(":")
        if key.strip() in ("State", "Status", "CliqueId", "ClusterUUID"):
            value = value.strip()
            name = {"CliqueId": "clique_id", "ClusterUUID": "cluster_uuid"}.get(
                key.strip(), key.strip().lower())
            zero = name == "cluster_uuid" and not value.replace("0", "").replace("-", "")
            block[name] = None if value.strip("[]") in _NA or zero else value
    return out


def parse_upstream(link: Optional[str]) -> list[str]:
    """The PCI bridges above a device, top first, from its ``/sys/bus/pci/devices`` link.

    >>> parse_upstream("../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/"
    ...                "0000:1a:00.0")
    ['0000:15:01.0', '0000:16:00.0', '0000:17:01.0']
    >>> parse_upstream(None)
    []
    """
    parts = [p.lower() for p in (link or "").split("/") if parse_pci_address(p)]
    return parts[:-1]


def _devices(host: Host) -> dict[str, str]:
    """``{bdf: "gpu" | "nic"}`` for NVIDIA GPUs and network controllers."""
    out = {}
    for bdf in host.listdir("sys/bus/pci/devices"):
        cls = (host.read(f"sys/bus/pci/devices/{bdf}/class") or "").strip()[:6]
        vendor = (host.read(f"sys/bus/pci/devices/{bdf}/vendor") or "").strip()
        if cls in GPU_CLASSES and vendor == NVIDIA:
            out[bdf.lower()] = "gpu"
        elif cls in NIC_CLASSES:
            out[bdf.lower()] = "nic"
    return out


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Virtualisation, IOMMU, ACS and fabric state (see the module docstring)."""
    cpuinfo = host.read("proc/cpuinfo")
    flags = re.search(r"^flags\s*:(.*)$", cpuinfo or "", re.M)
    devices = _devices(host)
    groups = {}
    for bdf in devices:
        group = host.readlink(f"sys/bus/pci/devices/{bdf}/iommu_group")
        if group:
            name = group.rstrip("/").rsplit("/", 1)[-1]
            groups[bdf] = (host.read(f"sys/kernel/iommu_groups/{name}/type") or "").strip() or None
    gpus = any(k == "gpu" for k in devices.values())
    lspci = host.run(["lspci", "-D", "-vvv"], timeout=15) if gpus else None
    acs = parse_lspci_acs(lspci.stdout) if lspci and lspci.ok else {}
    if lspci is not None and not lspci.ok:
        errors.append(f"ACS unknown: {lspci.why_failed()}")
    readable = bool(lspci and lspci.ok and "Capabilities:" in lspci.stdout
                    and "<access denied>" not in lspci.stdout)
    if lspci and lspci.ok and not readable:
        errors.append("ACS unknown: lspci shows no PCI capabilities (run as root)")
    paths = []
    for bdf, kind in sorted(devices.items()):
        bridges = parse_upstream(host.readlink(f"sys/bus/pci/devices/{bdf}"))
        paths.append({"device": bdf, "kind": kind, "iommu_group_type": groups.get(bdf),
                      "bridges": [{"bdf": b, "acs": acs.get(b)} for b in bridges]})
    fabric: list = []
    if gpus:
        smi = host.run(FABRIC_QUERY, timeout=10)
        fabric = parse_fabric(smi.stdout) if smi.ok else []
    fm = host.run(["systemctl", "is-active", "nvidia-fabricmanager"])
    state = fm.stdout.strip() if fm.returncode is not None and not fm.timed_out else None
    imex_state = None
    if any(f.get("cluster_uuid") for f in fabric):  # an NVLink domain (GB200/GB300): IMEX
        imex = host.run(["systemctl", "is-active", "nvidia-imex"])
        imex_state = imex.stdout.strip() if imex.returncode is not None and not imex.timed_out \
            else None
    return {
        "virtualized": None if flags is None else "hypervisor" in flags.group(1).split(),
        "iommu": {"cmdline": parse_cmdline_iommu(host.read("proc/cmdline")),
                  "groups": len(host.listdir("sys/kernel/iommu_groups"))},
        "acs_readable": readable,
        "pci_paths": paths,
        "fabric": fabric,
        "fabric_manager": state or None,
        "imex": {"service": imex_state or None,
                 "channels": sorted(host.listdir("dev/nvidia-caps-imex-channels"))},
    }
