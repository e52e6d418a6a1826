"""Whole-log checks (ncclcheck/signatures/derived.py): each needs positive evidence to speak.

The lines are built in the exact formats of the corpus logs, varied to reach each branch.
"""

from __future__ import annotations

import pytest

from ncclcheck.diagnose import build_document
from ncclcheck.logparse.state import LogState
from ncclcheck.judge.derived import run_checks


def diagnose_lines(*lines: str) -> dict:
    state = LogState()
    for n, line in enumerate(lines, 1):
        state.feed(line, "t.log", n)
    run_checks(state)
    doc = build_document(state, [])
    assert "parser" not in doc
    return doc


def ids(doc: dict) -> set[str]:
    return {f["id"] for f in doc["findings"]}


def by_id(doc: dict, fid: str) -> dict:
    return next(f for f in doc["findings"] if f["id"] == fid)


def test_docker0_with_the_same_address_on_two_nodes_is_an_error():
    doc = diagnose_lines("node1:10:10 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
                         "node2:20:20 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>")
    f = by_id(doc, "net-socket-ifname")
    assert f["severity"] == "error" and f["hosts"] == ["node1", "node2"]


def test_same_bootstrap_address_on_two_hosts_even_with_a_normal_name():
    doc = diagnose_lines("node1:10:10 [0] NCCL INFO Bootstrap : Using eth9:10.9.9.9<0>",
                         "node2:20:20 [0] NCCL INFO Bootstrap : Using eth9:10.9.9.9<0>")
    assert "same bootstrap address" in by_id(doc, "net-socket-ifname")["message"]


def test_loopback_on_a_single_node_is_fine():
    doc = diagnose_lines("gpt-dev:1:1 [1] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo",
                         "gpt-dev:1:1 [1] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
                         "gpt-dev:2:2 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>")
    assert ids(doc) == set() and doc["summary"]["verdict"].startswith("no failure seen")


def test_virbr_in_the_socket_list_between_nodes_is_a_warning():
    doc = diagnose_lines(
        "a:1:1 [0] NCCL INFO NET/Socket : Using [0]enp7s0:10.0.0.1<0> [1]virbr0:192.168.122.1<0>",
        "a:1:1 [0] NCCL INFO Using network Socket",
        "b:2:2 [0] NCCL INFO NET/Socket : Using [0]enp7s0:10.0.0.2<0> [1]virbr0:192.168.122.1<0>",
        "b:2:2 [0] NCCL INFO Using network Socket")
    assert by_id(doc, "net-socket-ifname")["severity"] == "warning"


def test_libibverbs_missing_with_rdma_in_sight_is_a_warning():
    lines = ("n1:5:5 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0:1,mlx5_1:1",
             "n1:5:5 [0] NCCL INFO Failed to open libibverbs.so[.1]",
             "n1:5:5 [0] NCCL INFO NET/Socket : Using [0]eth0:10.25.0.1<0>",
             "n1:5:5 [0] NCCL INFO Using network Socket")
    doc = diagnose_lines(*lines, "n2:6:6 [0] NCCL INFO Using network Socket")
    f = by_id(doc, "nccl-ibverbs-unloadable")
    assert f["severity"] == "warning" and "NCCL_IB_HCA" in f["message"]
    assert "log-silent-socket-fallback" not in ids(doc)      # one cause, reported once
    single = by_id(diagnose_lines(*lines), "nccl-ibverbs-unloadable")
    assert single["severity"] == "info" and "no traffic leaves this node" in single["message"]


def test_libibverbs_missing_on_one_node_without_rdma_is_nothing():
    doc = diagnose_lines("n1:5:5 [0] NCCL INFO Failed to open libibverbs.so[.1]",
                         "n1:5:5 [0] NCCL INFO Using network Socket",
                         "n1:6:6 [1] NCCL INFO Using network Socket")
    assert ids(doc) == set()


def test_ib_disabled_on_purpose_is_nothing():
    doc = diagnose_lines("u:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
                         "u:1:1 [0] NCCL INFO NET/Socket : Using [0]ibs85f0:192.168.1.14<0>",
                         "u:1:1 [0] NCCL INFO NET/IB : No device found.",
                         "u:1:1 [0] NCCL INFO Using network Socket",
                         "v:2:2 [0] NCCL INFO Using network Socket")
    assert ids(doc) == set()


def test_no_device_with_ipoib_interface_is_a_silent_fallback():
    doc = diagnose_lines("c:924:924 [5] NCCL INFO Bootstrap : Using ibp12s0:10.149.0.32<0>",
                         "c:924:1152 [5] NCCL INFO NET/IB : No device found.",
                         "c:924:1152 [5] NCCL INFO NET/Socket : Using [0]ibp12s0:10.149.0.32<0>",
                         "c:924:1152 [5] NCCL INFO Using network Socket")
    assert ids(doc) == {"log-silent-socket-fallback"}


def test_no_device_on_a_cloud_vm_is_nothing():
    doc = diagnose_lines("ip-1:1:1 [0] NCCL INFO NET/IB : No device found.",
                         "ip-1:1:1 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0>",
                         "ip-1:1:1 [0] NCCL INFO Using network Socket",
                         "ip-2:1:1 [0] NCCL INFO Using network Socket")
    assert ids(doc) == set()


def test_transport_disagreement_between_hosts():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO Using network IB", "b:2:2 [0] NCCL INFO Using network Socket",
                         "c:3:3 [0] NCCL INFO Using network IBext_v8")
    f = by_id(doc, "net-transport")
    assert "ib on a, c" in f["message"] and "socket on b" in f["message"]


def test_ib_and_ibext_are_the_same_family():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO Using network IB", "b:2:2 [0] NCCL INFO Using network IBext")
    assert ids(doc) == set()


def test_version_disagreement_from_info_lines():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
                         "b:2:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.3")
    f = by_id(doc, "cluster-nccl-version-mismatch")
    assert "2.19.3 (b)" in f["message"] and "2.20.5 (a)" in f["message"]
    assert {r["nccl_version"] for r in doc["ranks"]} == {"2.20.5", "2.19.3"}


def test_torch_reported_version_is_not_a_mismatch():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
                         "[rank0]:torch.distributed.DistBackendError: NCCL error in: x.cpp:1, "
                         "invalid usage, NCCL version 2.19.3",
                         "RuntimeError: NCCL error in: x.cpp:1, invalid usage, NCCL version 2.18.1")
    assert "cluster-nccl-version-mismatch" not in ids(doc)


def test_gdr_disabled_needs_ib_and_no_gdr_traffic():
    disabled = ("h:1:1 [0] NCCL INFO Using network IB",
                "h:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)")
    assert ids(diagnose_lines(*disabled)) == {"ib-gdr-not-ready"}
    used = disabled + ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",)
    assert ids(diagnose_lines(*used)) == set()
    by_distance = ("h:1:1 [0] NCCL INFO Using network IB",
                   "h:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 1d000 / HCA 0 "
                   "(distance 4 > 2)")
    assert ids(diagnose_lines(*by_distance)) == set()


def test_init_incomplete_only_relative_to_ranks_that_completed():
    start = "ncclCommInitRank comm 0x{c} rank {r} nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1 - Init {s}"
    one_done = diagnose_lines(f"a:1:1 [0] NCCL INFO {start.format(c='aa', r=0, s='START')}",
                              f"b:2:2 [0] NCCL INFO {start.format(c='bb', r=1, s='START')}",
                              f"a:1:1 [0] NCCL INFO {start.format(c='aa', r=0, s='COMPLETE')}")
    f = by_id(one_done, "log-init-incomplete")
    assert f["hosts"] == ["b"] and f["ranks"] == [1]
    assert one_done["hosts"]["a"]["init_complete"] == "1/1"
    none_done = diagnose_lines(f"a:1:1 [0] NCCL INFO {start.format(c='aa', r=0, s='START')}",
                               f"b:2:2 [0] NCCL INFO {start.format(c='bb', r=1, s='START')}")
    assert ids(none_done) == set()


def test_unrecognized_warn_is_info_and_only_when_nothing_else():
    alone = diagnose_lines("h:1:1 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : "
                           "client reregistration")
    f = by_id(alone, "log-unrecognized-warn")
    assert f["severity"] == "info" and alone["summary"]["verdict"].startswith("no failure seen")
    with_error = diagnose_lines("h:1:1 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event",
                                "h:1:1 [0] bootstrap.cc:1 NCCL WARN Bootstrap : no socket interface found")
    assert ids(with_error) == {"log-no-socket-interface"}


def test_fallback_call_failure_is_dropped_when_a_cause_is_known():
    doc = diagnose_lines("RuntimeError: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.4.8",
                         "h:1:1 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_reg_mr failed")
    assert ids(doc) == {"limits-memlock-limited"}


def test_healthy_multi_node_ib_log_facts():
    doc = diagnose_lines(
        "[rank0]:a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "[rank0]:a:1:1 [0] NCCL INFO cudaDriverVersion 12040",
        "[rank0]:a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "[rank0]:a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
        "[rank0]:a:1:1 [0] NCCL INFO Using network IB",
        "[rank0]:a:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
        "[rank0]:a:1:1 [0] NCCL INFO Channel 00/02 :    0   1",
        "[rank0]:a:1:1 [0] NCCL INFO Channel 01/02 :    0   1",
        "[rank0]:a:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1",
        "[rank0]:a:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "[rank0]:a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "[rank0]:a:1:1 [0] NCCL INFO comm 0xaa rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        "[rank1]:b:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "[rank1]:b:2:2 [0] NCCL INFO Using network IB",
        "[rank1]:b:2:2 [0] NCCL INFO comm 0xbb rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE")
    assert doc["healthy"] and ids(doc) == set()
    r0 = doc["ranks"][0]
    assert (r0["rank"], r0["nccl_version"], r0["cuda_version"], r0["cuda_driver"]) == (0, "2.21.5", "12.4", 12040)
    assert r0["bootstrap"] == [{"interface": "eth0", "address": "10.0.0.1"}]
    assert r0["ib_devices"][1] == {"name": "mlx5_1", "port": 1, "link_layer": "RoCE"}
    assert (r0["gdr"], r0["channels"], r0["trees"], r0["init_complete"]) == ("used", 2, 2, True)
    assert r0["env"] == {"NCCL_SOCKET_IFNAME": "eth0"} and r0["oob"]["interface"] == "eth0"
    assert doc["summary"]["init"] == {"started": 2, "complete": 2}
    assert "healthy" in doc["summary"]["verdict"]


def test_rdma_on_another_host_does_not_count():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
                         "a:1:1 [0] NCCL INFO Using network IB",
                         "b:2:2 [0] NCCL INFO NET/IB : No device found.",
                         "b:2:2 [0] NCCL INFO Using network Socket")
    assert ids(doc) == {"net-transport"}


def test_host_less_rdma_hint_counts_on_a_single_host_log():
    doc = diagnose_lines("[1,0]<stderr>:libibverbs: Warning: couldn't stat '/sys/class/infiniband/mlx5_7'.",
                         "[1,0]<stdout>:w:5:5 [0] NCCL INFO NET/IB : No device found.",
                         "[1,0]<stdout>:w:5:5 [0] NCCL INFO Using network Socket")
    assert ids(doc) == {"log-silent-socket-fallback"}


def test_ranks_on_different_drivers_are_named():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO cudaDriverVersion 12020",
                         "a:1:1 [0] NCCL INFO Using network Socket",
                         "b:2:2 [0] NCCL INFO cudaDriverVersion 12040",
                         "b:2:2 [0] NCCL INFO Using network Socket")
    f = by_id(doc, "cluster-driver-version-mismatch")
    assert f["severity"] == "warning" and "12.2 (a)" in f["message"] and "12.4 (b)" in f["message"]
    assert [e["line"] for e in f["evidence"]] == [1, 3] and f["hosts"] == ["a", "b"]
    same = diagnose_lines("a:1:1 [0] NCCL INFO cudaDriverVersion 12040",
                          "b:2:2 [0] NCCL INFO cudaDriverVersion 12040")
    assert ids(same) == set()


def test_debugging_variables_are_an_info_note_not_a_problem():
    doc = diagnose_lines("a:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
                         "a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
                         "a:1:1 [0] NCCL INFO Using network Socket")
    f = by_id(doc, "env-debug-vars-set")
    assert f["severity"] == "info" and f["message"].startswith("NCCL_ALGO=Ring set on 1 process")
    assert f["evidence"][0]["line"] == 1 and doc["summary"]["findings"]["warning"] == 0


def _single_node_job(*extra: str) -> dict:
    lines = []
    for r in range(2):
        h = f"[rank{r}]:gpu1:{10 + r}:{10 + r} [{r}] NCCL INFO"
        lines += [f"{h} comm 0x{r}a rank {r} nranks 2 cudaDev {r} busId {r}1000 - Init START",
                  f"{h} Channel 00/0 : {r}[{r}] -> {1 - r}[{1 - r}] via P2P/IPC",
                  f"{h} comm 0x{r}a rank {r} nranks 2 cudaDev {r} busId {r}1000 - Init COMPLETE"]
    lines += [f"[rank{r}]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
              "collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=98, "
              "NumelOut=98, Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
              for r in range(2)]
    return diagnose_lines(*lines, *extra)


def test_a_silent_hang_over_p2p_after_init_points_at_acs():
    doc = _single_node_job()
    f = by_id(doc, "gpu-p2p-unsupported")
    assert f["severity"] == "warning" and "ACS" in f["cause"] and "NCCL_P2P_DISABLE=1" in f["fix"]
    assert ids(doc) == {"log-watchdog-timeout", "gpu-p2p-unsupported"}
    assert f["evidence"][0]["text"].endswith("Init COMPLETE")


def test_no_acs_hint_when_nccl_said_what_failed_or_nodes_talk():
    errored = _single_node_job("gpu1:10:10 [0] transport/shm.cc:1 NCCL WARN Cuda failure 217 "
                               "'peer access is not supported between these two devices'")
    assert "gpu-p2p-unsupported" not in ids(errored)
    two_nodes = _single_node_job("[rank1]:gpu2:30:30 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>")
    assert "gpu-p2p-unsupported" not in ids(two_nodes)


def test_enomem_counts_only_on_efa():
    line = "OSError: [Errno 12] Cannot allocate memory"
    assert ids(diagnose_lines("a:1:1 [0] NCCL INFO Using network Socket", line)) == set()
    efa = diagnose_lines("a:1:1 [0] NCCL INFO Using network AWS Libfabric", line)
    assert ids(efa) == {"log-efa-fork-enomem"}
    assert "FI_EFA_USE_HUGE_PAGE=0" in by_id(efa, "log-efa-fork-enomem")["fix"]


def test_a_check_that_breaks_is_counted_not_raised(monkeypatch):
    from ncclcheck.judge import derived

    def broken(state):
        raise ValueError("boom")

    monkeypatch.setattr(derived, "CHECKS", (broken,) + derived.CHECKS)
    state = LogState()
    state.feed("a:1:1 [0] NCCL INFO Using network Socket", "t.log", 1)
    run_checks(state)
    doc = build_document(state, [])
    assert doc["parser"] == {"errors": 1, "first_error": "broken: ValueError: boom"}


def test_pdsh_traceback_lines_are_attributed_to_their_host():
    doc = diagnose_lines(
        "w1: w1:100:100 [0] NCCL INFO Using network IB",
        "w2: w2:200:200 [0] NCCL INFO Using network IB",
        "w2: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, "
        "NCCL version 2.18.1",
        "w1: epoch 1 done")
    f = by_id(doc, "log-nccl-call-failed")
    assert f["hosts"] == ["w2"] and doc["summary"]["processes"] == 2


def test_wrong_interface_names_the_interface_why_and_the_exact_fix():
    """Issue 13: say which interface is wrong and why, and give NCCL_SOCKET_IFNAME=<name>."""
    doc = diagnose_lines(
        "a:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
        "a:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]ens5:10.0.0.1<0>",
        "b:2:2 [0] NCCL INFO Bootstrap : Using ens5:10.0.0.2<0>",
        "b:2:2 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.0.2<0>",
        "b:2:2 [0] NCCL INFO Using network Socket",
        "NCCL version 2.21.5+cuda12.4")
    f = by_id(doc, "net-socket-ifname")
    assert f["severity"] == "error" and "docker0:172.17.0.1" in f["message"]
    assert "Docker's bridge" in f["message"]
    assert f["fix"].startswith("Set NCCL_SOCKET_IFNAME==ens5 on every node")


@pytest.mark.parametrize("iface, words", [
    ("veth3a1b:fe80::1c2b:3ff:fe4d:5e6f%veth3a1b", "virtual link"), ("br-5f2a:172.18.0.1", "user-network bridge"),
    ("virbr0:192.168.122.1", "libvirt")])
def test_a_virtual_interface_among_socket_interfaces_is_named(iface, words):
    doc = diagnose_lines(
        f"a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]{iface}<0>",
        "a:1:1 [0] NCCL INFO Using network Socket",
        "b:2:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
        "b:2:2 [0] NCCL INFO Using network Socket")
    f = by_id(doc, "net-socket-ifname")
    assert iface in f["message"] and words in f["message"]
    assert "NCCL_SOCKET_IFNAME==eth0" in f["fix"]


def test_an_old_nccl_gets_the_prefix_form_of_the_fix():
    """``=name`` exists since NCCL 2.5; the horovod#789 log runs 2.3.5."""
    from pathlib import Path

    from ncclcheck.diagnose import diagnose_files
    log = Path(__file__).parents[1] / "fixtures/logs/wrong-interface-lo-ibverbs-missing-docker.log"
    f = by_id(diagnose_files([str(log)]), "net-socket-ifname")
    assert "lo:127.0.0.1" in f["message"] and "loopback" in f["message"]
    assert f["fix"].startswith("Set NCCL_SOCKET_IFNAME=eth0 on every node (NCCL before 2.5")


def test_another_vendors_rdma_device_beside_mlx5_needs_ib_hca():
    """Issue 13 (mixed RDMA devices): an iWARP i40iw0 listed beside mlx5 ports, NCCL_IB_HCA unset."""
    doc = diagnose_lines(
        "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]i40iw0:1/RoCE ; "
        "OOB eth0:10.0.0.1<0>",
        "a:1:1 [0] NCCL INFO Using network IB")
    f = by_id(doc, "ib-hca-select")
    assert f["severity"] == "warning" and "i40iw0 (Intel X722 iWARP)" in f["message"]
    assert f["fix"].startswith("Set NCCL_IB_HCA==mlx5_0,mlx5_1 on every node")
    chosen = diagnose_lines(
        "a:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,i40iw0",
        "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]i40iw0:1/RoCE ; "
        "OOB eth0:10.0.0.1<0>")
    assert "ib-hca-select" not in ids(chosen)           # the user chose them: not our call
    alone = diagnose_lines("a:1:1 [0] NCCL INFO NET/IB : Using [0]irdma0:1/RoCE ; OOB eth0:10.0.0.1<0>")
    assert "ib-hca-select" not in ids(alone)


def test_gpudirect_rdma_on_some_hosts_only():
    """Issue 13 (across hosts): GDRDMA on node-a's NET/IB channels, plain NET/IB on node-b's."""
    doc = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO Using network IB",
        "node-a:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "node-b:2:2 [0] NCCL INFO Using network IB",
        "node-b:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0")
    f = by_id(doc, "ib-gdr-not-ready")
    assert f["message"].startswith("GPUDirect RDMA is used on node-a but not on node-b")
    assert f["hosts"] == ["node-b"] and f["severity"] == "warning"
    same = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "node-b:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA",
        "node-a:1:1 [0] NCCL INFO Using network IB", "node-b:2:2 [0] NCCL INFO Using network IB")
    assert "ib-gdr-not-ready" not in ids(same)


def test_libibverbs_missing_says_what_the_socket_fallback_costs():
    """Issue 13: the consequence of a missing libibverbs (Socket, and its cost) is in the finding."""
    doc = diagnose_lines(
        "a:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        "a:1:1 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.0.1<0>",
        "a:1:1 [0] NCCL INFO Using network Socket",
        "b:2:2 [0] NCCL INFO Using network Socket")
    f = by_id(doc, "nccl-ibverbs-unloadable")
    assert "over TCP sockets on ens5" in f["message"] and "fraction of the bandwidth" in f["message"]
    assert f["severity"] == "info"           # no RDMA hardware in sight: Socket may be expected


def test_a_host_without_a_version_line_is_dated_by_its_plugin_loader_message():
    """Issue 13 (across hosts): node-b prints no version, but its 'No plugin found (...), using
    internal implementation' only exists in NCCL 2.5-2.16, while node-a runs 2.23.4."""
    doc = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. "
        "Using internal network plugin.",
        "node-a:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.4",
        "node-b:2:2 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
        "implementation",
        "node-b:2:2 [0] NCCL INFO Using network IB")
    f = by_id(doc, "cluster-nccl-version-mismatch")
    assert f["message"].startswith("node-b prints no NCCL version, but its plugin-loader message "
                                   "exists only in NCCL 2.5-2.16, while the log shows NCCL 2.23.4")
    same = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "node-b:2:2 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open "
        "shared object file: No such file or directory : when loading libnccl-net.so")
    assert "cluster-nccl-version-mismatch" not in ids(same)


def test_two_hosts_whose_plugin_messages_cannot_be_the_same_version():
    doc = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
        "file: No such file or directory No plugin found (libnccl-net.so), using internal "
        "implementation",
        "node-b:2:2 [0] NCCL INFO NET/Plugin : No plugin found, using internal implementation")
    f = by_id(doc, "cluster-nccl-version-mismatch")
    assert "2.17-2.18" in f["message"] and "2.19-2.20" in f["message"]


def test_plugin_wording_that_contradicts_a_printed_version_disables_the_dating():
    """A host printing 2.20.5 with the 2.22-2.25 wording (a patched build, or a synthesised log):
    the table does not hold for this log, so a host without a version line is not dated by it."""
    doc = diagnose_lines(
        "node-a:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
        "node-a:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        "node-b:2:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
    assert "cluster-nccl-version-mismatch" not in ids(doc)


def test_real_log_libibverbs_missing_names_the_socket_cost():
    """horovod#789 (real): libibverbs missing between two containers; the finding says what the
    Socket fallback costs, on the interfaces NCCL printed."""
    from pathlib import Path

    from ncclcheck.diagnose import diagnose_files
    log = Path(__file__).parents[1] / "fixtures/logs/wrong-interface-lo-ibverbs-missing-docker.log"
    f = by_id(diagnose_files([str(log)]), "nccl-ibverbs-unloadable")
    assert "over TCP sockets on lo, eth0" in f["message"]
    assert "fraction of the bandwidth RDMA would get" in f["message"]


def test_a_bad_peer_address_after_init_is_the_point_to_point_connection():
    """NVIDIA/nccl#2057 (NCCL 2.29.2): every rank completed init, then ungrouped ncclSend/ncclRecv
    on both ranks made the socket transport read an address of family 1. The cause is the
    point-to-point ordering (group the calls), not NCCL_SOCKET_IFNAME; the same line before
    Init COMPLETE keeps the bootstrap words."""
    h = "VM-16-64-ubuntu:28471:{tid} [0]"
    init = [f"{h.format(tid=28471)} NCCL INFO Using network Socket",
            f"{h.format(tid=28471)} NCCL INFO [Rank 0] ncclCommInitRank comm 0x55 rank 0 nranks 2 "
            "cudaDev 0 nvmlDev 0 busId 80 commId 0x2e - Init START"]
    done = [f"{h.format(tid=28471)} NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 2 cudaDev 0 "
            "nvmlDev 0 busId 80 commId 0x2e - Init COMPLETE"]
    bad = [f"[2026-03-18 11:13:09] {h.format(tid=28499)} misc/socket.cc:537 NCCL WARN "
           "ncclSocketInit: connecting to address  with family 1 is neither AF_INET(2) nor AF_INET6(10)"]
    after = by_id(diagnose_lines(*init, *done, *bad), "log-socket-bad-address")
    assert "ncclGroupStart" in after["fix"] and "NVIDIA/nccl#2057" in after["cause"]
    before = by_id(diagnose_lines(*init, *bad, *done), "log-socket-bad-address")
    assert "ncclGroupStart" not in before["fix"] and "NCCL_SOCKET_IFNAME" in before["cause"]
