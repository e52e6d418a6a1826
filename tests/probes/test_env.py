"""The env section copies allow-listed variables only, and never a password inside one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ncclcheck.host.live import LiveHost
from ncclcheck.probes.env import collect

SECRET = "hunter2-s3cr3t"
ENV = {"MASTER_ADDR": f"tcp://trainer:{SECRET}@10.0.0.1:29500",
       "NCCL_COMM_ID": f"ops:{SECRET}@10.0.0.1:1234", "NCCL_IB_HCA": "=mlx5_0:1",
       "AWS_SECRET_ACCESS_KEY": SECRET}


def test_collect_keeps_the_host_and_hides_the_secret():
    data = collect(LiveHost(env=ENV), [])
    assert data["other"] == {"MASTER_ADDR": "tcp://trainer:***@10.0.0.1:29500"}
    assert data["nccl"] == {"NCCL_COMM_ID": "ops:***@10.0.0.1:1234", "NCCL_IB_HCA": "=mlx5_0:1"}


def test_no_output_holds_the_secret(tmp_path):
    """The probe's JSON (host and env sections copy MASTER_ADDR) and a recording of this node."""
    env = {**os.environ, **ENV}
    probe = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--json"], env=env,
                           capture_output=True, text=True, timeout=120)
    facts = json.loads(probe.stdout)
    assert facts["sections"]["host"]["data"]["launcher"]["master_addr"] == (
        "tcp://trainer:***@10.0.0.1:29500")
    assert SECRET not in probe.stdout + probe.stderr
    out = tmp_path / "rec"
    record = subprocess.run([sys.executable, "-m", "ncclcheck", "record", str(out), "--no-scrub"],
                            env=env, capture_output=True, text=True, timeout=180)
    assert record.returncode == 0, record.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and not [p for p in files if SECRET in p.read_text(errors="replace")]
