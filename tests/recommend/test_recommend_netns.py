"""End to end on a 2-node network-namespace cluster: probe over ssh, recommend, bench, verify.

Each node has a fast link (1 Gbit/s) and a slow link (100 Mbit/s) on two shared subnets, a
management interface on a subnet of its own, and a docker0 bridge with the same address on both
nodes. Both links are veths that report the same speed, so the facts alone cannot tell them
apart: recommend lists both and names the bench run that decides; with that run's results it
keeps the measured-fastest link. It never names the bridge, the management interface or lo.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.envformat import parse_env_text

pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, needs_netns]
REPO = Path(__file__).resolve().parent.parent.parent
NEVER = {"docker0", "mgmt0", "lo"}


def ncclcheck(*args, cwd=REPO, timeout=120):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, check=False)


def names(value):
    assert value.startswith("=")
    return set(value[1:].split(","))


@pytest.fixture(scope="module")
def cluster(make_cluster):  # noqa: F811
    return make_cluster(2, links="fast0:auto:1gbit,slow0:auto:100mbit", mgmt=True,
                        fake_docker0=True)


def test_probe_recommend_bench_verify(cluster, tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(Path(cluster.hostfile).read_text() + f"{cluster.unreachable_addr}\n")
    cluster_json, facts_dir = tmp_path / "cluster.json", tmp_path / "facts"

    # 1. facts from every node over ssh; the unreachable host is listed, the others kept
    out = ncclcheck("probe", "--hostfile", str(hostfile), "--ssh-config", cluster.ssh_config,
                    "--connect-timeout", "2", "--timeout", "30", "-o", str(cluster_json),
                    "--out-dir", str(facts_dir))
    assert out.returncode == 1, out.stderr  # a node failed
    doc = json.loads(cluster_json.read_text())
    assert sorted(n["hostname"] for n in doc["nodes"]) == ["node1", "node2"]
    assert [f["host"] for f in doc["failed"]] == [cluster.unreachable_addr]
    assert doc["failed"][0]["reason"]
    assert len(list(facts_dir.glob("*.json"))) == 2
    assert "FAILED" in out.stderr and cluster.unreachable_addr in out.stderr

    # 2. recommend from the facts: both links qualify, nothing else; the tie is reported
    cands = tmp_path / "candidates"
    out = ncclcheck("recommend", "--probe", str(cluster_json), "--candidates-dir", str(cands),
                    "--format", "json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert names(rec["env"]["NCCL_SOCKET_IFNAME"]) == {"fast0", "slow0"}
    tie = rec["ties"][0]
    assert sorted(tie["candidates"]) == ["=fast0", "=slow0"] and tie["decided_by"] is None
    env_text = ncclcheck("recommend", "--probe", str(cluster_json), "-q").stdout
    assert not names(parse_env_text(env_text)["NCCL_SOCKET_IFNAME"]) & NEVER
    assert "NCCL_SOCKET_IFNAME==fast0,slow0" in env_text

    # 3. measure each candidate with bench --compare; recommend keeps the fastest
    bench_json = tmp_path / "bench.json"
    out = ncclcheck("bench", "--hostfile", cluster.hostfile, "--ssh-config", cluster.ssh_config,
                    "-b", "1M", "-e", "1M", "-w", "1", "-n", "3", "--timeout", "60",
                    "--compare", *tie["files"], "-o", str(bench_json), timeout=150)
    assert out.returncode == 0, out.stderr[-2000:]
    final = tmp_path / "nccl.env"
    out = ncclcheck("recommend", "--probe", str(cluster_json), "--bench", str(bench_json),
                    "-o", str(final))
    assert out.returncode == 0, out.stderr
    env = parse_env_text(final.read_text())
    assert env["NCCL_SOCKET_IFNAME"] == "=fast0"
    assert "decided by bench" in out.stderr

    # 4. bash, python-dotenv and NCCL itself (inside node1, where fast0 exists) read it as meant
    bash = subprocess.run(["bash", "-c", 'set -a; . "$1"; printf %s "$NCCL_SOCKET_IFNAME"',
                           "bash", str(final)], capture_output=True, text=True, timeout=30, check=False)
    assert bash.stdout == "=fast0"
    verify = cluster.exec("node1", [sys.executable, "-m", "ncclcheck", "recommend", "--probe",
                                    str(cluster_json), "--bench", str(bench_json), "--verify",
                                    "-o", str(tmp_path / "verified.env")], timeout=90, cwd=REPO)
    assert verify.returncode == 0, verify.stderr[-2000:]
    said = " ".join(verify.stderr.split())  # wherever a wrap falls
    assert "bootstraps on" in said and "fast0" in said
    dotenv = pytest.importorskip("dotenv")
    assert dotenv.dotenv_values(final)["NCCL_SOCKET_IFNAME"] == "=fast0"
