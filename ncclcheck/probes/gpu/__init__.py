"""gpu: the NVIDIA driver, each GPU, NVLink, and the GPU/NIC topology of ``nvidia-smi topo -m``.

Sources, best first: the ``nvml`` query (:mod:`ncclcheck.native.nvml`); ``nvidia-smi`` when NVML
cannot load (``--query-gpu`` CSV, the banner for the CUDA version, ``topo -p2p r|w``);
``nvidia-smi topo -m`` for the NIC columns and CPU/NUMA affinity; ``/proc/driver/nvidia/version``
for the kernel module; ``/sys/bus/pci/devices/<bdf>/numa_node`` for each GPU's NUMA node.
GPUs are keyed by PCI bus id (``0000:18:00.0``, sysfs spelling), never by CUDA index alone.

The work is split by source; this module holds the kernel module, the pair summaries and
:func:`collect`, and each other name lives in one module: :mod:`~ncclcheck.probes.gpu.types`
(the section's shapes), :mod:`~ncclcheck.probes.gpu.nvml` (the NVML snapshot) and
:mod:`~ncclcheck.probes.gpu.smi` (``nvidia-smi`` output).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn, Optional

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import CommandResult, Host, Unavailable
from ncclcheck.probes.gpu.nvml import parse_nvml
from ncclcheck.probes.gpu.smi import _from_smi, _merge_topo, _run_smi, parse_topo_matrix
from ncclcheck.probes.gpu.types import Gpu, GpuData, _int


def parse_proc_version(text: str) -> Optional[dict[str, Any]]:
    """``/proc/driver/nvidia/version`` -> kernel module version, and whether it is the open one.

    Recorded on a 580.95.05 open-module install and a 535.129.03 proprietary one (below).

    >>> parse_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  "
    ...     "Release Build  (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025")
    {'version': '580.95.05', 'open': True}
    >>> parse_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  "
    ...                    "Thu Dec  7 19:01:02 UTC 2023")
    {'version': '535.129.03', 'open': False}
    >>> parse_proc_version("") is None
    True
    """
    m = re.search(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text or "")
    return {"version": m[1], "open": "Open Kernel Module" in m[0]} if m else None


def _all_pairs(gpus: list[Gpu], matrices: list[Any], good: Any) -> Optional[bool]:
    """True if ``good(cell)`` for every GPU pair; False if one is known bad; else None."""
    n = len(gpus)
    if n < 2 or not matrices:
        return None
    cells = [m[i][j] if m and i < len(m) and j < len(m[i]) else None
             for m in matrices for i in range(n) for j in range(n) if i != j]
    if any(c is not None and not good(c) for c in cells):
        return False
    return None if any(c is None for c in cells) else True


def _no_answer(host: Host, nvml_error: str, query: CommandResult) -> NoReturn:
    """Neither NVML nor nvidia-smi answered: Unavailable without a driver, else an error."""
    module = parse_proc_version(host.read("proc/driver/nvidia/version") or "")
    missing = query.returncode is None and not query.timed_out
    smi = "nvidia-smi not found" if missing else query.why_failed()
    no_driver = nvml_error.startswith("no NVIDIA driver")
    if not (no_driver or (missing and not module)):
        raise QueryFailed(f"{nvml_error}; {smi}")  # a driver that is there but broken
    hint = (f"; kernel module {module['version']} is loaded: a container started without the "
            "NVIDIA runtime?") if module else ""
    detail = "" if no_driver else f"; {nvml_error}"
    raise Unavailable(f"no NVIDIA driver (libnvidia-ml not loadable, {smi}){hint}{detail}")


def collect(host: Host, errors: list[str]) -> GpuData:
    """Probe the GPUs; raise Unavailable on a machine without an NVIDIA driver."""
    try:
        snapshot = host.query("nvml")
        if not isinstance(snapshot, dict) or not isinstance(snapshot.get("devices"), list):
            raise QueryFailed("nvml: the answer is not an NVML snapshot")
        data, nvml_error = parse_nvml(snapshot), ""
    except QueryFailed as exc:
        data, nvml_error = None, str(exc)
    if data is None:
        data, query = _from_smi(host, errors)
        if data is None:
            _no_answer(host, nvml_error, query)
        errors.append(f"{nvml_error}; used nvidia-smi")
    topo = _run_smi(host, ["topo", "-m"], errors)
    if topo is not None:
        _merge_topo(data, parse_topo_matrix(topo.stdout))
    for gpu in data["gpus"]:
        sysfs = _int(host.read(f"sys/bus/pci/devices/{gpu['pci_bus_id']}/numa_node")) \
            if gpu["pci_bus_id"] else None
        if sysfs is not None:
            gpu["numa_node"] = sysfs if sysfs >= 0 else None
    module = parse_proc_version(host.read("proc/driver/nvidia/version") or "")
    loaded = (host.read("sys/module/nvidia/version") or "").strip()
    data["kernel_module"] = module or ({"version": loaded, "open": None} if loaded else None)
    p2p = data.get("p2p") or {}
    data["p2p_all_supported"] = _all_pairs(
        data["gpus"], [p2p[k] for k in ("read", "write") if k in p2p], lambda c: c == "OK")
    matrix = (data.get("topology") or {}).get("matrix") or []
    data["nvlink_all_pairs"] = _all_pairs(data["gpus"], [matrix] if matrix else [],
                                          lambda c: c.startswith("NV"))
    return data  # type: ignore[return-value]
