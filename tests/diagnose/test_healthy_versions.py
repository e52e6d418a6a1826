"""Healthy two-node logs of NCCL 2.21-2.30 over IB, RoCE, EFA and sockets give no warning (issue 24).

Each line below is one of NCCL's own INFO formats at the version named (src/init.cc,
src/bootstrap.cc, src/transport/net_ib*.cc, src/transport/net_socket.cc, src/misc/socket.cc,
src/plugin/net.cc of the v2.21.5-1 ... v2.30.7-1 tags; aws-ofi-nccl's NET/OFI lines for EFA),
filled in for two hosts with eight ranks each, so that every format a healthy job of those
versions prints is held to the one thing that matters here: no warning, no error, healthy.
The line formats that are new since 2.21 (timings, DMA-BUF, RAS, CC, non-device plugin,
2.24+ connect retries that succeeded) are the ones the corpus' older logs do not have.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files

VERSIONS = ("2.21.5", "2.23.4", "2.26.6", "2.27.7", "2.28.9", "2.30.7")
NETS = {
    "ib": ("IB", ["NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:{addr}<0>",
                  "NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0",
                  "NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 1 'mlx5_1"], "NET/IB/{d}/GDRDMA"),
    "roce": ("IB", ["NCCL_IB_GID_INDEX set by environment to 3",
                    "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB bond0:{addr}<0>",
                    "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
                    "NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'"], "NET/IB/{d}/GDRDMA"),
    "efa": ("Libfabric", ["NET/Plugin: Loaded net plugin Libfabric (v9)",
                          "Successfully loaded external plugin libnccl-net-ofi.so",
                          "NET/OFI Initializing aws-ofi-nccl 1.14.0",
                          "NET/OFI Using Libfabric version 1.22",
                          "NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)"],
            "NET/Libfabric/{d}/GDRDMA"),
    "socket": ("Socket", ["NCCL_SOCKET_IFNAME set by environment to eth0",
                          "NET/Socket : Using [0]eth0:{addr}<0>"], "NET/Socket/0"),
}


def _log(version: str, net: str) -> str:
    name, net_lines, via = NETS[net]
    out = []
    for n, host in enumerate(("gpu-a", "gpu-b")):
        addr = f"10.0.0.{n + 1}"
        for dev in range(8):
            rank, pid = n * 8 + dev, 1000 + dev
            h = f"{host}:{pid}:{pid + 40} [{dev}] NCCL INFO "
            comm = "0x55d0c0ffee00"
            lines = [f"Bootstrap : Using eth0:{addr}<0>", "cudaDriverVersion 12080",
                     f"NCCL version {version}+cuda12.8",
                     "NET/Plugin: Could not find: libnccl-net.so." if net != "efa" else "",
                     *[x.format(addr=addr) for x in net_lines],
                     "Using non-device net plugin version 0", f"Using network {name}",
                     f"DMA-BUF is available on GPU device {dev}",
                     f"ncclCommInitRankConfig comm {comm} rank {rank} nranks 16 cudaDev {dev} nvmlDev "
                     f"{dev} busId {dev + 1}8000 commId 0x3c1d2b5a9f7e6d40 - Init START",
                     "Bootstrap timings total 0.004 (create 0.000, send 0.001, recv 0.002, ring 0.000, "
                     "delay 0.000)",
                     f"comm {comm} rank {rank} nRanks 16 nNodes 2 localRanks 8 localRank {dev} MNNVL 0",
                     f"Trees [0] {rank + 1 if dev < 7 else -1}/-1/-1->{rank}->{rank - 1} [1] -1/-1/-1->{rank}->{rank - 1}",
                     "Channel 00/02 :    0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15",
                     "CC Off, workFifoBytes 1048576",
                     "socketPollConnect: connect to 10.0.0.2<43211> returned Connection refused, "
                     "retrying (1/34) after sleep for 100 msec" if version >= "2.24" and dev == 0 else "",
                     f"Channel 00/0 : {rank}[{dev}] -> {(rank + 1) % 16}[{(dev + 1) % 8}] via P2P/CUMEM/read"
                     if dev < 7 else
                     f"Channel 00/0 : {rank}[{dev}] -> {(rank + 1) % 16}[0] [send] via " + via.format(d=0),
                     "Connected all rings, use ring PXN 0 GDR 1", "Connected all trees",
                     "threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
                     "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p "
                     "channels per peer",
                     f"ncclCommInitRankConfig comm {comm} rank {rank} nranks 16 cudaDev {dev} nvmlDev "
                     f"{dev} busId {dev + 1}8000 commId 0x3c1d2b5a9f7e6d40 - Init COMPLETE",
                     f"Init timings - ncclCommInitRankConfig: rank {rank} nranks 16 total 0.61 (kernels "
                     "0.12, alloc 0.05, bootstrap 0.01, allgathers 0.00, topo 0.21, graphs 0.01, "
                     "connections 0.18, rest 0.03)"]
            out += [h + line for line in lines if line]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("net", sorted(NETS))
@pytest.mark.parametrize("version", VERSIONS)
def test_healthy_log_gives_no_warning(version, net, tmp_path):
    path = tmp_path / f"healthy-{version}-{net}.log"
    path.write_text(_log(version, net))
    doc = diagnose_files([str(path)])
    loud = [(f["id"], f["message"]) for f in doc["findings"] if f["severity"] != "info"]
    assert loud == []
    assert doc["healthy"] is True, doc["summary"]["verdict"]
    assert doc["summary"]["nccl_versions"] == [version]


TWO_HOSTIDS = (Path(__file__).resolve().parents[1] / "fixtures" / "device" / "h200"
               / "two-hostid-socket")


def test_a_recorded_socket_job_of_2_28_gives_no_warning():
    """Real lines, not filled-in formats: two ranks on the lent H200 that NCCL 2.28.9 connected
    as two nodes over NET/Socket (NCCL_HOSTID differs; README.md beside the logs)."""
    doc = diagnose_files([str(TWO_HOSTIDS / "rank0.log"), str(TWO_HOSTIDS / "rank1.log")])
    assert [(f["id"], f["message"]) for f in doc["findings"] if f["severity"] != "info"] == []
    assert doc["healthy"] is True, doc["summary"]["verdict"]
    assert doc["summary"]["nccl_versions"] == ["2.28.9"]
    assert doc["summary"]["networks"] == ["Socket"]
    assert [r["transports"] for r in doc["ranks"]] == [{"NET/Socket": 4}] * 2
