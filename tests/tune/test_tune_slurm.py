"""``ncclcheck tune`` inside a real Slurm allocation (slurmctld + a slurmd per netns node): the
nodes come from srun, the runs go through srun, and the env file is verified on a node through
srun (salloc's shell runs off the nodes). One 400 Mbit/s link: nothing beats NCCL's defaults,
so the rules' env is kept and said to be no significant difference."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, slurm_cluster  # noqa: F401  (module-scoped fixtures)

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]
BIN = str(Path(sys.executable).parent / "ncclcheck")


def test_salloc_tune_keeps_the_rules_env_when_nothing_is_faster(slurm_cluster, tmp_path):
    import subprocess

    c, env = slurm_cluster
    started = time.monotonic()
    out = subprocess.run(["salloc", "-N2", BIN, "tune", "--repeats", "2", "--budget", "150s",
                          "-o", str(tmp_path / "nccl.env"), "--json"], env=env,
                         capture_output=True, text=True, timeout=240, check=False)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert took < 150 + 20
    doc = json.loads(out.stdout)
    assert doc["hosts"] == ["node1", "node2"]
    measured = [c for c in doc["candidates"] if c["figures"]]
    assert measured and all(r["error"] is None for c in measured for r in c["runs"])
    assert doc["winner"]["significant"] is False
    assert doc["winner"]["why"].startswith("no significant difference")
    assert doc["verify"]["ok"], doc["verify"]
    assert doc["verify"]["where"] in ("node1", "node2")
    assert (tmp_path / "nccl.env").exists()
