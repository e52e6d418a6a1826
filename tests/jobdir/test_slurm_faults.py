"""A gloo job under Slurm across two namespace nodes (srun starts the ranks, 2 per node), with a
rank on the second node killed by SIGKILL: ``diagnose`` names that rank, dead, and its node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, slurm_cluster  # noqa: F401  (module-scoped fixtures)

pytest.importorskip("torch")
pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

JOB = Path(__file__).with_name("fault_job.py")
NCCLCHECK = str(Path(sys.executable).parent / "ncclcheck")


def test_a_killed_rank_on_the_second_node_is_named_with_its_host(slurm_cluster, tmp_path):
    c, env = slurm_cluster
    job_env = {**env, "FAULT": "sigkill", "FAULT_RANK": "3", "COLL_TIMEOUT": "4",
               "MASTER_ADDR": c.nodes[0].addr, "MASTER_PORT": "29533", "OMP_NUM_THREADS": "1",
               "GLOO_SOCKET_IFNAME": "eth0",
               "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")}
    with open(tmp_path / "slurm.out", "wb") as log:
        subprocess.run(["srun", "-N2", "-n4", "--ntasks-per-node=2", "-l", sys.executable,
                        str(JOB)], env=job_env, stdout=log, stderr=subprocess.STDOUT,
                       timeout=240, check=False)
    out = subprocess.run([NCCLCHECK, "diagnose", str(tmp_path), "--json"], capture_output=True,
                         text=True, timeout=60)
    doc = json.loads(out.stdout)
    log = (tmp_path / "slurm.out").read_text(errors="replace")[-3000:]
    assert [(x["rank"], x["kind"], x["host"]) for x in doc["culprits"]] == \
        [(3, "dead", "node2")], log
    assert doc["culprits"][0]["exit"]["signal"] == "SIGKILL"
