"""Acceptance of ``ncclcheck tune`` on a 2-node network-namespace cluster.

eno1 at 200 Mbit/s (the hostfile's network), ens1f0 at 400 Mbit/s and ens2f0 at 100 Mbit/s,
all three shared by both nodes; traps: mgmt0 on a subnet of each node's own, and a docker0
with the same address on both. The veths all report one speed, so the facts cannot separate
the links: only measurement can. ``tune`` must pick ens1f0 alone, hold the figures of all
three links, and never measure the traps (their byte counters stay still).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.envformat import parse_env_text

pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, needs_netns]
REPO = Path(__file__).resolve().parent.parent.parent
LINKS = {"eno1": 200, "ens1f0": 400, "ens2f0": 100}
TRAPS = ("mgmt0", "docker0")


@pytest.fixture(scope="module")
def cluster(make_cluster):  # noqa: F811
    return make_cluster(2, links="eno1:auto:200mbit,ens1f0:auto:400mbit,ens2f0:auto:100mbit",
                        mgmt=True, fake_docker0=True)


def tune(cluster, *args, timeout=330):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "tune", "--hostfile",
                           cluster.hostfile, "--ssh-config", cluster.ssh_config, *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)


def trap_bytes(cluster):
    out = {}
    for node in ("node1", "node2"):
        for dev in TRAPS:
            got = cluster.exec(node, ["cat", f"/sys/class/net/{dev}/statistics/tx_bytes",
                                      f"/sys/class/net/{dev}/statistics/rx_bytes"], timeout=10)
            out[(node, dev)] = sum(int(x) for x in got.stdout.split())
    return out


def test_tune_picks_the_fastest_link_alone_and_never_measures_the_traps(cluster, tmp_path):
    before = trap_bytes(cluster)
    started = time.monotonic()
    out = tune(cluster, "-o", str(tmp_path / "nccl.env"), "--json")
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert elapsed < 300, f"tune took {elapsed:.0f} s"

    # 1. the env file names ens1f0 alone, exactly (eno1 is not a prefix of it, but '=' is exact)
    env = parse_env_text((tmp_path / "nccl.env").read_text())
    assert env["NCCL_SOCKET_IFNAME"] == "=ens1f0"

    # 2. the tune document holds the measured figures of all three shared links
    doc = json.loads(out.stdout)
    assert doc["schema"] == "ncclcheck/tune" and doc["backend"] == "gloo"
    medians = {}
    for link in LINKS:
        [cand] = [c for c in doc["candidates"]
                  if c["stage"] == 1 and c["env"].get("NCCL_SOCKET_IFNAME") == f"={link}"]
        assert len(cand["figures"]) >= 2 and cand["spread"]["min_gbps"] > 0, cand
        assert {tuple(r["interfaces"]) for r in cand["runs"]} == {(link,)}
        medians[link] = cand["spread"]["median_gbps"]
    assert medians["ens1f0"] > medians["eno1"] > medians["ens2f0"]
    assert doc["winner"]["significant"] and doc["winner"]["env"]["NCCL_SOCKET_IFNAME"] == "=ens1f0"
    assert doc["verify"]["ok"] and doc["verify"]["bootstrap"]["interface"] == "ens1f0"
    # gloo does not read the socket thread variables: listed, never measured
    threads = [c for c in doc["candidates"] if "NCCL_SOCKET_NTHREADS" in c["env"]]
    assert threads and all(not c["measure"] and not c["runs"] for c in threads)
    # repeats ran in differing orders
    stage1 = [r["order"] for r in doc["rounds"] if r["stage"] == 1]
    assert len(stage1) >= 2 and stage1[0] != stage1[1]

    # 3. never the traps: no candidate names one, no run used one, their counters stayed still
    for cand in doc["candidates"]:
        assert not any(t in json.dumps(cand["env"]) for t in TRAPS), cand["id"]
        for run in cand["runs"]:
            assert not set(run.get("interfaces") or []) & set(TRAPS)
    after = trap_bytes(cluster)
    moved = {k: after[k] - before[k] for k in before}
    assert all(v < 64 * 1024 for v in moved.values()), moved  # ARP/IPv6 chatter at most
    from ncclcheck.validate import validate

    validate(doc, "tune.json")


def test_budget_is_kept(cluster, tmp_path):
    started = time.monotonic()
    # 20 s: a few runs fit (probe, then runs of 1.5-5 s each on one session's agents), the 8
    # runs of the whole plan (the acceptance test's: about 25 s here) do not
    out = tune(cluster, "--budget", "20s", "--doc", str(tmp_path / "tune.json"),
               "-o", str(tmp_path / "nccl.env"), timeout=120)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert elapsed < 20 + 10, f"--budget 20s took {elapsed:.0f} s"
    doc = json.loads((tmp_path / "tune.json").read_text())
    assert doc["budget"]["stopped"] and "budget" in doc["budget"]["stopped"]
    runs = sum(len(c["runs"]) for c in doc["candidates"])
    assert 1 <= runs < 15  # measured what fitted, not everything
    own = sum(not r.get("same_run_as") for c in doc["candidates"] for r in c["runs"])
    assert 1 <= own < 8
    assert "budget" in out.stderr
