"""The report says what the CLI said (issue 27 item 7): real documents from real runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

BIN = [sys.executable, "-m", "ncclcheck"]


def run(*args, **kw):
    return subprocess.run([*BIN, *args], capture_output=True, text=True, timeout=180, **kw)


@pytest.mark.torch
def test_a_gloo_bench_is_reported_as_bench_printed_it(tmp_path):
    pytest.importorskip("torch")
    out = run("bench", "--procs", "2", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1",
              "--timeout", "60", "-o", str(tmp_path / "bench.json"))
    assert out.returncode == 0, out.stderr
    said = next(ln for ln in out.stdout.splitlines() if ln.startswith("# Transport"))
    assert "NCCL not used" in said
    md = run("report", str(tmp_path / "bench.json"), "--format", "md").stdout
    assert said.split(":", 1)[1].strip() in md, md
    assert "not reported" not in md


@pytest.mark.netns
@needs_netns
def test_mtu_outlier_and_cluster_findings_reach_the_report(make_cluster, tmp_path):
    c = make_cluster(3, fresh=True)
    c.exec(c.nodes[2], ["ip", "link", "set", "eth0", "mtu", "1200"])
    out = run("probe", "--hostfile", c.hostfile, "--ssh-config", c.ssh_config,
              "-o", str(tmp_path / "cluster.json"), env={**os.environ, "COLUMNS": "200"})
    assert out.returncode in (0, 3), out.stderr
    assert "eth0=1200" in out.stdout + out.stderr            # the CLI names the outlier
    rec = run("recommend", "--probe", str(tmp_path / "cluster.json"), "--format", "json")
    cluster_rules = {f["rule"] for f in json.loads(rec.stdout)["findings"]
                     if not f.get("env") and len(f.get("hosts") or []) >= 1
                     and f["rule"].startswith("cluster-")}
    assert "cluster-mtu-mismatch" in cluster_rules, rec.stdout
    md = run("report", str(tmp_path / "cluster.json"), "--format", "md").stdout
    assert "cluster-mtu-mismatch" in md, md
    assert "0 of 0 up" not in md and "**1200** (differs)" in md, md
