"""The ``gpu`` section's shapes, and the value helpers both sources share
(bus ids, CUDA versions)."""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict



class Pcie(TypedDict):
    gen_current: Optional[int]
    gen_max: Optional[int]
    width_current: Optional[int]
    width_max: Optional[int]


class NvLink(TypedDict):
    link: Optional[int]
    active: Optional[bool]
    remote_pci_bus_id: Optional[str]   # normalised; an NVSwitch's bus id on HGX boards
    remote_type: Optional[str]         # "gpu" | "switch" | "npu" | None
    remote_gpu_index: Optional[int]    # set when the far end is a GPU of this node


class Gpu(TypedDict):
    index: Optional[int]
    name: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]          # "0000:18:00.0"
    memory_total_bytes: Optional[int]
    numa_node: Optional[int]           # the PCI device's node: sysfs, else topo -m
    cpu_affinity: Optional[str]        # "0-47,96-143" from topo -m
    pcie: Pcie
    persistence_mode: Optional[bool]
    mig_mode: Optional[bool]           # current mode; None where the GPU has no MIG
    ecc_enabled: Optional[bool]        # current mode; None where the GPU has no ECC
    nvlinks: Optional[list[NvLink]]    # [] without NVLink; None: unknown (nvidia-smi path)


class Topology(TypedDict):
    labels: list[str]                  # ["GPU0", ..., "NIC0", ...]
    matrix: list[list[Optional[str]]]  # X, NV18, PIX, PXB, PHB, NODE, SYS; None: unknown
    nics: dict[str, Optional[str]]     # {"NIC0": "mlx5_0"}


class GpuData(TypedDict):
    source: str                        # "nvml" | "nvidia-smi"
    driver_version: Optional[str]      # "580.95.05"
    cuda_driver_version: Optional[str]  # "13.0": the newest CUDA this driver runs
    kernel_module: Optional[dict]      # {"version": "580.95.05", "open": True}
    count: int
    gpus: list[Gpu]
    topology: Optional[Topology]
    p2p: Optional[dict]                # {"labels": [...], "read": [[...]], "write": ...}
    p2p_all_supported: Optional[bool]  # read+write P2P "OK" for every GPU pair
    nvlink_all_pairs: Optional[bool]   # every GPU pair joined by NVLink (NV#)


_BUS_ID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def normalize_bus_id(text: Any) -> Optional[str]:
    """NVML/nvidia-smi bus id -> the sysfs spelling; None when it is not one.

    >>> normalize_bus_id("00000000:9A:00.0"), normalize_bus_id(b"0000:1b:00.0")
    ('0000:9a:00.0', '0000:1b:00.0')
    >>> normalize_bus_id("?") is None
    True
    """
    text = text.decode("ascii", "replace") if isinstance(text, bytes) else str(text or "")
    m = _BUS_ID.match(text.strip())
    return f"{int(m[1], 16):04x}:{m[2]}:{m[3]}.{m[4]}".lower() if m else None


def _int(value: Any) -> Optional[int]:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def cuda_version_text(code: Any) -> Optional[str]:
    """NVML's CUDA driver version number -> "major.minor".

    >>> cuda_version_text(12040), cuda_version_text(13000), cuda_version_text(None)
    ('12.4', '13.0', None)
    """
    code = _int(code)
    return f"{code // 1000}.{code % 1000 // 10}" if code and code > 0 else None
