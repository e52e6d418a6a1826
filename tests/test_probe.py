"""`probe` assembles sections; a failing section is data, never a crash; secrets never leak."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ncclcheck import probe
from ncclcheck.errors import BadInput
from ncclcheck.host import LiveHost, Unavailable


def test_failing_section_does_not_stop_the_others(monkeypatch):
    from ncclcheck import probes

    def broken(host, errors):
        raise KeyError("boom")

    def absent(host, errors):
        raise Unavailable("no such subsystem")

    monkeypatch.setitem(probes.PROBES, "gpu", broken)
    monkeypatch.setitem(probes.PROBES, "ib", absent)
    doc = probe.collect_facts(LiveHost())
    gpu, ib, limits = (doc["sections"][n] for n in ("gpu", "ib", "limits"))
    assert gpu["status"] == "error" and gpu["errors"] == ["KeyError: 'boom'"]
    assert ib["status"] == "unavailable" and ib["errors"] == ["no such subsystem"]
    assert limits["status"] == "ok" and limits["data"]["memlock"]
    for sec in doc["sections"].values():
        assert set(sec) == {"status", "duration_s", "sources", "errors", "data"}


def test_only_validates_names():
    assert probe.select(["ib", "host"]) == ["host", "ib"]
    with pytest.raises(BadInput, match="unknown section gpux"):
        probe.select(["gpux"])


def test_planted_secret_never_appears(tmp_path):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="=eth0", MY_API_TOKEN="planted-s3cret-value",
               AWS_SECRET_ACCESS_KEY="planted-s3cret-value", TORCH_NCCL_BLOCKING_WAIT="1")
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--json"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "planted-s3cret-value" not in out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["sections"]["env"]["data"]["nccl"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    tables = subprocess.run([sys.executable, "-m", "ncclcheck", "probe"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert "planted-s3cret-value" not in tables.stdout + tables.stderr
    rec = tmp_path / "rec"
    subprocess.run([sys.executable, "-m", "ncclcheck", "record", str(rec)], env=env,
                   capture_output=True, text=True, timeout=60, check=True)
    for path in rec.rglob("*"):
        if path.is_file():
            assert "planted-s3cret-value" not in path.read_text(errors="replace"), path
