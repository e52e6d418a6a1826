"""Facts in NCCL INFO messages (ncclcheck/logparse/facts.py), one format per NCCL era."""

from __future__ import annotations

import pytest

from ncclcheck.logparse.facts import parse_info


@pytest.mark.parametrize("msg, kind, value", [
    ("NCCL version 2.24.3+cuda12.2", "version", ("2.24.3", "12.2")),
    ("cudaDriverVersion 12080", "cuda_driver", 12080),
    ("Bootstrap : Using bond0:172.36.134.184<0>", "bootstrap", [("bond0", "172.36.134.184")]),
    ("Bootstrap: Using eth0:10.7.147.73<0>", "bootstrap", [("eth0", "10.7.147.73")]),
    ("Bootstrap : Using ib0:fe80::a288:c203:d2:aaf2%ib0<0>", "bootstrap",
     [("ib0", "fe80::a288:c203:d2:aaf2%ib0")]),
    ("NET/Socket : Using [0]ibs85f0:192.168.1.14<0> [1]ib0:192.168.1.15<0>", "net_socket",
     [("ibs85f0", "192.168.1.14"), ("ib0", "192.168.1.15")]),
    ("NET : Using interface lo:127.0.0.1<0>", "net_socket_add", [("lo", "127.0.0.1")]),
    ("Using network IBext_v8", "network", "IBext_v8"),
    ("Using internal Network Socket", "network", "Socket"),
    ("NCCL_SOCKET_IFNAME set by environment to =bond0", "env", ("NCCL_SOCKET_IFNAME", "=bond0")),
    ("NCCL_IB_GID_INDEX set by environment to 3.", "env", ("NCCL_IB_GID_INDEX", "3")),
    ("Trees [0] 2/-1/-1->1->0 [1] -1/-1/-1->1->0 [2] 2/-1/-1->1->0", "trees", 3),
    ("Channel 00/08 :    0   5   4   7   6   3   2   1   8  13  12  15  14  11  10   9", "ring",
     (0, 8)),
    ("Channel 00 :    0   1", "ring", (0, None)),
    ("Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2", "connection",
     (3, "NET/IBext_v8", False)),
    ("Channel 03/0 : 11[3] -> 3[3] [send] via NET/NCCL RDMA Plugin v9/3/GDRDMA", "connection",
     (3, "NET/NCCL RDMA Plugin v9", True)),
    ("Channel 00 : 0[1a000] -> 1[1b000] via P2P/IPC/read", "connection", (0, "P2P", False)),
    ("Channel 00/0 : 1[4] -> 0[3] via SHM/direct/direct", "connection", (0, "SHM", False)),
    ("Ring 00 : 5[3d000] -> 6[b2000] via P2P/IPC", "connection", (0, "P2P", False)),
    ("16 coll channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer",
     "coll_channels", 16),
    ("DMA-BUF is available on GPU device 3", "dmabuf", True),
    ("NET/Plugin: Loaded net plugin FastSocket (v4)", "plugin", "FastSocket"),
    ("P2P plugin IBext", "plugin", "IBext"),
])
def test_fact_formats(msg, kind, value):
    fact = parse_info(msg)
    assert fact is not None and fact.kind == kind and fact.value == value


def test_init_lines_of_several_releases():
    old = parse_info("comm 0x7f5780001ca0 rank 15 nranks 32 cudaDev 7 nvmlDev 7 - Init COMPLETE")
    assert old.value["rank"] == 15 and old.value["nranks"] == 32 and old.value["bus_id"] is None
    new = parse_info("ncclCommInitRankConfig comm 0xaaaaad564770 rank 7 nranks 8 cudaDev 3 nvmlDev 3 "
                     "busId 1901000 commId 0x2f24707b1170cb7f - Init START")
    assert new.value["state"] == "START" and new.value["bus_id"] == "1901000"
    split = parse_info("ncclCommSplit comm 0x10772970 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 7000 "
                       "parent 0x8df0a00 color 1530306504 key 0 commId 0xa421cd9c71d9bccd - Init COMPLETE")
    assert split.value["comm"] == "0x10772970" and split.value["state"] == "COMPLETE"
    tagged = parse_info("[Rank 5] ncclCommInitRankConfig comm 0x55d1632f46d0 rank 5 nranks 8 cudaDev 5 "
                        "nvmlDev 5 busId 97000 commId 0x673ba095326ff9de - Init START")
    assert tagged.value["rank"] == 5
    topo = parse_info("comm 0x56300ffd3cf0 rank 3 nRanks 4 nNodes 1 localRanks 4 localRank 3 MNNVL 0")
    assert topo.kind == "topology" and topo.value["nnodes"] == 1


def test_ib_device_lists():
    fact = parse_info("NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; OOB eth0:10.0.1.2<0>")
    assert fact.value["devices"] == [("mlx5_0", 1, "IB"), ("mlx5_1", 1, "IB")]
    assert fact.value["oob"] == ("eth0", "10.0.1.2")
    empty_oob = parse_info("NET/IB : Using [0]mlx5_18:1/RoCE [1]mlx5_6:1/RoCE ; OOB :")
    assert empty_oob.value["oob"] is None and len(empty_oob.value["devices"]) == 2


@pytest.mark.parametrize("msg, enabled, note", [
    ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", False, "(no module)"),
    ("NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'", False, None),
    ("NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_bond_0", True, None),
    ("NET/IB : GPU Direct RDMA Enabled for GPU 435e00000 / HCA 0 (distance 1 < 2), read 0", True,
     "(distance 1 < 2), read 0"),
    ("NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'", False, None),
])
def test_gdr_lines(msg, enabled, note):
    fact = parse_info(msg)
    assert fact.kind == "gdr" and fact.value["enabled"] is enabled and fact.value["note"] == note


@pytest.mark.parametrize("msg", [
    "Connected all rings", "Using non-device net plugin version 0", "Using 256 threads, Min Comp Cap 7",
    "comm 0x7fc8e824c640 rank 0 nranks 4", "NET/IB : Using interface enp0s31f6 for sideband communication",
    "cudaDriverVersion xyz", "Channel junk", "", "Trees", "NCCL_",
])
def test_messages_without_facts(msg):
    assert parse_info(msg) is None
