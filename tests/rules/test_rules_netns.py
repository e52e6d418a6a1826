"""The issue-18 faults planted on a 2-node namespace fleet, found by ``probe --hostfile``.

Healthy first: no finding of warning or worse. Then node2 gets a second interface in eth0's
subnet (a veth, eth9) and strict reverse-path filtering, and node1 a firewall that drops INPUT
but allows ssh: each finding must come from the right node, with its fix. Last, node2's hosts
file maps its hostname to 127.0.1.1 (as Debian's installer does), read through the rooted reader.
Addresses are in 198.18.0.0/15 only; the cluster is torn down when the module ends.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_netns]
REPO = Path(__file__).resolve().parents[2]
WORSE = ("warning", "error")


def probe(c, tmp_path) -> dict[str, list[dict]]:
    """``probe --hostfile`` over ssh: ``{hostname: findings}``."""
    out_file = tmp_path / "cluster.json"
    proc = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--hostfile", c.hostfile,
                           "--ssh-config", c.ssh_config, "--connect-timeout", "5",
                           "--timeout", "60", "-o", str(out_file)],
                          capture_output=True, text=True, timeout=150, cwd=REPO)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(out_file.read_text())
    assert not doc["failed"], doc["failed"]
    return {n["hostname"]: n["findings"] for n in doc["nodes"]}


def run_in(c, node: str, *argv: str) -> None:
    proc = c.exec(node, list(argv), timeout=20)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"


@pytest.fixture(scope="module")
def fleet(make_cluster):  # noqa: F811
    if not shutil.which("iptables"):
        pytest.fail("iptables is missing: scripts/install-test-deps installs it")
    return make_cluster(2, fresh=True)


def test_healthy_then_planted_faults_each_on_its_node(fleet, tmp_path):
    c = fleet
    healthy = probe(c, tmp_path)
    assert sorted(healthy) == ["node1", "node2"]
    assert {h: [f["rule"] for f in fs if f["severity"] in WORSE] for h, fs in healthy.items()} \
        == {"node1": [], "node2": []}

    subnet = ipaddress.ip_network(c.link()["subnet"])
    spare = str(subnet.network_address + subnet.num_addresses - 10)
    run_in(c, "node2", "ip", "link", "add", "eth9", "type", "veth", "peer", "name", "veth9")
    run_in(c, "node2", "ip", "addr", "add", f"{spare}/{subnet.prefixlen}", "dev", "eth9")
    run_in(c, "node2", "ip", "link", "set", "veth9", "up")
    run_in(c, "node2", "ip", "link", "set", "eth9", "up")
    run_in(c, "node2", "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=1")
    run_in(c, "node1", "iptables", "-A", "INPUT", "-i", "lo", "-j", "ACCEPT")
    run_in(c, "node1", "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
    run_in(c, "node1", "iptables", "-P", "INPUT", "DROP")

    found = probe(c, tmp_path)
    rules = {h: {f["rule"]: f for f in fs if f["severity"] in WORSE} for h, fs in found.items()}
    assert sorted(rules["node1"]) == ["net-firewall-blocks-peers"]
    assert sorted(rules["node2"]) == ["net-rp-filter-strict", "net-same-subnet-nics"]
    firewall = rules["node1"]["net-firewall-blocks-peers"]
    assert "INPUT policy DROP" in firewall["message"] and "--dport 22" in firewall["message"]
    assert f"-s {subnet}" in firewall["fix"]
    same = rules["node2"]["net-same-subnet-nics"]
    assert same["message"].startswith(f"eth0 and eth9 share {subnet}")
    assert "arp_ignore=1" in same["fix"] and "NCCL_SOCKET_IFNAME==eth0" in same["fix"]
    assert "rp_filter=2" in rules["node2"]["net-rp-filter-strict"]["fix"]

    # only the system can fix these: recommend's env file names each one, on its node
    env = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe",
                          str(tmp_path / "cluster.json"), "-q"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert env.returncode == 0, env.stderr
    for note in ("# ERROR net-firewall-blocks-peers on node1:",
                 "# WARNING net-rp-filter-strict on node2:",
                 "# WARNING net-same-subnet-nics on node2:"):
        assert note in env.stdout, env.stdout
    # and pins NCCL to the interface both nodes use, exactly: eth9 (node2 only) stays out
    assert "NCCL_SOCKET_IFNAME==eth0" in env.stdout.splitlines(), env.stdout
    sourced = subprocess.run(["bash", "-c", 'set -eu; source /dev/stdin; '
                              'printf %s "$NCCL_SOCKET_IFNAME"'], input=env.stdout,
                             capture_output=True, text=True, timeout=10)
    assert sourced.returncode == 0 and sourced.stdout == "=eth0", sourced

    # the hostname mapped to loopback, as Debian writes it, seen through the rooted reader
    hosts = Path("/etc/netns") / c.node("node2").ns / "hosts"
    original = hosts.read_text()
    with open(hosts, "r+") as f:  # same inode: the nodes see it through their bind mount
        f.write("127.0.1.1\tnode2\n" + original.replace("\tnode2\n", "\tnode2-main\n"))
    try:
        found = probe(c, tmp_path)
    finally:
        with open(hosts, "w") as f:
            f.write(original)
    loop = [f for f in found["node2"] if f["rule"] == "host-hostname-loopback"]
    assert loop and "127.0.1.1" in loop[0]["message"] and "/etc/hosts" in loop[0]["fix"]
    assert not [f for f in found["node1"] if f["rule"] == "host-hostname-loopback"]


@pytest.fixture(scope="module")
def fw_fleet(make_cluster):  # noqa: F811
    """Two nodes of their own: the faults planted above stay out of the firewall walk."""
    if not shutil.which("iptables"):
        pytest.fail("iptables is missing: scripts/install-test-deps installs it")
    return make_cluster(2, fresh=True)


def _reach(c, src: str, dst_addr: str) -> str:
    """What a new TCP connection from ``src`` to an ephemeral port of ``dst_addr`` (nothing
    listens there) meets: 'refused' (the SYN got through), 'blocked' (rejected or timed out)."""
    code = ("import socket,sys\ns=socket.socket();s.settimeout(2)\n"
            "try:\n s.connect((sys.argv[1],40000))\nexcept ConnectionRefusedError:\n print('refused')\n"
            "except OSError:\n print('blocked')\nelse:\n print('open')\n")
    return c.exec(src, [sys.executable, "-c", code, dst_addr], timeout=20).stdout.strip()


@pytest.mark.parametrize("variant", ["rhel-reject", "source-drop", "policy-drop", "conntrack-trust"])
def test_firewall_variants_walked_as_the_kernel_does(fw_fleet, tmp_path, variant):
    """Issue 27's three variants on a real node1 are ERRORs naming what decides, with one
    runnable command per subnet that, run on node1, lets node2 in; issue 23's conntrack-scoped
    trust of the peers' subnet before a DROP policy is no finding."""
    c = fw_fleet
    subnet = str(ipaddress.ip_network(c.link()["subnet"]))
    wide = str(ipaddress.ip_network(subnet).supernet(new_prefix=16))
    plans = {
        "rhel-reject": [["-A", "INPUT", "-m", "state", "--state", "RELATED,ESTABLISHED", "-j",
                         "ACCEPT"], ["-A", "INPUT", "-p", "icmp", "-j", "ACCEPT"],
                        ["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"],
                        ["-A", "INPUT", "-p", "tcp", "-m", "state", "--state", "NEW", "-m", "tcp",
                         "--dport", "22", "-j", "ACCEPT"],
                        ["-A", "INPUT", "-j", "REJECT", "--reject-with", "icmp-host-prohibited"]],
        # (ssh first: probe --hostfile reaches node1 from inside that /16 too)
        "source-drop": [["-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"],
                        ["-A", "INPUT", "-s", wide, "-p", "tcp", "-j", "DROP"]],
        "policy-drop": [["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"],
                        ["-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"],
                        ["-P", "INPUT", "DROP"]],
        "conntrack-trust": [["-A", "INPUT", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
                             "-j", "ACCEPT"],
                            ["-A", "INPUT", "-s", wide, "-m", "conntrack", "--ctstate", "NEW",
                             "-j", "ACCEPT"], ["-P", "INPUT", "DROP"]],
    }
    node1 = c.node("node1").addr
    try:
        run_in(c, "node1", "iptables", "-F", "INPUT")
        run_in(c, "node1", "iptables", "-P", "INPUT", "ACCEPT")
        # probe over ssh first: the ssh rules above keep it reachable in every variant
        for argv in plans[variant]:
            run_in(c, "node1", "iptables", *argv)
        reach = _reach(c, "node2", node1)
        found = probe(c, tmp_path)
        fw = [f for f in found["node1"] if f["rule"] == "net-firewall-blocks-peers"]
        if variant == "conntrack-trust":
            assert reach == "refused" and fw == [], (reach, fw)
            return
        assert reach == "blocked", reach  # the planted firewall really refuses the peer
        [f] = fw
        assert f["severity"] == "error", f
        decides = {"rhel-reject": "--reject-with icmp-host-prohibited",
                   "source-drop": f"-s {wide} -p tcp -j DROP",
                   "policy-drop": "INPUT policy DROP"}[variant]
        assert decides in f["message"], f["message"]
        command = f"iptables -I INPUT -s {subnet} -j ACCEPT"
        assert command in f["fix"], f["fix"]
        run_in(c, "node1", *command.split())  # the fix, run as given, lets node2 in
        assert _reach(c, "node2", node1) == "refused"
        assert not [f for f in probe(c, tmp_path)["node1"]
                    if f["rule"] == "net-firewall-blocks-peers"]
    finally:
        run_in(c, "node1", "iptables", "-P", "INPUT", "ACCEPT")
        run_in(c, "node1", "iptables", "-F", "INPUT")
