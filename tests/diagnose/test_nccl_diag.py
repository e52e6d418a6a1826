"""diagnose reads NCCL's own diagnostics (``NCCL DIAG`` lines, NCCL >= 2.31): what each means.

The lines are the formats of the nvidia-nccl-cu12 2.32.3 library (``strings libnccl.so.2``), with
host, pid, values and comm ids filled in.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from diagfix import findings_of

H = "gpu-node-07:41263 NCCL DIAG "


@pytest.mark.parametrize("text, fid, severity", [
    ("[INFO] p2p: only 54/56 GPU-to-GPU peer accesses passed verification", "log-nccl-diag-p2p",
     "error"),
    ("[INFO] p2p: write mismatch rank=3->5 expected=0x00000000deadbeef got=0x0000000000000000 "
     "verify=0x0000000000000000; check P2P", "log-nccl-diag-p2p", "error"),
    ("[INFO] p2p: peer-memory import failed rank=1->2 reason=cudaErrorInvalidValue; check IPC",
     "log-nccl-diag-p2p", "warning"),
    ("[INFO] net bw: IB rank 11 (gpu-node-09): 212.4 Gbit/s, >30% off median 391.0 Gbit/s in "
     "comm 0x5581a2c0", "log-nccl-diag-net-bw", "warning"),
    ("[INFO] net bw: IB: 3 more ranks >30% off median in comm 0x5581a2c0", "log-nccl-diag-net-bw",
     "warning"),
    ("[INFO] ECC: uncorrected volatile errors on rank(s) 5 (worst=2) across 16 ranks in comm "
     "0x5581a2c0", "log-nccl-diag-gpu-health", "error"),
    ("[INFO] NVLink: inactive link(s) on rank(s) 2 across 16 ranks in comm 0x5581a2c0",
     "log-nccl-diag-gpu-health", "error"),
    ("[INFO] Xid 79 detected on GPU 0000:1b:00.0 at 2026-11-26 10:01:02 on host gpu-node-07. The "
     "NVIDIA Xid catalog recommends resetting the affected GPU. Follow the documented GPU-reset "
     "capabilities and limitations: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-"
     "catalog.html", "log-nccl-diag-gpu-health", "error"),
    ("[INFO] NCCL environment: 1 NCCL_* env var(s) differ across ranks in comm 0x5581a2c0",
     "log-nccl-diag-mismatch", "warning"),
    ("[INFO] NCCL environment: NCCL_IB_HCA=mlx5_0 on rank(s) 8-15", "log-nccl-diag-mismatch",
     "warning"),
    ("[INFO] CUDA driver version: mismatch across 16 ranks in comm 0x5581a2c0, rank(s) 8-15 "
     "differ from rank 0 (12090)", "log-nccl-diag-mismatch", "warning"),
    ("[INFO] IOMMU mode: enabled (DMA remapping) for 8 relevant device(s) across 2/2 ranks in "
     "comm 0x5581a2c0", "log-nccl-diag-mismatch", "warning"),
    # passed checks and partial runs: one info finding
    ("[OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer "
     "accesses)", "log-nccl-diag", "info"),
    ("[OK] net bw: 388.2/391.0/392.5 Gbit/s min/median/max IB bw (across 16 ranks) in comm "
     "0x5581a2c0", "log-nccl-diag", "info"),
    ("[OK]   ECC: no uncorrected volatile errors across 16 ranks in comm 0x5581a2c0",
     "log-nccl-diag", "info"),
    ("[OK]   NVLink: 18 links per GPU, all active at consistent speed across 16 ranks in comm "
     "0x5581a2c0", "log-nccl-diag", "info"),
    ("[INFO] net bw: required external tool missing in comm 0x5581a2c0", "log-nccl-diag", "info"),
    ("INFO RAS diagnostics skipped: NCCL_RAS_ENABLE=0", "log-nccl-diag", "info"),
])
def test_each_diag_line_says_what_it_means(text, fid, severity):
    found = findings_of(H + text)
    assert list(found) == [fid]
    assert found[fid]["severity"] == severity
    assert found[fid]["message"].startswith("NCCL DIAG ")


@pytest.mark.parametrize("text", [
    "=== NCCL Diagnostics ===", "=== RAS Diagnostics ===",
    "NCCL diagnostics completed in 812.4 ms across 16 ranks",
    "[OK] net bw: skipped (single host or no network transport)",
    "[INFO] p2p: temporarily enabled context-wide CUDA peer access rank=0 cudaDev=0; avoid "
    "concurrent CUDA use on this context until diagnostics completes",
])
def test_banners_raise_nothing(text):
    assert findings_of(H + text) == {}


def test_the_rank_named_by_the_bandwidth_check_is_the_culprit():
    found = findings_of(H + "[INFO] net bw: IB rank 11 (gpu-node-09): 212.4 Gbit/s, >30% off "
                            "median 391.0 Gbit/s in comm 0x5581a2c0")
    assert found["log-nccl-diag-net-bw"]["ranks"] == [11]


def test_diagnose_command_reports_them(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("\n".join([
        "gpu-node-07:41263:41263 [0] NCCL INFO NCCL version 2.32.3+cuda12.9",
        H + "=== NCCL Diagnostics ===",
        H + "[INFO] p2p: only 54/56 GPU-to-GPU peer accesses passed verification",
        H + "[OK] net bw: 388.2/391.0/392.5 Gbit/s min/median/max IB bw (across 16 ranks) in comm "
            "0x5581a2c0",
    ]) + "\n")
    result = subprocess.run([sys.executable, "-m", "ncclcheck", "diagnose", str(log), "--json"],
                            capture_output=True, text=True, timeout=120)
    ids = {f["id"]: f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert ids == {"log-nccl-diag-p2p": "error", "log-nccl-diag": "info"}
