"""``--verify`` against the real libnccl from the nvidia-nccl-cu12 wheel (no GPU needed)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from ncclcheck.recommend.verify import find_libnccl, verify

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


def _this_machine_as(tmp_path, *names):
    """This machine's facts under other host names: the rules' env fits here, so verify passes
    here, on a machine that is none of the nodes."""
    import json

    facts = json.loads(subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--json"],
                                      capture_output=True, text=True, timeout=120).stdout)
    paths = []
    for name in names:
        facts["hostname"] = name
        facts["sections"]["host"]["data"]["hostname"] = name
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(facts))
        paths.append(str(path))
    return paths


def test_verify_that_passes_off_the_nodes_still_says_so(tmp_path):
    """Issue 27 item 5: the warning is said when verify passes, not only when it fails."""
    paths = _this_machine_as(tmp_path, "gpu-node-01", "gpu-node-02")
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe", *paths,
                          "--verify"], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "NCCL read every variable and bootstraps on" in out.stderr, out.stderr
    assert (f"warning: this machine ({socket.gethostname()}) is not one of the nodes "
            "(gpu-node-01, gpu-node-02)") in out.stderr, out.stderr


def test_ib_settings_verified_on_a_machine_without_rdma_are_said_unused(tmp_path):
    import os

    from ncclcheck.recommend.command import verify_document

    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        pytest.skip("this machine has RDMA devices")
    facts = {"hostname": socket.gethostname(),
             "sections": {"ib": {"status": "unavailable", "data": None}}}
    doc = {"hosts": [socket.gethostname()],
           "env": {"NCCL_SOCKET_IFNAME": "=lo", "NCCL_IB_HCA": "=mlx5_0", "NCCL_IB_TIMEOUT": "22"},
           "reasons": {}}
    result = verify_document(doc, LIB, facts)
    assert result["ok"], result["problems"]               # NCCL read them: the check passes
    assert result["warnings"] == [
        "this machine has no RDMA device: NCCL read NCCL_IB_HCA, NCCL_IB_TIMEOUT but the check "
        "could not use them (ncclGetUniqueId bootstraps over sockets only); run --verify on a "
        "node with the HCAs, or bench there"]
    off = verify_document(doc, LIB, None)                  # and off the nodes: both said
    assert off["ok"] and len(off["warnings"]) == 2 and "not one of the nodes" in off["warnings"][0]
