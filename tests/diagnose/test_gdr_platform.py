"""GPUDirect RDMA off by design (DGX Spark, GB10) is not a finding; off elsewhere still is (issue 24).

The log is a two-node nccl-tests run on two DGX Sparks over their ConnectX-7 RoCE ports, in the
line formats of NCCL v2.28.9-1 at NCCL_DEBUG_SUBSYS=INIT,NET (src/graph/topo.cc 'NET/%s : GPU
Direct RDMA %s for HCA %d', src/transport/net.cc channel lines, src/init.cc Init COMPLETE) and of
nccl-tests 2.18 ('#  Rank  0 Group  0 Pid ... on <host> device  0 [000f:01:00] NVIDIA GB10').
On GB10, cudaMalloc memory cannot be reached by PCIe devices, so nvidia-peermem and DMA-BUF do not
work there (https://docs.nvidia.com/dgx/dgx-spark-porting-guide/porting/cuda.html): telling the
user to `modprobe nvidia-peermem` was wrong advice. The same log with another GPU's name keeps
the warning, so the exemption cannot hide a real fault.
"""

from __future__ import annotations

import pytest

from ncclcheck.diagnose import diagnose_files

HOSTS = (("spark-fb97", 23491, "192.168.100.15", 0), ("spark-4440", 24302, "192.168.100.16", 1))


def spark_log(gpu: str = "NVIDIA GB10", net_subsys: bool = True) -> str:
    out = ["# nccl-tests version 2.18.3 nccl-headers=22809 nccl-library=22809",
           "# Collective test starting: all_gather_perf",
           "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup "
           "iters: 1 iters: 1 agg iters: 1 validation: 1 graph: 0 unalign: 0",
           "#", "# Using devices"]
    out += [f"#  Rank  {r} Group  0 Pid {pid:6d} on {h} device  0 [000f:01:00] {gpu}"
            for h, pid, _, r in HOSTS]
    for host, pid, addr, rank in HOSTS:
        h = f"{host}:{pid}:{pid} [0] NCCL INFO "
        peer = 1 - rank
        lines = ["NCCL_SOCKET_IFNAME set to enp1s0f1np1", "cudaDriverVersion 13000",
                 "NCCL version 2.28.9+cuda13.0", "NET/Plugin: Could not find: libnccl-net.so",
                 f"NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB "
                 f"enp1s0f1np1:{addr}<0>",
                 "Initialized NET plugin IB", "Assigned NET plugin IB to comm", "Using network IB",
                 f"ncclCommInitRankConfig comm 0xbca552dd2650 rank {rank} nranks 2 cudaDev 0 "
                 "nvmlDev 0 busId f01000 commId 0x3470ca318760efc8 - Init START"]
        if net_subsys:
            lines += ["NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'",
                      "NET/IB : GPU Direct RDMA Disabled for HCA 1 'roceP2p1s0f1'"]
        lines += [f"comm 0xbca552dd2650 rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 "
                  "MNNVL 0",
                  "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 2 "
                  "p2p channels per peer",
                  f"ncclCommInitRankConfig comm 0xbca552dd2650 rank {rank} nranks 2 cudaDev 0 "
                  "nvmlDev 0 busId f01000 commId 0x3470ca318760efc8 - Init COMPLETE"]
        lines += [f"Channel {c:02d}/0 : {peer}[0] -> {rank}[0] [receive] via NET/IB/{c % 2}"
                  for c in range(4)]
        lines += [f"Channel {c:02d}/0 : {rank}[0] -> {peer}[0] [send] via NET/IB/{c % 2}"
                  for c in range(4)]
        out += [h + line for line in lines]
    out += ["#  1073741824     134217728     float    none      -1  27211.0   39.46   19.73       0"
            "  25806.7   41.61   20.80       0",
            "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 20.265 ", "#"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("net_subsys", [True, False])
def test_gb10_without_gdr_is_no_finding(net_subsys, tmp_path):
    """With the HCA lines (check_gdr) and without them (the default subsystems: only the
    channels show it, check_gdr_unseen), a DGX Spark pair is healthy."""
    path = tmp_path / "spark.log"
    path.write_text(spark_log(net_subsys=net_subsys))
    doc = diagnose_files([str(path)])
    assert doc["findings"] == [] and doc["healthy"] is True, doc["findings"]
    assert doc["summary"]["nccl_versions"] == ["2.28.9"]


@pytest.mark.parametrize("net_subsys", [True, False])
def test_the_same_log_on_a_discrete_gpu_still_warns(net_subsys, tmp_path):
    path = tmp_path / "h100.log"
    path.write_text(spark_log("NVIDIA H100 80GB HBM3", net_subsys=net_subsys))
    doc = diagnose_files([str(path)])
    (f,) = [f for f in doc["findings"] if f["id"] == "ib-gdr-not-ready"]
    assert f["severity"] == "warning" and f["hosts"] == ["spark-4440", "spark-fb97"]
    assert "modprobe nvidia-peermem" in f["fix"]
    assert "DGX Spark (GB10)" in f["fix"]          # the one place where that advice is wrong


def test_gdr_on_one_spark_host_is_not_compared_with_another_platform(tmp_path):
    """A GB10 host among GDR-capable hosts is not reported as 'GPUDirect RDMA used there but
    not here' (check_gdr_hosts)."""
    text = spark_log(net_subsys=False).replace(
        "spark-4440:24302:24302 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0",
        "spark-4440:24302:24302 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via "
        "NET/IB/0/GDRDMA").replace(
        "#  Rank  1 Group  0 Pid  24302 on spark-4440 device  0 [000f:01:00] NVIDIA GB10",
        "#  Rank  1 Group  0 Pid  24302 on spark-4440 device  0 [0000:1b:00] NVIDIA H100 80GB HBM3")
    assert "NET/IB/0/GDRDMA" in text and "on spark-4440 device  0 [0000:1b:00]" in text
    path = tmp_path / "mixed.log"
    path.write_text(text)
    assert [f["id"] for f in diagnose_files([str(path)])["findings"]] == []
    path.write_text(text.replace("NVIDIA GB10", "NVIDIA H100 80GB HBM3"))
    (f,) = diagnose_files([str(path)])["findings"]
    assert f["id"] == "ib-gdr-not-ready" and f["hosts"] == ["spark-fb97"]


def test_gdr_off_by_the_users_own_setting_is_not_reported(tmp_path):
    """NCCL_NET_GDR_LEVEL=LOC turns GPUDirect RDMA off on purpose: no /GDRDMA is then no fault."""
    text = spark_log("NVIDIA H100 80GB HBM3", net_subsys=False).replace(
        "[0] NCCL INFO cudaDriverVersion 13000",
        "[0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC\n"
        "{host}:{pid}:{pid} [0] NCCL INFO cudaDriverVersion 13000")
    for host, pid, _, _ in HOSTS:
        text = text.replace("{host}:{pid}:{pid}", f"{host}:{pid}:{pid}", 1)
    assert text.count("NCCL_NET_GDR_LEVEL set by environment to LOC") == 2
    path = tmp_path / "loc.log"
    path.write_text(text)
    assert [f["id"] for f in diagnose_files([str(path)])["findings"]] == []
