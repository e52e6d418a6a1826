"""Failure signatures (ncclcheck/signatures/*): metadata, what they match, what they must not."""

from __future__ import annotations

import re

import pytest

from ncclcheck.logparse.state import LogState
from ncclcheck.signatures import BY_ID, DERIVED_SIGNATURES, LINE_SIGNATURES

SHARED_VOCABULARY = {"limits-shm-too-small", "limits-memlock-limited", "nccl-ibverbs-unloadable",
                     "ib-gdr-not-ready", "net-socket-ifname", "ib-roce-gid-index",
                     "cluster-nccl-version-mismatch", "ib-hca-select", "gpu-p2p-unsupported"}


def test_metadata_is_complete_and_ids_are_unique():
    ids = [s.id for s in LINE_SIGNATURES + DERIVED_SIGNATURES]
    assert len(ids) == len(set(ids))
    for sig in LINE_SIGNATURES + DERIVED_SIGNATURES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", sig.id), sig.id
        assert sig.id in SHARED_VOCABULARY or sig.id.startswith("log-"), sig.id
        assert sig.severity in ("info", "warning", "error")
        assert sig.title and sig.cause and sig.fix
        assert "https://" in sig.docs or "src/" in sig.docs
    for sig in LINE_SIGNATURES:
        assert sig.patterns and sig.keywords, sig.id
    assert SHARED_VOCABULARY <= set(BY_ID)


def findings_of(*lines: str) -> dict[str, dict]:
    state = LogState()
    for n, line in enumerate(lines, 1):
        state.feed(line, "t.log", n)
    assert state.parse_errors == 0, state.first_parse_error
    return {fid: acc.as_dict() for fid, acc in state.findings.items()}


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
])
def test_signature_matches_its_lines(line, fid):
    assert fid in findings_of(line)


def test_cuda_code_refines_the_cause():
    f = findings_of("h:1:2 [0] transport/shm.cc:1 NCCL WARN Cuda failure 217 'peer access is not "
                    "supported between these two devices'")["log-cuda-error"]
    assert "NCCL_CUMEM_HOST_ENABLE=0" in f["fix"]


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
])
def test_healthy_lines_raise_nothing(line):
    assert findings_of(line) == {}
