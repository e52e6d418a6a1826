"""Launcher prefixes (ncclcheck/logparse/prefix.py), in the shapes public logs show."""

from __future__ import annotations

import pytest

from ncclcheck.logparse.prefix import parse_prefix

NCCL = "host1:1234:1240 [0] NCCL INFO Using network IB"


@pytest.mark.parametrize("line, rank, tag, host, stamped", [
    (f"[rank3]:{NCCL}", 3, None, None, False),
    (f"[rank12]: {NCCL}", 12, None, None, False),
    (f"[1,7]<stdout>:{NCCL}", 7, None, None, False),
    (f"[1,0]<stderr>:{NCCL}", 0, None, None, False),
    (f"Mon Apr  6 14:58:07 2020[1,1]<stdout>:{NCCL}", 1, None, None, False),
    (f"[default0]:{NCCL}", None, "default0", None, False),
    (f"[trainer0|0]:{NCCL}", None, "trainer0", None, False),
    (f"worker-0: {NCCL}", None, None, "worker-0", False),
    (f"10.10.23.10: {NCCL}", None, None, "10.10.23.10", False),
    (f"0: {NCCL}", 0, None, None, False),
    (f"[155] {NCCL}", None, "155", None, False),
    (f"[2025-07-21 19:05:29] {NCCL}", None, None, None, True),
    (f"[2021-01-31 23:07:46,345] {NCCL}", None, None, None, True),
    (f"2024-12-04T05:27:42.076Z {NCCL}", None, None, None, True),
    (f"(RayWorkerWrapper pid=1148) {NCCL}", None, "RayWorkerWrapper", None, False),
    (f"\x1b[0m{NCCL}", None, None, None, False),
    (f"[0m {NCCL}", None, None, None, False),
    (f"\u2502 {NCCL}", None, None, None, False),
    (f"[80746] [rank0]:{NCCL}", 0, "80746", None, False),
])
def test_prefix_shapes_leave_the_nccl_line(line, rank, tag, host, stamped):
    prefix, rest = parse_prefix(line)
    assert rest == NCCL
    assert (prefix.rank, prefix.tag, prefix.host, prefix.stamped) == (rank, tag, host, stamped)


@pytest.mark.parametrize("line", [
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, x",
    "ncclInternalError: Internal check failed.",
    "Traceback (most recent call last):",
    "NCCL version 2.18.3+cuda12.2",
    "[3] NCCL INFO 2 coll channels",       # the device field of a header-less NCCL line
    "",
])
def test_text_that_is_not_a_prefix_is_kept(line):
    prefix, rest = parse_prefix(line)
    if line.startswith("[3]"):
        assert rest == "NCCL INFO 2 coll channels"
    else:
        assert rest == line and prefix.rank is None and prefix.host is None


def test_srun_label_on_a_traceback_is_a_rank():
    prefix, rest = parse_prefix("3: Traceback (most recent call last):")
    assert prefix.rank == 3 and rest.startswith("Traceback")


def test_a_known_host_label_counts_before_plain_text_too():
    line = "worker-1: Traceback (most recent call last):"
    assert parse_prefix(line)[0].host is None                     # unknown: stays text
    prefix, rest = parse_prefix(line, hosts={"worker-1"})
    assert prefix.host == "worker-1" and rest == "Traceback (most recent call last):"
    assert parse_prefix("RuntimeError: x", hosts={"worker-1"})[0].host is None
