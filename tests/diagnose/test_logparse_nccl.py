"""NCCL line headers (ncclcheck/logparse/nccl.py)."""

from __future__ import annotations

import pytest

from ncclcheck.logparse.nccl import parse_nccl_line


@pytest.mark.parametrize("line, level, host, pid, dev, src, msg", [
    ("gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client "
     "reregistration", "WARN", "gpu1", 5021, 0, "transport/net_ib.cc:93",
     "NET/IB : Got async event : client reregistration"),
    ("kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN x", "WARN", "kp-ddp-worker-0",
     3468, 4, "ib_plugin.c:1615", "x"),
    ("<cluster_name>:924:924 [5] NCCL INFO cudaDriverVersion 12010", "INFO", "<cluster_name>", 924,
     5, None, "cudaDriverVersion 12010"),
    ("NCCL INFO NET/IB : No device found.", "INFO", None, None, None, None, "NET/IB : No device found."),
    ("misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed", "WARN", None, None, None,
     "misc/ibvwrap.cc:212", "Call to ibv_open_device failed"),
    ("host:1:2 [0] NCCL TRACE x", "TRACE", "host", 1, 0, None, "x"),
    ("10.10.1.1:7:8 [1] NCCL INFO y", "INFO", "10.10.1.1", 7, 1, None, "y"),
])
def test_headers(line, level, host, pid, dev, src, msg):
    nl = parse_nccl_line(line)
    assert nl is not None
    assert (nl.level, nl.host, nl.pid, nl.dev, nl.src, nl.msg) == (level, host, pid, dev, src, msg)


@pytest.mark.parametrize("line", [
    "[E626 06:24:44.903 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective",
    "NCCL version 2.18.3+cuda12.2",
    "Test NCCL failure common.cu:958 'internal error'",
    "WorkNCCL(SeqNum=808, OpType=ALLREDUCE)",
    "NCCL INFORMATION",
    "",
])
def test_not_nccl_lines(line):
    assert parse_nccl_line(line) is None
