"""The class and verdict of runs: the real fixture tables imported, the known-low cases (P2P
disabled across SYS; Socket where IB ports are up; GDR off; small messages), one rank."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.bench.importer import import_file, import_nccl_tests
from ncclcheck.expected.verdict import expect

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TABLES = FIX / "nccl-tests"
H100_IB = FIX / "hosts" / "h100-ib-8gpu" / "facts.json"
GiB = 1 << 30


def nccl_tests_text(gpu: str, hosts: list[str], per_host: int, info: list[str],
                    rows: list[tuple[int, float]]) -> str:
    """all_reduce_perf output in nccl-tests 2.x's format (src/util.cu): the ``# Rank`` lines,
    NCCL INFO lines as NCCL_DEBUG=INFO interleaves them, and one row per (size, busbw)."""
    n = len(hosts) * per_host
    lines = ["# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    rank = 0
    for h in hosts:
        for d in range(per_host):
            lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {h:>10} device "
                         f"{d:2d} [0000:{16 * d + 1:02x}:00] {gpu}")
            rank += 1
    lines += info + ["#", "#       size         count      type   redop    root     time   algbw"
                     "   busbw #wrong     time   algbw   busbw #wrong"]
    for size, busbw in rows:
        algbw = busbw * n / (2 * (n - 1))
        t = size / (algbw * 1e3)
        cell = f"{t:8.1f} {algbw:7.2f} {busbw:7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {cell} {cell}")
    return "\n".join(lines) + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n"


def facts_with(tmp_path, gpus: list[str], matrix: list[list[str]], p2p_ok: bool) -> Path:
    """A facts document (ncclcheck probe's shape) with the GPU section only."""
    labels = [f"GPU{i}" for i in range(len(gpus))]
    doc = {"schema": "ncclcheck/facts", "schema_version": 1, "ncclcheck_version": "test",
           "hostname": "pcie-box", "collected_at": "2026-11-26T00:00:00Z", "root": "/",
           "findings": [], "rule_errors": [], "skipped": [],
           "sections": {"gpu": {"status": "ok", "errors": [], "sources": [], "duration_s": 0.0,
                                "data": {"count": len(gpus), "p2p_all_supported": p2p_ok,
                                         "gpus": [{"index": i, "name": g} for i, g in enumerate(gpus)],
                                         "topology": {"labels": labels, "matrix": matrix}}}}}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc))
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("name, op", [
    ("a3mega-h100-2x8-all_reduce.txt", None),
    ("eks-efa-t4-2node-mpi-tagged.txt", "all_reduce"),
    ("rtx5090-socket-2.18-mpi-tagged.txt", None),
    ("superbench-a100-8gpu-all_gather.log", None),
    ("superbench-a100-8gpu-alltoall.log", None),
    ("superbench-a100-8gpu-broadcast.log", None),
    ("superbench-a100-8gpu-reduce_scatter.log", None)])
def test_every_real_table_imported_gets_a_class_and_a_verdict(name, op):
    """Each of these names its GPUs (``# Rank`` lines) or its transport (NCCL INFO lines)."""
    exp = import_file(TABLES / name, op)["expected"]
    assert exp["class"] and exp["range"] and exp["sources"], exp
    assert exp["verdict"] in ("normal", "low", "above the table"), exp


def test_the_fixture_verdicts():
    verdicts = {name: import_file(TABLES / name, op)["expected"] for name, op in (
        ("superbench-a100-8gpu-all_gather.log", None),
        ("eks-efa-t4-2node-mpi-tagged.txt", "all_reduce"),
        ("rtx5090-socket-2.18-mpi-tagged.txt", None),
        ("a3mega-h100-2x8-all_reduce.txt", None))}
    a100 = verdicts["superbench-a100-8gpu-all_gather.log"]
    assert (a100["class"], a100["verdict"]) == ("nvlink-a100-8", "normal")
    efa = verdicts["eks-efa-t4-2node-mpi-tagged.txt"]
    assert (efa["class"], efa["verdict"]) == ("efa-g4dn", "normal")  # "Using network AWS Libfabric"
    rtx = verdicts["rtx5090-socket-2.18-mpi-tagged.txt"]  # two ranks on one GPU
    assert (rtx["class"], rtx["verdict"]) == ("pcie-gen5-p2p", "low")
    assert any("2 ranks share the GPU at 0000:02:00 on lab" in x for x in rtx["limits"])
    a3 = verdicts["a3mega-h100-2x8-all_reduce.txt"]  # no NCCL INFO lines: network not named
    assert a3["class"].startswith("any network, 8 x H100") and a3["verdict"] == "normal"
    assert any("NCCL_DEBUG=INFO" in m and "--probe FACTS" in m for m in a3["missing"])


def test_p2p_disabled_across_sys_is_low_and_names_p2p(tmp_path):
    """Two PCIe Gen4 GPUs on two sockets (SYS), NCCL_P2P_DISABLE=1: the channels go via SHM;
    held against the P2P class the run is low, and the limits name P2P and the SYS hop."""
    gpu = "NVIDIA RTX A6000"
    info = ["box:1000:1000 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.",
            "box:1000:1010 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[81000] via SHM/direct/direct",
            "box:1001:1011 [1] NCCL INFO Channel 00/0 : 1[81000] -> 0[1000] via SHM/direct/direct"]
    (tmp_path / "ar.txt").write_text(nccl_tests_text(gpu, ["box"], 2, info,
                                                     [(256 << 20, 5.9), (GiB, 6.1)]))
    facts = facts_with(tmp_path, [gpu, gpu], [["X", "SYS"], ["SYS", "X"]], p2p_ok=True)
    out = run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe", str(facts))
    assert out.returncode == 0, out.stderr
    assert "# Expected             : pcie-gen4-p2p" in out.stdout
    assert "verdict            : low: 6.1 GB/s" in out.stdout
    assert "limited by         : P2P off (NCCL_P2P_DISABLE=1)" in out.stdout
    assert "GPUs meet across SYS" in out.stdout
    doc = json.loads(run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe",
                             str(facts), "--json").stdout)
    exp = doc["expected"]
    assert (exp["class"], exp["verdict"]) == ("pcie-gen4-p2p", "low") and exp["ratio"] < 0.5
    assert {"class", "range", "ratio", "verdict", "sources", "limits"} <= set(exp)


def test_the_same_run_with_p2p_on_is_normal(tmp_path):
    gpu = "NVIDIA RTX A6000"
    info = ["box:1000:1010 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] via P2P/IPC"]
    (tmp_path / "ar.txt").write_text(nccl_tests_text(gpu, ["box"], 2, info, [(GiB, 21.0)]))
    exp = import_file(tmp_path / "ar.txt")["expected"]
    assert (exp["class"], exp["verdict"], exp["limits"]) == ("pcie-gen4-p2p", "normal", [])


def test_socket_where_infiniband_is_up_is_low_and_names_socket(tmp_path):
    """2 x 8 H100 whose NCCL said ``Using network Socket``; the facts (a recorded H100 node with
    8 NDR ports up) give the class ib-ndr x 8, and the limit names Socket."""
    info = [f"{h}:{p}:{p} [0] NCCL INFO Using network Socket" for h, p in (("h1", 1000), ("h2", 2000))]
    info += [f"{h}:{p}:{p} [0] NCCL INFO NET/Socket : Using [0]enp27s0f0np0:10.10.1.{i}<0>"
             for i, (h, p) in enumerate((("h1", 1000), ("h2", 2000)))]
    (tmp_path / "ar.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["h1", "h2"], 8,
                                                     info, [(GiB, 9.5), (4 * GiB, 10.2)]))
    out = run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe", str(H100_IB), "--json")
    assert out.returncode == 0, out.stderr
    exp = json.loads(out.stdout)["expected"]
    assert exp["class"] == "ib-ndr" and exp["verdict"] == "low"
    assert exp["range"][0] == 44 * 8
    assert any(x.startswith("NCCL used Socket (TCP) though RDMA ports are up (mlx5_0")
               for x in exp["limits"])
    # without the facts the class cannot be told (Socket over an unknown link): it says what
    plain = import_file(tmp_path / "ar.txt")["expected"]
    assert plain["class"] is None and any("--probe FACTS" in m for m in plain["missing"])


def test_gdr_off_and_fewer_nics_are_named(tmp_path):
    info = []
    for h, p in (("h1", 1000), ("h2", 2000)):
        info += [f"{h}:{p}:{p} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>",
                 f"{h}:{p}:{p} [0] NCCL INFO Using network IB",
                 f"{h}:{p}:{p + 5} [0] NCCL INFO Channel 00/0 : 0[1000] -> 8[1000] [send] via NET/IB/0"]
    (tmp_path / "ar.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["h1", "h2"], 8,
                                                     info, [(GiB, 40.0), (4 * GiB, 41.0)]))
    out = run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe", str(H100_IB), "--json")
    exp = json.loads(out.stdout)["expected"]
    assert exp["class"] == "ib-ndr" and exp["verdict"] == "low"
    assert exp["range"][0] == 44 * 8  # the 8 NDR ports the facts show up
    assert any(x.startswith("NCCL used 2 of the 8 active ports (mlx5_0, mlx5_3)") for x in exp["limits"])
    assert any(x.startswith("GPUDirect RDMA off") for x in exp["limits"])
    assert not any("NICs for 8 GPUs" in x for x in exp["limits"])  # the ports say more


def test_messages_too_small_are_named():
    text = (TABLES / "superbench-a100-8gpu-all_gather.log").read_text()
    doc = import_nccl_tests("\n".join(l for l in text.splitlines()
                                      if not l.strip()[:1].isdigit() or int(l.split()[0]) <= 1 << 20),
                            "small.log", "all_gather")
    exp = doc["expected"]
    assert exp["verdict"] == "low"
    assert any(x.startswith("messages too small: the largest is 1048576 B") for x in exp["limits"])


def test_one_rank_has_no_class():
    exp = expect({"world_size": 1, "nodes": ["a"], "rows": [], "op": "all_reduce"})
    assert exp["class"] is None and exp["verdict"] is None
    assert "a second rank" in exp["missing"][0]


def test_h100_nvls_off_is_judged_against_the_ring_class(tmp_path):
    info = ["n:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0."]
    (tmp_path / "ar.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["n"], 8, info,
                                                     [(GiB, 360.0)]))
    exp = import_file(tmp_path / "ar.txt")["expected"]
    assert (exp["class"], exp["verdict"]) == ("nvlink-hopper-8-ring", "normal")
    (tmp_path / "on.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["n"], 8, [],
                                                     [(GiB, 360.0)]))
    exp = import_file(tmp_path / "on.txt")["expected"]
    assert (exp["class"], exp["verdict"]) == ("nvlink-h100-8", "low")


def test_fewer_nics_than_gpus_sets_the_range_and_says_so(tmp_path):
    facts = json.loads(H100_IB.read_text())
    for dev in facts["sections"]["ib"]["data"]["devices"]:
        if dev["name"] in ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"):  # 4 of the 8 NDR ports left
            continue
        for port in dev["ports"]:
            if port["link_layer"] == "InfiniBand":
                port["state"] = "DOWN"
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    info = [f"{h}:{p}:{p} [0] NCCL INFO Using network IB" for h, p in (("h1", 1000), ("h2", 2000))]
    (tmp_path / "ar.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["h1", "h2"], 8,
                                                     info, [(GiB, 180.0), (4 * GiB, 185.0)]))
    out = run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe",
                  str(tmp_path / "facts.json"), "--json")
    exp = json.loads(out.stdout)["expected"]
    assert exp["class"] == "ib-ndr" and exp["range"][0] == 44 * 4 and exp["verdict"] == "normal"
    assert "4 NICs for 8 GPUs per node: the range is for 4 NICs (one per GPU would double it)" \
        in exp["notes"]


def test_a_port_negotiated_down_and_a_small_mtu_are_named(tmp_path):
    facts = json.loads(H100_IB.read_text())
    for dev in facts["sections"]["ib"]["data"]["devices"]:
        if dev["name"] == "mlx5_4":
            dev["ports"][0]["rate_gbps"] = 200
    for iface in facts["sections"]["network"]["data"]["interfaces"]:
        if iface["name"] == "ibp60s0":  # mlx5_4's netdev
            iface["mtu"] = 1500
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    info = [f"{h}:{p}:{p} [0] NCCL INFO Using network IB" for h, p in (("h1", 1000), ("h2", 2000))]
    (tmp_path / "ar.txt").write_text(nccl_tests_text("NVIDIA H100 80GB HBM3", ["h1", "h2"], 8,
                                                     info, [(GiB, 200.0), (4 * GiB, 210.0)]))
    exp = json.loads(run_cli("bench", "--import", str(tmp_path / "ar.txt"), "--probe",
                             str(tmp_path / "facts.json"), "--json").stdout)["expected"]
    assert exp["verdict"] == "low"
    assert "h100-node-01: mlx5_4 negotiated 200 Gb/s, its peers 400" in exp["limits"]
    assert any(x.startswith("h100-node-01: ibp60s0 MTU 1500 on a 400 Gb/s link")
               for x in exp["limits"])


def test_a_probe_that_is_not_facts_is_one_line_and_exit_2():
    out = run_cli("bench", "--import", str(TABLES / "superbench-a100-8gpu-all_gather.log"),
                  "--probe", str(FIX / "reports" / "h100-ib" / "bench-all_reduce.json"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().endswith("is ncclcheck/bench, expected ncclcheck/facts or "
                                       "ncclcheck/cluster")
