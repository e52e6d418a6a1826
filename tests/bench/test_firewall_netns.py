"""``bench`` behind a real firewall (iptables in a namespace node): the error names the firewall
on that node as the likely cause, points to ``ncclcheck probe`` there, and says that a gloo run
over one-way connections does not prove NCCL's both-way rings -- not "pass a free
--master-port" (the port was free). Issue 27, item 10.

Two rule sets on node1, where rank 0 hosts the rendezvous: ``-s 198.18.0.0/16 -p tcp -j DROP``
under policy ACCEPT (it drops rank 0's own connection to its store, over lo, too), and a
RHEL/CentOS-style chain (lo, established and ssh accepted, then ``REJECT --reject-with
icmp-host-prohibited``), where rank 0 is fine and node2 cannot reach it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.torch, needs_netns]

DROP = [["-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"],
        ["-A", "INPUT", "-s", "198.18.0.0/16", "-p", "tcp", "-j", "DROP"]]
RHEL = [["-A", "INPUT", "-m", "state", "--state", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        ["-A", "INPUT", "-p", "icmp", "-j", "ACCEPT"],
        ["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"],
        ["-A", "INPUT", "-p", "tcp", "-m", "state", "--state", "NEW", "--dport", "22",
         "-j", "ACCEPT"],
        ["-A", "INPUT", "-j", "REJECT", "--reject-with", "icmp-host-prohibited"]]


def iptables(c, node, *args):
    subprocess.run(["ip", "netns", "exec", c.node(node).ns, "iptables", *args], check=True,
                   capture_output=True)


@pytest.mark.parametrize("rules,first", [(DROP, "rank 0 on node1"), (RHEL, "rank 1 on node2")],
                         ids=["drop-own-subnet", "rhel-reject"])
def test_bench_behind_a_firewall_names_it(make_cluster, tmp_path, rules, first):
    if not shutil.which("iptables"):
        pytest.fail("iptables is missing: scripts/install-test-deps installs it")
    c = make_cluster(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node1\nnode2\n")
    for rule in rules:
        iptables(c, "node1", *rule)
    try:
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "ncclcheck", "bench", "--nodes", "2", "--hostfile",
             str(hostfile), "--ssh-config", c.ssh_config, "-e", "1M"],
            capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    finally:
        iptables(c, "node1", "-F", "INPUT")
    assert out.returncode == 1, out.stderr[-2000:]
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith(f"ncclcheck: error: {first}"), error
    where = "node1" if first.startswith("rank 0") else c.node("node1").addr
    assert f"a firewall on {where} likely drops it: run `ncclcheck probe` on {where}" in error
    assert "a gloo run over one-way connections does not prove NCCL's rings" in error
    assert "free --master-port" not in error and "Traceback" not in out.stderr
    assert error.count("a firewall on") == 1  # said once, not per rank
    assert took < 60, took
