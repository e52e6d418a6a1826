"""What NCCL used, read from real NCCL_DEBUG=INFO output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.bench.environ import nccl_debug_env
from ncclcheck.bench.transport import network_of, parse_nccl_log, summarize

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"


def summary_of(name: str) -> dict:
    return summarize(parse_nccl_log((FIXTURES / name).read_text()))


def test_ib_with_oob_interface_on_two_nodes():
    s = summary_of("nccl-debug/nccl-tests-36-ib-mlx4-2.5.6.txt")
    assert s["network"] == "IB"
    assert s["hcas"] == ["mlx4_0:1/IB"]
    assert s["interfaces"] == ["eth0"]
    assert s["nccl_versions"] == ["2.5.6"]
    assert [(r["host"], r["pid"]) for r in s["per_rank"]] == \
        [("pkb-aa8dbd1b-0", 9100), ("pkb-aa8dbd1b-1", 9482)]


def test_socket_network_with_its_interfaces_and_warnings():
    s = summary_of("nccl-debug/nccl-428-socket-em1-2.8.3.txt")
    assert (s["network"], s["interfaces"], s["hcas"], s["gdr"]) == \
        ("Socket", ["em1", "tunl0"], [], None)
    assert s["warnings"] == ["misc/ibvwrap.cc:63 Failed to open libibverbs.so[.1]"]
    lo = summary_of("nccl-debug/nccl-tests-217-socket-lo-2.21.5.txt")
    assert (lo["network"], lo["interfaces"], lo["nccl_versions"]) == ("Socket", ["lo"], ["2.21.5"])
    assert "Connection closed by remote peer" in lo["warnings"][0]
    assert len(lo["per_rank"]) == 1  # "NAME :70918" and "NAME:70918" are one process


def test_gdr_from_channel_paths_behind_a_launcher_label():
    s = summary_of("nccl-debug/nccl-1453-ibext-gdrdma-srun-label.txt")
    assert (s["network"], s["gdr"]) == ("IBext_v8", True)
    assert s["per_rank"][0]["host"] == "h100clust-worker-1"


def test_plugin_network_under_mpi_tags():
    s = summary_of("eks-efa-t4-2node-mpi-tagged.txt")
    assert s["network"] == "AWS Libfabric"
    assert s["gdr"] is False                       # via NET/AWS Libfabric/0, no /GDRDMA
    assert s["nccl_versions"] == ["2.12.7"]        # a bare line, printed once for the job
    ranks = {r["rank"]: r for r in s["per_rank"]}
    assert sorted(ranks) == [0, 1]
    assert ranks[1]["host"] == "test-nccl-efa-worker-1" and ranks[1]["provider"] == "efa"
    assert ranks[0]["paths"] == ["NET/AWS Libfabric"]   # the transport of "via NET/AWS Libfabric/0"
    assert ranks[0]["env"] == {"NCCL_SHM_DISABLE": "0"}


def test_mixed_networks_are_reported_as_mixed():
    a = parse_nccl_log("h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:1.2.3.4<0>")
    b = parse_nccl_log("h2:2:2 [0] NCCL INFO Using network Socket")
    s = summarize(a + b)
    assert s["network"] == "mixed: IB, Socket"
    assert s["hcas"] == ["mlx5_0:1/RoCE"]
    assert network_of({"network": None, "paths": [], "hcas": [], "interfaces": []}) is None


def test_nothing_logged_is_nothing_known():
    s = summarize(parse_nccl_log("no NCCL here\n"))
    assert (s["network"], s["gdr"], s["per_rank"]) == (None, None, [])


def test_real_libnccl_logs_to_the_per_process_file_we_read(tmp_path):
    """The nvidia-nccl-cu12 wheel's libnccl, with bench's NCCL_DEBUG variables (no GPU needed)."""
    nccl = pytest.importorskip("nvidia.nccl")

    code = f"""
import ctypes, glob, json, os, pathlib
lib = glob.glob(str(pathlib.Path({list(nccl.__path__)[0]!r}) / "lib" / "libnccl.so*"))[0]
nccl = ctypes.CDLL(lib)
assert nccl.ncclGetUniqueId(ctypes.create_string_buffer(128)) == 0
print(json.dumps({{"pid": os.getpid()}}))
"""
    env = {"PATH": "/usr/bin:/bin", "NCCL_SOCKET_IFNAME": "lo",
           **nccl_debug_env({}, str(tmp_path))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    pid = json.loads(out.stdout)["pid"]
    logs = list(tmp_path.glob(f"nccl.*.{pid}"))
    assert len(logs) == 1
    entries = parse_nccl_log(logs[0].read_text())
    assert [(e["pid"], e["bootstrap_interface"]) for e in entries] == [(pid, "lo")]
