"""Failure signatures (ncclcheck/signatures/*): metadata, what they match, what they must not."""

from __future__ import annotations

import re

import pytest
from diagfix import findings_of

from ncclcheck.logparse.state import LogState
from ncclcheck.rules import ALL_RULES
from ncclcheck.signatures import BY_ID, DERIVED_SIGNATURES, LINE_SIGNATURES

#: Rule ids (``ncclcheck rules``) that diagnose reuses because a log shows the same problem.
SHARED_VOCABULARY = {"limits-shm-too-small", "limits-memlock-limited", "nccl-ibverbs-unloadable",
                     "ib-gdr-not-ready", "net-socket-ifname", "net-transport", "ib-roce-gid-index",
                     "cluster-nccl-version-mismatch", "cluster-driver-version-mismatch",
                     "cluster-mtu-mismatch", "cluster-ib-ports-down", "ib-hca-select",
                     "gpu-p2p-unsupported", "env-debug-vars-set"}
RULE_IDS = {rule.id for rule in ALL_RULES}


def test_metadata_is_complete_and_ids_are_unique():
    ids = [s.id for s in LINE_SIGNATURES + DERIVED_SIGNATURES]
    assert len(ids) == len(set(ids))
    for sig in LINE_SIGNATURES + DERIVED_SIGNATURES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", sig.id), sig.id
        # an id is either the rules engine's (same meaning) or diagnose's own, prefixed log-
        assert sig.id in SHARED_VOCABULARY or sig.id.startswith("log-"), sig.id
        assert sig.id.startswith("log-") or sig.id in RULE_IDS, sig.id
        assert sig.severity in ("info", "warning", "error")
        assert sig.title and sig.cause and sig.fix
        assert "https://" in sig.docs or "src/" in sig.docs
    for sig in LINE_SIGNATURES:
        assert sig.patterns and sig.keywords, sig.id
    assert SHARED_VOCABULARY <= set(BY_ID) and SHARED_VOCABULARY <= RULE_IDS


# Each line in the real format of its NCCL/PyTorch release (see the cited issues).
@pytest.mark.parametrize("line, fid", [
    ("h:1:2 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
     "limits-shm-too-small"),
    ("Signal: Bus error (7)", "limits-shm-too-small"),
    ("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)",
     "limits-shm-too-small"),
    ("h:1:2 [0] misc/shmutils.cc:1 NCCL WARN unlink shared memory /dev/shm/nccl-abc failed, error: "
     "No such file or directory", "log-shm-removeipc"),
    ("h:1:2 [0] misc/shmutils.cc:1 NCCL WARN Error while attaching to shared memory segment "
     "/dev/shm/nccl- (size 0)", "log-shm-attach-failed"),
    ("h:1:2 [0] include/shm.h:1 NCCL WARN Call to shm_open failed : Permission denied",
     "log-shm-permission"),
    ("h:1:2 [0] bootstrap.cc:1 NCCL WARN Bootstrap : no socket interface found", "log-no-socket-interface"),
    ("h:1:2 [0] socket.cc:1 NCCL WARN Net : No interface found in the same subnet as remote address",
     "log-no-socket-interface"),
    ("h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : No IP interface found.", "log-no-socket-interface"),
    ("h:1:2 [0] NCCL WARN ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) "
     "nor AF_INET6(10)", "log-socket-bad-address"),
    ("h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Attempted to merge incompatible devices: [0]mlx5_0:1/IB "
     "and [1]mlx5_1:1/RoCE. Try selecting NICs of only one link type using NCCL_IB_HCA",
     "ib-hca-select"),
    ("h:1:2 [0] NCCL WARN Error: network IB not found.", "log-net-plugin-failed"),
    ("h:1:2 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net-ofi.so: cannot open shared "
     "object file: No such file or directory : when loading libnccl-net-ofi.so", "log-net-plugin-failed"),
    ("h:1:2 [0] net_ofi.c:1 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 4. RC: -22, "
     "Error: Invalid argument", "log-efa-register-failed"),
    ("h:1:2 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, "
     "vendor err 129", "log-ib-completion-error"),
    ("h:1:2 [0] p2p.cc:1 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<1234> with "
     "status=IBV_WC_RETRY_EXC_ERR(12) opcode=1", "log-ib-completion-error"),
    ("h:1:2 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
     "allocate memory", "limits-memlock-limited"),
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_reg_mr failed", "limits-memlock-limited"),
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_create_cq failed", "limits-memlock-limited"),
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, "
     "local QP 0x1", "ib-roce-gid-index"),
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_reg_mr failed with error Bad address",
     "log-ib-verbs-failed"),
    ("h:1:2 [0] misc/socket.cc:1 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1234> failed : "
     "Connection refused", "log-connection-refused"),
    ("h:1:2 [0] misc/socket.cc:1 NCCL WARN ncclSocketConnect: connect to 10.0.0.2<1234> returned "
     "Connection refused, exceeded error retry count after 35 attempts", "log-connection-refused"),
    ("h:1:2 [0] include/socket.h:403 NCCL WARN Connect to 10.38.10.112<21724> failed : Connection "
     "refused", "log-connection-refused"),
    ("h:1:2 [0] init.cc:1 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
     "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.", "log-duplicate-gpu"),
    ("Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000", "log-duplicate-gpu"),
    ("h:1:2 [0] graph/paths.cc:1 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 3.",
     "gpu-p2p-unsupported"),
    ("h:1:2 [0] init.cc:1 NCCL WARN Mismatched NCCL version detected : rank 8 version 22005 rank 0 "
     "version 21903", "cluster-nccl-version-mismatch"),
    ("h:1:2 [0] transport/net_socket.cc:1 NCCL WARN NET/Socket : message truncated : receiving 524288 "
     "bytes instead of 65536", "log-collective-mismatch"),
    ("h:1:2 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'", "log-nvls-failure"),
    ("h:1:2 [0] transport/shm.cc:1 NCCL WARN Cuda failure 217 'peer access is not supported between "
     "these two devices'", "log-cuda-error"),
    ("[rank7]:[E816 01:45:40.18 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=80078, OpType=BROADCAST, NumelIn=5056, NumelOut=5056, "
     "Timeout(ms)=600000) ran for 600026 milliseconds before timing out.", "log-watchdog-timeout"),
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
     "before timing out.", "log-watchdog-timeout"),
    ("[rank0]:[E ProcessGroupNCCL.cpp:1] Heartbeat monitor timed out! Process will be terminated "
     "after dumping debug info.", "log-watchdog-timeout"),
    ("host3: Test NCCL failure common.cu:1125 'unhandled system error'", "log-nccl-call-failed"),
    ("[rank1]:[E626 06:24:44.906 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
     "Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL "
     "work: 811, last completed NCCL work: 807.", "log-nccl-call-failed"),
    ("h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got async event : local access violation "
     "work queue error", "cluster-mtu-mismatch"),
    ("h:1:2 [0] transport/net_ib/p2p.cc:1 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<1> with "
     "status=IBV_WC_LOC_LEN_ERR(1) opcode=0 len=0 vendor err 105 (Recv)", "cluster-mtu-mismatch"),
    ("h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with "
     "error 1, opcode 0, len 0, vendor err 105", "cluster-mtu-mismatch"),
    ("h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : mlx5_3:1 Got async event : port error",
     "cluster-ib-ports-down"),
    ("[1690262003.417592] [node1:1234:0]  ucp_context.c:1100 UCX  WARN  network device 'mlx5_0:1' is "
     "not available, please use one or more of: 'eth0'(tcp), 'lo'(tcp)", "log-mpi-launcher"),
    ("[node1:01234] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168",
     "log-mpi-launcher"),
])
def test_signature_matches_its_lines(line, fid):
    assert fid in findings_of(line)


def test_cuda_code_refines_the_cause():
    f = findings_of("h:1:2 [0] transport/shm.cc:1 NCCL WARN Cuda failure 217 'peer access is not "
                    "supported between these two devices'")["log-cuda-error"]
    assert "NCCL_CUMEM_HOST_ENABLE=0" in f["fix"]


def test_a_length_error_is_the_mtu_not_a_generic_completion_error():
    found = findings_of("h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
                        "10.0.0.2<1> with error 1, opcode 0, len 0, vendor err 105")
    assert set(found) == {"cluster-mtu-mismatch"} and "MTU" in found["cluster-mtu-mismatch"]["fix"]
    twelve = findings_of("h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
                         "10.0.0.2<1> with status=12 opcode=0 len=0 vendor err 129")
    assert set(twelve) == {"log-ib-completion-error"}


def test_launcher_errors_say_which_part_failed():
    ucx = findings_of("UCX  WARN  network device 'mlx5_9:1' is not available")["log-mpi-launcher"]
    pmix = findings_of("PMIX ERROR: ERROR in file gds_ds21_lock_pthread.c at line 99")
    assert "UCX_NET_DEVICES" in ucx["fix"] and "mlx5_9:1" in ucx["message"]
    assert "PMIX_MCA_gds=hash" in pmix["log-mpi-launcher"]["fix"]


def test_completion_status_sets_severity_and_cause():
    flush = findings_of("h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
                        "10.0.0.2<1> with error 5, opcode 0, len 0, vendor err 249")
    assert flush["log-ib-completion-error"]["severity"] == "warning"
    assert "earlier failure" in flush["log-ib-completion-error"]["cause"]
    both = findings_of(
        "h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 5, "
        "opcode 0, len 0, vendor err 249",
        "h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, "
        "opcode 0, len 0, vendor err 129")["log-ib-completion-error"]
    assert both["severity"] == "error" and "12" in both["message"] and both["count"] == 2


# Lines NCCL prints in healthy runs that must stay silent.
@pytest.mark.parametrize("line", [
    "h:1:2 [0] NCCL INFO Failed to initialize any GIN plugin",
    "h:1:2 [0] NCCL INFO TUNER/Plugin: Failed to find ncclTunerPlugin_v2, using internal tuner instead.",
    "h:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so",
    "h:1:2 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot "
    "open shared object file: No such file or directory",
    "h:1:2 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.",
    "h:1:2 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin symbol (v4 or v5).",
    "h:1:2 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'",
    "h:1:2 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
    "h:1:2 [0] NCCL INFO NET/IB : No device found.",
    "h:1:2 [0] NCCL INFO Failed to open libibverbs.so[.1]",
    "h:1:2 [0] NCCL INFO misc/socket.cc:28 -> 3",
    "h:1:2 [0] NCCL INFO NVLS multicast support is not available on dev 3",
    "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "epoch 3 loss 0.25 (Bus errors: 0 in this made-up counter is not a crash)",
    "Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING instead",
    "h:1:2 [0] misc/ibvwrap.cc:173 NCCL WARN lib wrapper not initialized.",
    "UCX  INFO  network device 'mlx5_0:1' selected",
])
def test_healthy_lines_raise_nothing(line):
    assert findings_of(line) == {}


def _job(host_lines: dict[str, list[str]]) -> list[str]:
    return [f"{host}:{10 + i}:{10 + i} [0] NCCL INFO {msg}" for i, (host, msgs) in
            enumerate(host_lines.items()) for msg in msgs]


_WATCHDOG = ("[rank0]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=98, NumelOut=98, "
             "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")

#: Every row of the failure table (nccl-knowledge.md §9): its exact string(s), as NCCL or the
#: framework prints them, and the finding id diagnose gives. Rows without a single telling line
#: (8, 16, 21, 29) are short logs.
KNOWLEDGE_ROWS = {
    1: (["h:1:2 [0] misc/shmutils.cc:60 NCCL WARN Error: failed to extend /dev/shm/nccl-AbC123 to "
         "9637892 bytes, error: No space left on device (28)"], "limits-shm-too-small"),
    2: (["h:1:2 [0] misc/shmutils.cc:1 NCCL WARN unlink shared memory /dev/shm/nccl-AbC123 failed, "
         "error: No such file or directory"], "log-shm-removeipc"),
    3: (["h:1:2 [0] include/shm.h:1 NCCL WARN Call to shm_open failed : Permission denied"],
        "log-shm-permission"),
    4: (["h:1:2 [0] bootstrap.cc:1 NCCL WARN Bootstrap : no socket interface found"],
        "log-no-socket-interface"),
    5: (["h:1:2 [0] bootstrap.cc:1 NCCL WARN NET/Socket : No usable listening interface found"],
        "log-no-socket-interface"),
    6: (["h:1:2 [0] net_socket.cc:1 NCCL WARN NET/Socket : no interface found"],
        "log-no-socket-interface"),
    7: (["h:1:2 [0] socket.cc:1 NCCL WARN ncclSocketInit: connecting to address  with family 0 is "
         "neither AF_INET(2) nor AF_INET6(10)"], "log-socket-bad-address"),
    8: (_job({"a": ["Failed to open libibverbs.so[.1]", "NET/Socket : Using [0]ib0:10.0.0.1<0>",
                    "Using network Socket"],
              "b": ["Failed to open libibverbs.so[.1]", "NET/Socket : Using [0]ib0:10.0.0.2<0>",
                    "Using network Socket"]}), "nccl-ibverbs-unloadable"),
    9: (["h:1:2 [0] plugin/net.cc:334 NCCL WARN Failed to initialize any NET plugin"],
        "log-net-plugin-failed"),
    10: (["h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
          "10.0.0.2<1234> with error 12, opcode 1, len 0, vendor err 129"], "log-ib-completion-error"),
    11: (["h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with "
          "status=5 opcode=0 len=0 vendor err 249 (Recv)"], "log-ib-completion-error"),
    12: (["h:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with "
          "error 4, opcode 0, len 0, vendor err 81"], "log-ib-completion-error"),
    13: (["h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_reg_mr failed with error Cannot "
          "allocate memory"], "limits-memlock-limited"),
    14: (["h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_create_cq failed"],
         "limits-memlock-limited"),
    15: (["h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with error Invalid "
          "argument"], "ib-roce-gid-index"),
    16: (_job({"gpu1": ["comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
                       "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
                       "comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]})
         + [_WATCHDOG], "gpu-p2p-unsupported"),
    17: (["h:1:2 [0] graph/paths.cc:1 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 "
          "and 3. This should not be the case given their connectivity, and is probably due to a "
          "hardware issue."], "gpu-p2p-unsupported"),
    18: (["h:1:2 [0] init.cc:1 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
          "device 1000"], "log-duplicate-gpu"),
    19: (["h:1:2 [0] init.cc:1 NCCL WARN Mismatched NCCL version detected : rank 8 version 22005 "
          "rank 0 version 21903"], "cluster-nccl-version-mismatch"),
    20: (["h:1:2 [0] misc/socket.cc:1 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1234> "
          "failed : Software caused connection abort"], "log-connection-refused"),
    21: (_job({"a": ["Bootstrap : Using docker0:172.17.0.1<0>"],
               "b": ["Bootstrap : Using docker0:172.17.0.1<0>"]}), "net-socket-ifname"),
    22: (["h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got async event : local access "
          "violation work queue error"], "cluster-mtu-mismatch"),
    23: ([_WATCHDOG], "log-watchdog-timeout"),
    24: (["h:1:2 [0] transport/shm.cc:1 NCCL WARN Cuda failure 217 'peer access is not supported "
          "between these two devices'"], "log-cuda-error"),
    25: (["h:1:2 [0] misc/shmutils.cc:1 NCCL WARN Error while attaching to shared memory segment "
          "/dev/shm/nccl-\x01\x02 (size 0)"], "log-shm-attach-failed"),
    26: (["h:1:2 [0] transport/p2p.cc:1 NCCL WARN Cuda failure 800 'operation not permitted'"],
         "log-cuda-error"),
    27: (["h:1:2 [0] net_ib/init.cc:1 NCCL WARN NET/IB : Attempted to merge incompatible devices: "
          "[0]mlx5_0:1/IB and [1]mlx5_1:1/RoCE. Try selecting NICs of only one link type using "
          "NCCL_IB_HCA"], "ib-hca-select"),
    28: (["h:1:2 [0] net_ofi.c:1 NCCL WARN NET/OFI Unable to register memory (type = 2) for device "
          "4. RC: -22, Error: Invalid argument"], "log-efa-register-failed"),
    29: (_job({"a": ["Using network AWS Libfabric"]}) + ["OSError: [Errno 12] Cannot allocate memory"],
         "log-efa-fork-enomem"),
    30: (["[node1:01234] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168"],
         "log-mpi-launcher"),
}


def test_every_knowledge_base_row_is_listed():
    assert sorted(KNOWLEDGE_ROWS) == list(range(1, 31))


@pytest.mark.parametrize("row", sorted(KNOWLEDGE_ROWS))
def test_knowledge_base_row_has_a_signature_with_cause_fix_and_citation(row):
    from ncclcheck.diagnose import build_document
    from ncclcheck.judge.derived import run_checks

    lines, fid = KNOWLEDGE_ROWS[row]
    state = LogState()
    for n, line in enumerate(lines, 1):
        state.feed(line, "t.log", n)
    run_checks(state)
    found = {f["id"]: f for f in build_document(state, [])["findings"]}
    assert fid in found, (row, sorted(found))
    f = found[fid]
    assert f["cause"] and f["fix"] and ("https://" in f["docs"] or "src/" in f["docs"])
    assert f["severity"] in ("warning", "error"), (row, f["severity"])


DOWNGRADES = re.compile(r"NCCL_IB_DISABLE=1|NCCL_NET=Socket|NCCL_NET_GDR_LEVEL=LOC")
ON_PURPOSE = re.compile(r"on purpose|not a fix|confirm")     # TCP wanted; a one-off test run


def test_no_advice_downgrades_the_fabric_as_a_fix():
    """Issue 17: diagnose never advises disabling IB (or GPUDirect) as the fix; sockets may only be
    named for a user who wants TCP on purpose, or as one run of a bisection that is not the fix.
    Both the registered signatures and the fixes built in code (derived checks, pasted outputs)."""
    for sig in LINE_SIGNATURES + DERIVED_SIGNATURES:
        for m in DOWNGRADES.finditer(sig.fix):
            sentence = sig.fix[sig.fix.rfind(".", 0, m.start()) + 1:]
            sentence = sentence[:sentence.find(".)") + 2 if ".)" in sentence else None]
            assert ON_PURPOSE.search(sentence), (sig.id, sig.fix)
    from pathlib import Path

    import ncclcheck.signatures as pkg
    for src in sorted(Path(pkg.__file__).parent.glob("*.py")):
        text = src.read_text()
        for m in DOWNGRADES.finditer(text):
            around = text[max(0, m.start() - 300):m.end() + 300]
            assert ON_PURPOSE.search(around), f"{src.name}: {around}"


def test_ras_client_port_in_use_is_a_harmless_note_not_an_unknown_warning():
    """NCCL >= 2.24 ignores a failed RAS client socket ((void)rasClientInitSocket() in
    src/ras/ras.cc): the WARN it prints on a port held by another user's job (NVIDIA/nccl#2397,
    a job that went on to run its collectives) is an info note with its cause, not a warning
    'this tool does not recognise'. A bind failure elsewhere (the bootstrap's own socket) is not."""
    ras = ("[2026-09-09 11:29:56] ubuntu2:321049:321049 [0] ras/client_support.cc:181 NCCL WARN "
           "Call to bind failed: Address already in use")
    found = findings_of(ras, "ubuntu2:321049:321049 [0] NCCL INFO RAS failed to establish a client "
                             "listening socket at localhost:28028")
    assert list(found) == ["log-ras-client-port"] and found["log-ras-client-port"]["severity"] == "info"
    assert "Address already in use" in found["log-ras-client-port"]["message"]
    assert "NCCL_RAS_ADDR" in found["log-ras-client-port"]["fix"]
    other = findings_of("e8:213:213 [0] include/socket.h:333 NCCL WARN Call to bind failed : Address "
                        "already in use")
    assert "log-ras-client-port" not in other
