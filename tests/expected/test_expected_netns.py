"""On the namespace cluster the links ``tc`` shapes give their own class (TCP at the shaped
rate, read from the qdisc by each node's agent): a healthy 2-node run is ``normal``; with one
node's link planted at a fifth of the rate the run is ``low`` and the limit names that node's
link. The same for ``bench --pairwise`` is checked on the hunt's 8-node fleet
(tests/bench/test_pairwise_netns.py::
test_the_planted_node_and_links_are_named_one_of_them_out_of_time): the slow node's pairs are
low, naming its link."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

RATE = "200mbit"
SLOW = "40mbit"


def bench(c, *args):
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--hostfile", c.hostfile,
                          "--ssh-config", c.ssh_config, "--timeout", "60", *args],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_shaped_link_class_and_a_planted_slow_link(make_cluster):
    c = make_cluster(2, rate=RATE, fresh=True)
    slow_node = c.nodes[1]
    try:
        doc = json.loads(bench(c, "-b", "1M", "-e", "4M", "-w", "1", "-n", "3", "--json").stdout)
        exp = doc["expected"]
        assert doc["launch"]["links"][slow_node.addr][0]["rate_text"] == "200Mbit"
        assert (exp["class"], exp["verdict"]) == ("tcp-shaped", "normal"), exp
        assert exp["range"][1] == pytest.approx(0.0255) and "tc qdisc" in exp["notes"][0]

        c.set_rate(slow_node, SLOW)  # one size: at a fifth of the rate, 4 MB took 5 s more
        out = bench(c, "-b", "1M", "-e", "1M", "-w", "1", "-n", "3")
        assert "verdict            : low:" in out.stdout
        named = f"limited by         : {slow_node.addr} eth0: shaped to 40Mbit by tc (tbf)"
        assert named in out.stdout, out.stdout[-1500:]
        assert c.nodes[0].addr + " eth0" not in out.stdout
    finally:
        c.set_rate(slow_node, RATE)
