"""Inside torchrun: bench acts as the ranks it was given and spawns nothing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.torch]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bench_under_torchrun_reports_once_from_rank_0(tmp_path):
    port = free_port()
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(port),
         "-m", "ncclcheck", "bench", "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1",
         "--timeout", "30", "--json", "--nccl-log-dir", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)            # one document: rank 1 printed nothing
    assert doc["launch"] == {"mode": "torchrun", "master_addr": "127.0.0.1", "master_port": port}
    assert (doc["world_size"], doc["backend"], doc["wrong_total"]) == (2, "gloo", 0)
    assert [r["size_bytes"] for r in doc["rows"]] == [1024, 4096, 16384]
    pids = sorted(e["pid"] for e in doc["transport"]["per_rank"])
    assert len(set(pids)) == 2               # the two torchrun workers themselves
    for row in doc["rows"]:
        cell = row["out_of_place"]
        assert cell["busbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 / cell["time_us"])
    assert doc["env"]["NCCL_DEBUG_FILE"] == f"{tmp_path / 'logs'}/nccl.%h.%p"
