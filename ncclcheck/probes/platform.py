"""platform: the machine below the GPUs and NICs: virtualisation, IOMMU, PCIe ACS, NVSwitch fabric.

* ``virtualized``: the CPU's ``hypervisor`` flag (``/proc/cpuinfo``); None when unknown;
* ``iommu``: the IOMMU options of ``/proc/cmdline``, and the domain type of each IOMMU group
  that holds a GPU or NIC (``/sys/bus/pci/devices/<bdf>/iommu_group/type``: ``identity`` is
  passthrough, ``DMA`` / ``DMA-FQ`` translate every peer-to-peer access);
* ``acs``: the bridges above each GPU and NIC (from the ``/sys/bus/pci/devices/<bdf>`` link) with
  their ``ACSCtl`` line of ``lspci -D -vvv`` (needs root to show capabilities; run only where
  there is an NVIDIA GPU). ``acs_readable`` is False when lspci printed no capability at all;
* ``fabric``: per GPU, ``fabric.state`` / ``fabric.status`` of ``nvidia-smi --query-gpu``
  (Not Started, In Progress, Completed; N/A without an NVSwitch fabric), and whether the
  ``nvidia-fabricmanager`` service is active (``systemctl is-active``; None without systemd).

Shell equivalent: ``cat /proc/cmdline; lspci -vvv | grep ACSCtl; nvidia-smi -q | grep -A2 Fabric``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host import Host
from ncclcheck.probes.network import parse_pci_address

#: PCI classes probed: 3D/VGA controllers (GPUs), Ethernet and InfiniBand controllers (NICs).
GPU_CLASSES, NIC_CLASSES = ("0x0302", "0x0300"), ("0x0200", "0x0207")
NVIDIA = "0x10de"
_BDF = re.compile(r"^([0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s")
_FLAG = re.compile(r"(\w+)([+-])")
IOMMU_OPTIONS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough")
FABRIC_QUERY = ["nvidia-smi", "--query-gpu=pci.bus_id,fabric.state,fabric.status",
                "--format=csv,noheader"]


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

    Sample: a PCIe switch port above a GPU with ACS on, in lspci's format (the ACSCtl line NCCL's
    troubleshooting page tells users to look for, as reported in NVIDIA/nccl#199; other lines
    cut; not captured by us from a live machine):

    >>> text = ("0000:16:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane (rev ca)\\n"
    ...         "\\tCapabilities: [f24 v1] Access Control Services\\n"
    ...         "\\t\\tACSCap:\\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ "
    ...         "EgressCtrl+ DirectTrans+\\n"
    ...         "\\t\\tACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
    ...         "EgressCtrl- DirectTrans-\\n\\n"
    ...         "0000:17:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\\n")
    >>> acs = parse_lspci_acs(text)
    >>> sorted(acs), acs["0000:16:00.0"]["ReqRedir"], acs["0000:16:00.0"]["TransBlk"]
    (['0000:16:00.0'], True, False)
    >>> parse_lspci_acs(None), parse_lspci_acs("garbage")
    ({}, {})
    """
    out: dict[str, dict[str, bool]] = {}
    device = None
    for line in (text or "").splitlines():
        head = _BDF.match(line)
        if head:
            device = head.group(1).lower()
            continue
        if device and line.strip().startswith("ACSCtl:"):
            out[device] = {k: v == "+" for k, v in _FLAG.findall(line.split(":", 1)[1])}
    return out


def parse_fabric(text: Optional[str]) -> list[dict[str, Optional[str]]]:
    """``nvidia-smi --query-gpu=pci.bus_id,fabric.state,fabric.status --format=csv,noheader``.

    Samples in nvidia-smi's csv format (states as NVML names them: Not Started, In Progress,
    Completed; ``[N/A]`` where a GPU has no fabric); an HGX GPU waiting for a stopped fabric
    manager, one that joined, and a PCIe GPU:

    >>> parse_fabric("00000000:18:00.0, In Progress, N/A\\n00000000:2A:00.0, Completed, Success\\n")
    [{'pci_bus_id': '0000:18:00.0', 'state': 'In Progress', 'status': None}, \
{'pci_bus_id': '0000:2a:00.0', 'state': 'Completed', 'status': 'Success'}]
    >>> parse_fabric("00000000:01:00.0, [N/A], [N/A]\\n")
    [{'pci_bus_id': '0000:01:00.0', 'state': None, 'status': None}]
    >>> parse_fabric('Field "fabric.state" is not a valid field to query.'), parse_fabric(None)
    ([], [])
    """
    out = []
    for line in (text or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not re.match(r"^[0-9A-Fa-f]{4,}:", fields[0]):
            continue
        bdf = fields[0].lower()
        bdf = bdf[-12:] if len(bdf) > 12 else bdf  # 00000000:18:00.0 -> 0000:18:00.0
        value = [None if f.strip("[]") in ("N/A", "Not Supported", "") else f for f in fields[1:]]
        out.append({"pci_bus_id": bdf, "state": value[0], "status": value[1]})
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
    return {
        "virtualized": None if flags is None else "hypervisor" in flags.group(1).split(),
        "iommu": {"cmdline": parse_cmdline_iommu(host.read("proc/cmdline")),
                  "groups": len(host.listdir("sys/kernel/iommu_groups"))},
        "acs_readable": readable,
        "pci_paths": paths,
        "fabric": fabric,
        "fabric_manager": state or None,
    }
