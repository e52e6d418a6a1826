"""The ``nvml`` query's snapshot (:mod:`ncclcheck.native.nvml`) as the ``gpu`` section's data."""

from __future__ import annotations

from typing import Any, Optional

from ncclcheck.probes.gpu.types import Gpu, NvLink, _int, cuda_version_text, normalize_bus_id


#: NVML_TOPOLOGY_* levels in ``nvidia-smi topo -m`` words (INTERNAL: two GPUs on one board).
TOPOLOGY_LEVELS = {0: "INT", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: NVML_P2P_STATUS_* in ``nvidia-smi topo -p2p`` words.
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
NVLINK_REMOTE = {0: "gpu", 1: "npu", 2: "switch"}


def _get(table: dict[int, str], value: Any) -> Optional[str]:
    return table.get(value) if isinstance(value, int) else None


def _nvml_gpu(dev: dict[str, Any], index_of: dict[str, int]) -> Gpu:
    def first(key: str) -> Optional[int]:
        value = dev.get(key)
        return _int(value[0]) if isinstance(value, list) and value else None

    links: list[NvLink] = []
    raw_links = dev.get("nvlinks") if isinstance(dev.get("nvlinks"), list) else []
    for link in (lk for lk in raw_links if isinstance(lk, dict)):
        remote = normalize_bus_id(link.get("remote_pci_bus_id"))
        state = link.get("state")
        links.append({"link": _int(link.get("link")),
                      "active": None if state is None else bool(state),
                      "remote_pci_bus_id": remote,
                      "remote_type": _get(NVLINK_REMOTE, link.get("remote_device_type")),
                      "remote_gpu_index": index_of.get(remote) if remote else None})
    persistence, mig, ecc = _int(dev.get("persistence_mode")), first("mig_mode"), first("ecc_mode")
    return {"index": _int(dev.get("index")), "name": dev.get("name"), "uuid": dev.get("uuid"),
            "pci_bus_id": normalize_bus_id(dev.get("pci_bus_id")),
            "memory_total_bytes": _int(dev.get("memory_total_bytes")),
            "numa_node": None, "cpu_affinity": None,
            "pcie": {"gen_current": _int(dev.get("pcie_gen_current")),
                     "gen_max": _int(dev.get("pcie_gen_max")),
                     "width_current": _int(dev.get("pcie_width_current")),
                     "width_max": _int(dev.get("pcie_width_max"))},
            "persistence_mode": None if persistence is None else persistence == 1,
            "mig_mode": None if mig is None else mig == 1,
            "ecc_enabled": None if ecc is None else ecc == 1, "nvlinks": links}


def _link_cell(gpus: list[Gpu], i: int, j: int, level: Any, nvlink_p2p: Any) -> Optional[str]:
    """One GPU/GPU cell as topo -m prints it: NV<links> when NVLink joins them, else PCIe.

    Direct links count the links to the peer. Through NVSwitch (or a far end NVML cannot name,
    which NCCL also takes for a hidden switch) a pair gets the smaller switch-link count.
    """
    active = [[lk for lk in gpus[k]["nvlinks"] or [] if lk["active"]] for k in (i, j)]
    direct = sum(1 for lk in active[0] if lk["remote_gpu_index"] == gpus[j]["index"])
    if direct:
        return f"NV{direct}"
    switched = min(sum(1 for lk in links if lk["remote_gpu_index"] is None) for links in active)
    if switched and nvlink_p2p in (0, None):
        return f"NV{switched}"
    return _get(TOPOLOGY_LEVELS, level)


def parse_nvml(snap: Any) -> dict[str, Any]:
    """The ``nvml`` query's snapshot -> this section's data (without NICs, NUMA and module).

    The snapshot is what :mod:`ncclcheck.native.nvml` records; the doctest is
    tests/fixtures/hosts/cloud-vm-1nic/queries/nvml.json cut to two GPUs and a few fields.

    >>> snap = {"driver_version": "535.183.01", "cuda_driver_version": 12020, "devices": [
    ...     {"index": 0, "name": "NVIDIA A10G", "pci_bus_id": "00000000:00:1B.0", "nvlinks": []},
    ...     {"index": 1, "name": "NVIDIA A10G", "pci_bus_id": "00000000:00:1C.0", "nvlinks": []}],
    ...     "topology": [[None, 30], [30, None]], "p2p": {"read": [[None, 1], [1, None]]}}
    >>> out = parse_nvml(snap)
    >>> out["cuda_driver_version"], out["topology"]["matrix"], out["p2p"]["read"][0]
    ('12.2', [['X', 'PHB'], ['PHB', 'X']], ['X', 'CNS'])
    >>> parse_nvml({})["count"], parse_nvml("garbage")["gpus"]
    (0, [])
    """
    snap = snap if isinstance(snap, dict) else {}
    devices = sorted((d for d in snap.get("devices") or [] if isinstance(d, dict)),
                     key=lambda d: _int(d.get("index")) or 0)
    index_of = {normalize_bus_id(d.get("pci_bus_id")): _int(d.get("index")) for d in devices}
    gpus = [_nvml_gpu(d, index_of) for d in devices]
    n, labels = len(gpus), [f"GPU{g['index']}" for g in gpus]
    raw_p2p = snap.get("p2p") if isinstance(snap.get("p2p"), dict) else {}

    def grid(rows: Any) -> list[list[Any]]:
        ok = isinstance(rows, list) and len(rows) == n and all(
            isinstance(r, list) and len(r) == n for r in rows)
        return rows if ok else [[None] * n for _ in range(n)]

    levels, nvlink = grid(snap.get("topology")), grid(raw_p2p.get("nvlink"))
    matrix = [["X" if i == j else _link_cell(gpus, i, j, levels[i][j], nvlink[i][j])
               for j in range(n)] for i in range(n)]
    p2p: dict[str, Any] = {"labels": labels}
    for key, rows in raw_p2p.items():
        p2p[str(key)] = [["X" if i == j else _get(P2P_STATUS, v) for j, v in enumerate(row)]
                         for i, row in enumerate(grid(rows))]
    return {"source": "nvml", "driver_version": snap.get("driver_version"),
            "cuda_driver_version": cuda_version_text(snap.get("cuda_driver_version")),
            "kernel_module": None, "count": n, "gpus": gpus,
            "topology": {"labels": labels, "matrix": matrix, "nics": {}},
            "p2p": p2p if n else None, "p2p_all_supported": None, "nvlink_all_pairs": None}
