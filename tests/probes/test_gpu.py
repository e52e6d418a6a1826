"""gpu probe: parsers on real nvidia-smi outputs, collect() on recorded hosts, the nvidia-smi
fallback, the no-driver path on this machine, and that importing the probe pulls no torch."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.host.keys import command_key
from ncclcheck.host.live import LiveHost
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probe import run_section
from ncclcheck.probes import gpu
from ncclcheck.probes.gpu.nvml import parse_nvml
from ncclcheck.probes.gpu.smi import (SMI_QUERY, parse_cuda_version, parse_smi_query,
                                      parse_topo_matrix)

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H100_BUS_IDS = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
QUERY_FILE = command_key(SMI_QUERY) + ".txt"

# --- real outputs, pasted as published --------------------------------------------------------
# NVIDIA/go-gpuallocator#17: 8x RTX 4090, tab-separated, NICs without a legend, "GPU NUMA ID".
RTX4090_TOPO = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity"
    "\tGPU NUMA ID\n"
    "GPU0\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU3\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "GPU5\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "GPU6\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tPHB\tPHB\t56-111,168-223\t1\t\tN/A\n"
    "GPU7\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPHB\tSYS\t X \tPIX\n"
    "NIC1\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPHB\tSYS\tPIX\t X\n")

# NVIDIA/nccl#1617: 4x H100 NV6, copied with spaces instead of tabs.
H100_NV6_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    NIC2    NIC3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV6     NV6     NV6     PIX     SYS     SYS     SYS     6,14,22,30      3               N/A
GPU1    NV6      X      NV6     NV6     SYS     PIX     SYS     SYS     4,12,20,28      1               N/A
GPU2    NV6     NV6      X      NV6     SYS     SYS     PIX     SYS     7,15,23,31      7               N/A
GPU3    NV6     NV6     NV6      X      SYS     SYS     SYS     PIX     5,13,21,29      5               N/A
NIC0    PIX     SYS     SYS     SYS      X      SYS     SYS     SYS
NIC1    SYS     PIX     SYS     SYS     SYS      X      SYS     SYS
NIC2    SYS     SYS     PIX     SYS     SYS     SYS      X      SYS
NIC3    SYS     SYS     SYS     PIX     SYS     SYS     SYS      X 

Legend:

  X    = Self
"""

# rapidsai/dask-cuda#1381: 8x A100 PCIe under a Slurm cpuset without GPU4-7's CPUs (blank CPU
# Affinity), space-padded, cut after the first NIC row cell.
A100_PCIE_SLURM_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV12    NODE    NODE    NODE    NODE    NODE    NODE    NODE    0-15,56-71      0               N/A
GPU1    NV12     X      NODE    NODE    NODE    NODE    NODE    NODE    NODE    0-15,56-71      0               N/A
GPU2    NODE    NODE     X      NV12    NODE    NODE    NODE    NODE    NODE    0-15,56-71      0               N/A
GPU3    NODE    NODE    NV12     X      NODE    NODE    NODE    NODE    NODE    0-15,56-71      0               N/A
GPU4    NODE    NODE    NODE    NODE     X      NV12    NODE    NODE    NODE            1               N/A
GPU5    NODE    NODE    NODE    NODE    NV12     X      NODE    NODE    NODE            1               N/A
GPU6    NODE    NODE    NODE    NODE    NODE    NODE     X      NV12    PHB             1               N/A
GPU7    NODE    NODE    NODE    NODE    NODE    NODE    NV12     X      NODE            1               N/A
NIC0    NODE"""

# NVIDIA/nccl-tests#29: DGX-1 V100, old drivers name NIC columns by device; no NUMA column.
V100_OLD_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx5_0  mlx5_1  CPU Affinity
GPU0     X      NV2     NV2     NV1     NV1     SYS     SYS     SYS     NODE    NODE    0-23,48-71
GPU1    NV2      X      NV1     NV2     SYS     NV1     SYS     SYS     NODE    NODE    0-23,48-71
GPU2    NV2     NV1      X      NV1     SYS     SYS     NV2     SYS     PIX     PIX     0-23,48-71
GPU3    NV1     NV2     NV1      X      SYS     SYS     SYS     NV2     PIX     PIX     0-23,48-71
GPU4    NV1     SYS     SYS     SYS      X      NV2     NV2     NV1     SYS     SYS     24-47,72-95
GPU5    SYS     NV1     SYS     SYS     NV2      X      NV1     NV2     SYS     SYS     24-47,72-95
GPU6    SYS     SYS     NV2     SYS     NV2     NV1      X      NV1     SYS     SYS     24-47,72-95
"""

# gengwg/cheatsheets gpu.md ("Below is for DGX A100"): 12 NICs named by device, no legend.
DGX_A100_OLD_TOPO = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tmlx5_0\tmlx5_1\tmlx5_2\tmlx5_3\tmlx5_4\tmlx5_5\tmlx5_6\tmlx5_7\tmlx5_8\tmlx5_9\tmlx5_10\tmlx5_11\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63,176-191\t3\n"
    "GPU1\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63,176-191\t3\n"
    "GPU2\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t16-31,144-159\t1\n"
    "GPU3\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t16-31,144-159\t1\n"
    "GPU4\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\t112-127,240-255\t7\n"
    "GPU5\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\t112-127,240-255\t7\n"
    "GPU6\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tNV12\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\t80-95,208-223\t5\n"
    "GPU7\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\t80-95,208-223\t5\n"
    "mlx5_0\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_1\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_2\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_3\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_4\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_5\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_6\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_7\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tSYS\tSYS\tSYS\tSYS\n"
    "mlx5_8\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tSYS\tSYS\n"
    "mlx5_9\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tSYS\tSYS\n"
    "mlx5_10\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tPIX\n"
    "mlx5_11\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\t X\n"
)

# noonghunna/club-3090#1229: `nvidia-smi topo -p2p rw` on 2x RTX 5090.
P2P_RW_5090 = (" \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n\nLegend:\n\n  X    = Self\n"
               "  OK   = Status Ok\n  CNS  = Chipset not supported\n  GNS  = GPU not supported\n")


def fixture_text(host: str, name: str) -> str:
    return (HOSTS / host / "commands" / name).read_text()


def collect(host) -> dict:
    return run_section(host, "gpu", gpu.collect)


# --- parse_topo_matrix --------------------------------------------------------------------------
def test_topo_tabs_nics_without_legend():
    t = parse_topo_matrix(RTX4090_TOPO)
    assert t["labels"] == [f"GPU{i}" for i in range(8)] + ["NIC0", "NIC1"]
    assert t["matrix"][6][8:] == ["PHB", "PHB"] and t["matrix"][9] == ["SYS"] * 6 + [
        "PHB", "SYS", "PIX", "X"]
    assert t["nics"] == {"NIC0": None, "NIC1": None}
    assert t["cpu_affinity"]["GPU4"] == "56-111,168-223"
    assert [t["numa_affinity"][f"GPU{i}"] for i in range(8)] == [0] * 4 + [1] * 4


def test_topo_space_padded_copy():
    t = parse_topo_matrix(H100_NV6_TOPO)
    assert t["labels"] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"]
    assert t["matrix"][3] == ["NV6", "NV6", "NV6", "X", "SYS", "SYS", "SYS", "PIX"]
    assert t["matrix"][7][7] == "X"
    assert t["cpu_affinity"]["GPU2"] == "7,15,23,31"
    assert [t["numa_affinity"][f"GPU{i}"] for i in range(4)] == [3, 1, 7, 5]


def test_topo_blank_cpu_affinity_and_cut_paste():
    t = parse_topo_matrix(A100_PCIE_SLURM_TOPO)
    assert t["cpu_affinity"]["GPU0"] == "0-15,56-71" and t["numa_affinity"]["GPU0"] == 0
    assert t["cpu_affinity"]["GPU5"] is None and t["numa_affinity"]["GPU5"] == 1
    assert t["matrix"][6][7:] == ["NV12", "PHB"]
    assert t["matrix"][8] == ["NODE"] + [None] * 8  # the paste stops after one cell


def test_topo_old_style_nic_columns_become_nic_labels():
    t = parse_topo_matrix(V100_OLD_TOPO)
    assert t["labels"][-2:] == ["NIC0", "NIC1"]
    assert t["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert t["matrix"][2][8:] == ["PIX", "PIX"]
    assert t["matrix"][7] == [None] * 10  # GPU7's row is not in the paste
    assert t["numa_affinity"] == {f"GPU{i}": None for i in range(7)}
    assert t["cpu_affinity"]["GPU4"] == "24-47,72-95"


def test_topo_ansi_underlined_header():
    underlined = "\x1b[4m" + RTX4090_TOPO.split("\n", 1)[0] + "\x1b[0m\n" + RTX4090_TOPO.split(
        "\n", 1)[1]
    assert parse_topo_matrix(underlined) == parse_topo_matrix(RTX4090_TOPO)


def test_p2p_matrix_uses_the_same_grid_parser():
    t = parse_topo_matrix(P2P_RW_5090)
    assert t["labels"] == ["GPU0", "GPU1"] and t["matrix"] == [["X", "GNS"], ["GNS", "X"]]


@pytest.mark.parametrize("host", ["h100-ib-8gpu", "a100-roce-bond", "cloud-vm-1nic"])
def test_recorded_topo_files_are_square(host):
    t = parse_topo_matrix(fixture_text(host, "nvidia-smi_topo_-m.txt"))
    n = len(t["labels"])
    assert n >= 4 and all(len(row) == n and row[i] == "X" for i, row in enumerate(t["matrix"]))
    assert all(t["matrix"][i][j] == t["matrix"][j][i] for i in range(n) for j in range(n))


def garbage_inputs():
    """Real outputs cut and mangled, and plain junk: parsers must return, never raise."""
    rng = random.Random(1234)
    real = [RTX4090_TOPO, H100_NV6_TOPO, A100_PCIE_SLURM_TOPO, V100_OLD_TOPO, DGX_A100_OLD_TOPO,
            P2P_RW_5090, fixture_text("h100-ib-8gpu", QUERY_FILE),
            fixture_text("h100-ib-8gpu", "nvidia-smi.txt")]
    out = ["", "\n\n", "\t\t\t", "GPU0", "GPU0 X", "\tGPU0\nGPU0", "NIC0: ", "0,", ",,,,,,,,,,,,,",
           "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
           "Failed to initialize NVML: Driver/library version mismatch", "\x00\xff\ufffd"]
    for text in real:
        for _ in range(20):
            cut = list(text)
            for _ in range(rng.randint(1, 30)):
                del cut[rng.randrange(len(cut))]
            out.append("".join(cut))
            lines = text.splitlines()
            rng.shuffle(lines)
            out.append("\n".join(lines[: rng.randint(0, len(lines))]))
    return out


def test_parsers_never_raise_on_garbage():
    for text in garbage_inputs():
        t = parse_topo_matrix(text)
        assert len(t["matrix"]) == len(t["labels"])
        assert all(len(row) == len(t["labels"]) for row in t["matrix"])
        assert isinstance(parse_smi_query(text)["gpus"], list)
        parse_cuda_version(text), gpu.parse_proc_version(text)


# --- parse_smi_query ---------------------------------------------------------------------------
def test_smi_query_recorded_h100():
    out = parse_smi_query(fixture_text("h100-ib-8gpu", QUERY_FILE))
    assert out["driver_version"] == "580.95.05"
    assert [g["pci_bus_id"] for g in out["gpus"]] == H100_BUS_IDS
    assert out["gpus"][3]["memory_total_bytes"] == 81559 * 2**20
    assert out["gpus"][0]["mig_mode"] is False and out["gpus"][0]["nvlinks"] is None


def test_smi_query_unsupported_values_and_short_lines():
    out = parse_smi_query("0, Tesla T4, GPU-1, 00000000:3B:00.0, 15360, 1, 3, 16, 16, "
                              "Disabled, [N/A], [Not Supported], 470.57.02\n"
                              "1, Tesla T4, GPU-2\n")
    first, second = out["gpus"]
    assert first["persistence_mode"] is False and first["ecc_enabled"] is None
    assert first["mig_mode"] is None and first["pcie"]["gen_max"] == 3
    assert second["name"] == "Tesla T4" and second["pci_bus_id"] is None
    assert second["pcie"] == {"gen_current": None, "gen_max": None, "width_current": None,
                              "width_max": None}


# --- parse_nvml ---------------------------------------------------------------------------------
def load_snapshot(host: str) -> dict:
    return json.loads((HOSTS / host / "queries" / "nvml.json").read_text())


@pytest.mark.parametrize("host", ["h100-ib-8gpu", "a100-roce-bond", "cloud-vm-1nic"])
def test_nvml_gpu_block_matches_recorded_topo(host):
    """Two sources: the NVLink/PCIe cells built from NVML equal the recorded topo -m GPU block."""
    ours = parse_nvml(load_snapshot(host))["topology"]
    theirs = parse_topo_matrix(fixture_text(host, "nvidia-smi_topo_-m.txt"))
    n = len(ours["labels"])
    assert [row[:n] for row in theirs["matrix"][:n]] == ours["matrix"]


def test_nvml_direct_nvlinks_count_per_peer():
    """A DGX-1-style mesh (links straight to peers) gives NV<count> per pair, else PCIe."""
    def dev(i, peers):
        links = [{"link": k, "state": 1, "remote_pci_bus_id": f"00000000:{p:02X}:00.0",
                  "remote_device_type": 0} for k, p in enumerate(peers)]
        return {"index": i, "pci_bus_id": f"00000000:{i:02X}:00.0", "nvlinks": links}
    snap = {"devices": [dev(0, [1, 1, 2]), dev(1, [0, 0]), dev(2, [0])],
            "topology": [[None, 50, 50], [50, None, 50], [50, 50, None]]}
    out = parse_nvml(snap)
    assert out["topology"]["matrix"] == [["X", "NV2", "NV1"], ["NV2", "X", "SYS"],
                                         ["NV1", "SYS", "X"]]
    assert out["gpus"][0]["nvlinks"][2]["remote_gpu_index"] == 2


def test_nvml_malformed_snapshots_never_raise():
    for snap in [None, [], "x", {"devices": "x"}, {"devices": [1, None, "a"]},
                 {"devices": [{"index": "zero", "nvlinks": "x", "mig_mode": "on"}]},
                 {"devices": [{"index": 0, "nvlinks": [None, {"state": "?"}]}],
                  "topology": [[1, 2]], "p2p": {"read": [[[]]], "write": "x"}},
                 {"cuda_driver_version": "twelve", "p2p": [1]}]:
        out = parse_nvml(snap)
        assert out["count"] == len(out["gpus"])


# --- collect() over recorded hosts --------------------------------------------------------------
def test_collect_h100(recorded):
    section = collect(recorded("h100-ib-8gpu"))
    assert section["status"] == "ok" and section["errors"] == []
    data = section["data"]
    assert (data["source"], data["driver_version"], data["cuda_driver_version"]) == (
        "nvml", "580.95.05", "13.0")
    assert data["kernel_module"] == {"version": "580.95.05", "open": True}
    assert [g["pci_bus_id"] for g in data["gpus"]] == H100_BUS_IDS
    assert [g["numa_node"] for g in data["gpus"]] == [0] * 4 + [1] * 4
    assert {g["name"] for g in data["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    links = data["gpus"][5]["nvlinks"]
    assert len(links) == 18 and all(lk["active"] and lk["remote_type"] == "switch" for lk in links)
    assert {lk["remote_pci_bus_id"] for lk in links} == {f"0000:0{k}:00.0" for k in (5, 6, 7, 8)}
    topo = data["topology"]
    assert topo["nics"]["NIC11"] == "mlx5_11" and len(topo["labels"]) == 20
    assert topo["matrix"][topo["labels"].index("GPU7")][topo["labels"].index("NIC11")] == "PIX"
    assert data["p2p_all_supported"] is True and data["nvlink_all_pairs"] is True
    assert "query nvml" in section["sources"] and "$ nvidia-smi topo -m" in section["sources"]


def test_topo_dgx_a100_old_format():
    t = parse_topo_matrix(DGX_A100_OLD_TOPO)
    assert t["nics"] == {f"NIC{k}": f"mlx5_{k}" for k in range(12)}
    assert t["matrix"][0][:10] == ["X"] + ["NV12"] * 7 + ["PXB", "PXB"]
    assert t["matrix"][19][18:] == ["PIX", "X"]
    assert [t["numa_affinity"][f"GPU{i}"] for i in range(8)] == [3, 3, 1, 1, 7, 7, 5, 5]


def test_collect_a100_roce_lag(recorded):
    data = collect(recorded("a100-roce-bond"))["data"]
    assert data["driver_version"] == "535.129.03" and data["cuda_driver_version"] == "12.2"
    assert data["kernel_module"] == {"version": "535.129.03", "open": False}
    assert data["topology"]["nics"] == {"NIC0": "mlx5_bond_0"}
    assert [g["numa_node"] for g in data["gpus"]] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert [row[8] for row in data["topology"]["matrix"][:8]] == ["SYS", "SYS", "NODE", "NODE",
                                                                   "SYS", "SYS", "SYS", "SYS"]
    assert data["topology"]["matrix"][0][1] == "NV12" and data["nvlink_all_pairs"] is True


def test_collect_cloud_vm_without_p2p(recorded):
    data = collect(recorded("cloud-vm-1nic"))["data"]
    assert data["count"] == 4 and data["topology"]["nics"] == {}
    assert {g["numa_node"] for g in data["gpus"]} == {None}  # topo -m says N/A
    assert data["gpus"][3]["cpu_affinity"] == "0-47"
    assert data["p2p_all_supported"] is False and data["nvlink_all_pairs"] is False
    assert all(g["nvlinks"] == [] and g["mig_mode"] is None for g in data["gpus"])
    assert data["p2p"]["read"][0] == ["X", "CNS", "CNS", "CNS"]
    assert data["gpus"][0]["pcie"] == {"gen_current": 1, "gen_max": 4, "width_current": 16,
                                       "width_max": 16}


def copy_host(tmp_path: Path, name: str, nvml: dict | None) -> Path:
    """A copy of a recorded host's GPU files (the rest of the host is not needed here)."""
    source, folder = HOSTS / name, tmp_path / name
    for path in [*source.glob("commands/nvidia-smi*"), *source.glob("root/proc/driver/nvidia/*"),
                 *source.glob("root/sys/module/nvidia/*")]:
        target = folder / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    if nvml is not None:
        (folder / "queries").mkdir()
        (folder / "queries" / "nvml.json").write_text(json.dumps(nvml))
    return folder


@pytest.mark.parametrize("nvml", [None, {"__error__": "no NVIDIA driver: NVML Shared Library "
                                                      "Not Found"}])
def test_fallback_to_nvidia_smi_agrees_with_nvml(tmp_path, nvml):
    nvml_data = collect(RecordedHost(HOSTS / "h100-ib-8gpu"))["data"]
    section = collect(RecordedHost(copy_host(tmp_path, "h100-ib-8gpu", nvml)))
    data = section["data"]
    assert section["status"] == "ok" and data["source"] == "nvidia-smi"
    assert any("used nvidia-smi" in e for e in section["errors"])
    for key in ("driver_version", "cuda_driver_version", "count", "topology",
                "p2p_all_supported", "nvlink_all_pairs", "kernel_module"):
        assert data[key] == nvml_data[key], key
    for smi, ours in zip(data["gpus"], nvml_data["gpus"]):
        assert smi["nvlinks"] is None
        assert {k: v for k, v in smi.items() if k != "nvlinks"} == {
            k: v for k, v in ours.items() if k != "nvlinks"}


def test_no_driver_and_no_nvidia_smi_is_unavailable(tmp_path):
    folder = copy_host(tmp_path, "h100-ib-8gpu", {"__error__": "no NVIDIA driver: NVML Shared "
                                                               "Library Not Found"})
    shutil.rmtree(folder / "commands")
    section = collect(RecordedHost(folder))
    assert section["status"] == "unavailable" and section["data"] is None
    (message,) = section["errors"]
    assert message.startswith("no NVIDIA driver (libnvidia-ml not loadable, nvidia-smi not found)")
    assert "kernel module 580.95.05 is loaded" in message  # /proc/driver/nvidia is recorded


def test_no_driver_without_pynvml_is_unavailable_and_says_why(tmp_path):
    folder = copy_host(tmp_path, "cloud-vm-1nic", {
        "__error__": "nvml: cannot import pynvml (No module named 'pynvml'); install nvidia-ml-py"})
    shutil.rmtree(folder / "commands")
    shutil.rmtree(folder / "root")
    section = collect(RecordedHost(folder))
    assert section["status"] == "unavailable"
    assert section["errors"] == ["no NVIDIA driver (libnvidia-ml not loadable, nvidia-smi not "
                                 "found); nvml: cannot import pynvml (No module named 'pynvml'); "
                                 "install nvidia-ml-py"]


def test_broken_driver_is_an_error_not_unavailable(tmp_path):
    folder = copy_host(tmp_path, "a100-roce-bond", {
        "__error__": "NVML init failed: Driver/library version mismatch"})
    (folder / "commands" / QUERY_FILE).write_text("")
    (folder / "commands" / QUERY_FILE.replace(".txt", ".json")).write_text(json.dumps(
        {"returncode": 18, "stderr": "Failed to initialize NVML: Driver/library version mismatch"}))
    section = collect(RecordedHost(folder))
    assert section["status"] == "error"
    assert "Driver/library version mismatch" in section["errors"][0]
    assert "nvidia-smi: exit 18" in section["errors"][0]


def test_nvidia_smi_timeout_is_reported_not_fatal(tmp_path):
    folder = copy_host(tmp_path, "h100-ib-8gpu", load_snapshot("h100-ib-8gpu"))
    (folder / "commands" / "nvidia-smi_topo_-m.json").write_text(json.dumps(
        {"returncode": None, "timed_out": True}))
    section = collect(RecordedHost(folder))
    assert section["status"] == "ok" and section["errors"] == ["nvidia-smi: timed out"]
    data = section["data"]
    assert data["topology"]["labels"] == [f"GPU{i}" for i in range(8)]  # NVML's block only
    assert data["topology"]["nics"] == {} and data["nvlink_all_pairs"] is True
    assert data["gpus"][0]["numa_node"] is None  # topo -m was its only source here


def test_sysfs_numa_node_wins_over_topo(tmp_path):
    folder = copy_host(tmp_path, "h100-ib-8gpu", load_snapshot("h100-ib-8gpu"))
    for bus, node in (("0000:18:00.0", "1\n"), ("0000:2a:00.0", "-1\n")):
        path = folder / "root" / "sys" / "bus" / "pci" / "devices" / bus / "numa_node"
        path.parent.mkdir(parents=True)
        path.write_text(node)
    gpus = collect(RecordedHost(folder))["data"]["gpus"]
    assert [g["numa_node"] for g in gpus[:3]] == [1, None, 0]  # -1 is "unknown", not node 0


# --- this machine -------------------------------------------------------------------------------
def test_live_host_without_driver_says_so():
    section = collect(LiveHost())
    if shutil.which("nvidia-smi") or Path("/proc/driver/nvidia/version").exists():
        assert section["status"] in ("ok", "error")  # a machine with a driver: nothing to fake
        return
    assert section["status"] == "unavailable"
    assert section["errors"][0].startswith("no NVIDIA driver (libnvidia-ml not loadable")
    assert section["duration_s"] < 10


def test_importing_the_probe_imports_neither_torch_nor_pynvml():
    code = ("import sys, ncclcheck.probes.gpu, ncclcheck.probes; "
            "print(sorted(m for m in ('torch', 'pynvml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
