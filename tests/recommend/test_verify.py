"""``--verify`` against the real libnccl from the nvidia-nccl-cu12 wheel (no GPU needed)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from ncclcheck.verify import find_libnccl, verify

LIB = find_libnccl()
pytestmark = pytest.mark.skipif(LIB is None, reason="needs libnccl (pip install nvidia-nccl-cu12)")


def write(tmp_path, text):
    path = tmp_path / "nccl.env"
    path.write_text(text)
    return str(path)


def test_bootstraps_on_the_recommended_interface(tmp_path):
    result = verify(write(tmp_path, "# comment\nNCCL_SOCKET_IFNAME==lo\nNCCL_IB_DISABLE=1\n"), LIB)
    assert result["ok"], result["problems"]
    assert result["method"] == "NCCL_CONF_FILE"
    assert result["bootstrap"] == {"interface": "lo", "address": "127.0.0.1"}
    assert result["unique_id_address"]["address"] == "127.0.0.1"
    assert result["environ"] == {"NCCL_SOCKET_IFNAME": "=lo", "NCCL_IB_DISABLE": "1"}


def test_an_interface_missing_here_fails_with_nccls_reason(tmp_path):
    result = verify(write(tmp_path, "NCCL_SOCKET_IFNAME==nosuch0\n"), LIB)
    assert not result["ok"]
    assert any("ncclGetUniqueId failed" in p for p in result["problems"])


def test_the_callers_environment_does_not_leak_in(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=nosuch0")  # would win over the file in NCCL
    result = verify(write(tmp_path, "NCCL_SOCKET_IFNAME==lo\n"), LIB)
    assert result["ok"], result["problems"]


def test_no_library_is_a_clear_problem(tmp_path):
    result = verify(write(tmp_path, "NCCL_NET=Socket\n"), None)
    assert not result["ok"] and "no libnccl" in result["problems"][0]


def test_recommend_verify_on_this_node():
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--verify"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "bootstraps on" in " ".join(out.stderr.split()), out.stderr[-2000:]
    assert socket.gethostname() in out.stdout
