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
from conftest import needs_netns, running_alone
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.envformat import parse_env_text

#: The steps are tests in order, sharing one cluster and each step's files. Only the bench step
#: is marked ``alone``: which link measures faster is a timing of the shared CPU; probe,
#: recommend and the verification assert none, and run beside other tests.
pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_netns]
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


@pytest.fixture(scope="module")
def probed(cluster, tmp_path_factory):
    """Step 1, probe over ssh, with an unreachable host added to the hostfile: its folder, the
    finished process, the cluster document's and the facts folder's paths."""
    tmp_path = tmp_path_factory.mktemp("recommend")
    hostfile = tmp_path / "hosts"
    hostfile.write_text(Path(cluster.hostfile).read_text() + f"{cluster.unreachable_addr}\n")
    cluster_json, facts_dir = tmp_path / "cluster.json", tmp_path / "facts"
    out = ncclcheck("probe", "--hostfile", str(hostfile), "--ssh-config", cluster.ssh_config,
                    "--connect-timeout", "2", "--timeout", "30", "-o", str(cluster_json),
                    "--out-dir", str(facts_dir))
    return tmp_path, out, cluster_json, facts_dir


@pytest.fixture(scope="module")
def measured(cluster, probed, tie):
    """Step 3, each candidate measured with bench --compare, then recommend with that run's
    results: (the bench document's path, recommend's process, the env file's path). Its figures
    are timings of the shared CPU: set up only by the test marked alone."""
    assert running_alone(), "bench --compare's figures are timings: set up only in an alone test"
    tmp_path, _, cluster_json, _ = probed
    bench_json = tmp_path / "bench.json"
    out = ncclcheck("bench", "--hostfile", cluster.hostfile, "--ssh-config", cluster.ssh_config,
                    "-b", "1M", "-e", "1M", "-w", "1", "-n", "3", "--timeout", "60",
                    "--compare", *tie["files"], "-o", str(bench_json), timeout=150)
    assert out.returncode == 0, out.stderr[-2000:]
    final = tmp_path / "nccl.env"
    out = ncclcheck("recommend", "--probe", str(cluster_json), "--bench", str(bench_json),
                    "-o", str(final))
    return bench_json, out, final


@pytest.fixture(scope="module")
def recommended(probed):
    """Step 2, recommend from the facts, writing the tie's candidate files: its process."""
    tmp_path, _, cluster_json, _ = probed
    return ncclcheck("recommend", "--probe", str(cluster_json), "--candidates-dir",
                     str(tmp_path / "candidates"), "--format", "json")


@pytest.fixture(scope="module")
def tie(recommended):
    assert recommended.returncode == 0, recommended.stderr
    return json.loads(recommended.stdout)["ties"][0]


def test_probe_lists_the_unreachable_host_and_keeps_the_others(cluster, probed):
    # 1. facts from every node over ssh; the unreachable host is listed, the others kept
    _, out, cluster_json, facts_dir = probed
    assert out.returncode == 1, out.stderr  # a node failed
    doc = json.loads(cluster_json.read_text())
    assert sorted(n["hostname"] for n in doc["nodes"]) == ["node1", "node2"]
    assert [f["host"] for f in doc["failed"]] == [cluster.unreachable_addr]
    assert doc["failed"][0]["reason"]
    assert len(list(facts_dir.glob("*.json"))) == 2
    assert "FAILED" in out.stderr and cluster.unreachable_addr in out.stderr


def test_recommend_lists_both_links_and_names_the_tie(probed, recommended):
    # 2. recommend from the facts: both links qualify, nothing else; the tie is reported
    _, _, cluster_json, _ = probed
    out = recommended
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert names(rec["env"]["NCCL_SOCKET_IFNAME"]) == {"fast0", "slow0"}
    tie = rec["ties"][0]
    assert sorted(tie["candidates"]) == ["=fast0", "=slow0"] and tie["decided_by"] is None
    env_text = ncclcheck("recommend", "--probe", str(cluster_json), "-q").stdout
    assert not names(parse_env_text(env_text)["NCCL_SOCKET_IFNAME"]) & NEVER
    assert "NCCL_SOCKET_IFNAME==fast0,slow0" in env_text


@pytest.mark.alone
def test_bench_compare_decides_the_tie_for_the_fast_link(measured):
    # 3. measure each candidate with bench --compare; recommend keeps the fastest
    _, out, final = measured
    assert out.returncode == 0, out.stderr
    env = parse_env_text(final.read_text())
    assert env["NCCL_SOCKET_IFNAME"] == "=fast0"
    assert "decided by bench" in out.stderr


def test_the_env_file_reads_as_meant_and_verifies_on_a_node(cluster, probed, measured):
    # 4. bash, python-dotenv and NCCL itself (inside node1, where fast0 exists) read it as meant
    _, _, cluster_json, _ = probed
    bench_json, _, final = measured
    tmp_path = final.parent
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
