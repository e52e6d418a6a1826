"""scripts/netns-cluster: namespaces, hostnames, links, rates, sshd, topology options, teardown."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import SCRIPT, Cluster, ClusterError, impl, make_cluster, two_nodes  # noqa: F401

pytestmark = [pytest.mark.netns, needs_netns]

SSH_BASE = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]


def in_node(c: Cluster, node: str, code: str, timeout: float = 20) -> str:
    """Run python ``code`` inside a node; return stdout (fail the test on error)."""
    proc = c.exec(node, [sys.executable, "-c", textwrap.dedent(code)], timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def can_connect(c: Cluster, node: str, addr: str, port: int = 22) -> str:
    """From inside ``node``: 'ok' or the connect error's name."""
    return in_node(c, node, f"""
        import socket
        s = socket.socket(); s.settimeout(2)
        try:
            s.connect(({addr!r}, {port})); print("ok")
        except OSError as e:
            print(type(e).__name__)
    """).strip()


def test_each_node_has_its_own_hostname_address_and_sshd(two_nodes):
    c = two_nodes
    assert [n.name for n in c.nodes] == ["node1", "node2"]
    for node in c.nodes:
        assert ipaddress.ip_address(node.addr) in ipaddress.ip_network("198.18.0.0/15")
        assert c.exec(node.name, ["hostname"]).stdout.strip() == node.name
        over_ssh = subprocess.run(SSH_BASE + ["-F", c.ssh_config, node.name, "--", "hostname"],
                                  capture_output=True, text=True, timeout=20)
        assert over_ssh.stdout.strip() == node.name, over_ssh.stderr
        by_addr = subprocess.run(SSH_BASE + ["-F", c.ssh_config, node.addr, "--",
                                             "cat /proc/net/dev | grep -c eth0; hostname"],
                                 capture_output=True, text=True, timeout=20)
        assert by_addr.stdout.split() == ["1", node.name]
        # a session's temp files (a failed bench's kept rank logs) go with the cluster
        tmp = subprocess.run(SSH_BASE + ["-F", c.ssh_config, node.name, "--", "echo $TMPDIR"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        assert tmp == f"{c.state_dir}/tmp" and Path(tmp).is_dir(), tmp
    assert socket_hostname_of_test_runner() != "node1"
    hostfile = Path(c.hostfile).read_text()
    assert hostfile == "".join(f"{n.addr} slots=1\n" for n in c.nodes)
    assert can_connect(c, "node1", c.nodes[1].addr) == "ok"


def socket_hostname_of_test_runner() -> str:
    import socket

    return socket.gethostname()


def test_nodes_resolve_each_other_by_name(two_nodes):
    out = in_node(two_nodes, "node2", """
        import socket
        print(socket.gethostbyname("node1"), socket.gethostbyname("node1-eth0"))
    """)
    assert out.split() == [two_nodes.nodes[0].addr] * 2


def test_set_rate_shapes_traffic_and_can_be_removed(make_cluster):
    c = make_cluster(2, rate="1gbit")
    assert c.rate("node1") == "1Gbit"
    c.set_rate("node1", "20mbit")
    assert c.rate("node1") == "20Mbit" and c.rate("node2") == "1Gbit"
    host_side = subprocess.run(["tc", "qdisc", "show", "dev", impl.veth_name(c.name, 1, 0)],
                               capture_output=True, text=True).stdout
    assert "rate 20Mbit" in host_side  # both directions are shaped
    # 2 MB at 20 Mbit/s needs 0.8 s; an unshaped veth moves it in milliseconds.
    receiver = subprocess.Popen(c.exec_argv("node2", [sys.executable, "-c", textwrap.dedent(f"""
        import socket, time
        srv = socket.create_server(({c.nodes[1].addr!r}, 5001)); print("ready", flush=True)
        conn, _ = srv.accept(); start = time.monotonic(); total = 0
        while chunk := conn.recv(1 << 16):
            total += len(chunk)
        print(total, time.monotonic() - start)
    """)]), stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "ready"
        in_node(c, "node1", f"""
            import socket
            s = socket.create_connection(({c.nodes[1].addr!r}, 5001)); s.sendall(b"x" * 2_000_000)
            s.close()
        """)
        total, seconds = receiver.communicate(timeout=30)[0].split()
    finally:
        receiver.kill()
    assert int(total) == 2_000_000
    assert float(seconds) > 0.5, f"20mbit link moved 2 MB in {seconds} s: not shaped"
    c.set_rate("node1", None)
    assert c.rate("node1") is None
    c.set_rate(None, "300mbit")
    assert [c.rate(n) for n in ("node1", "node2")] == ["300Mbit", "300Mbit"]
    assert Cluster.load(c.name).links[0]["rate"] == "300mbit"


def test_topology_fast_slow_mgmt_and_fake_docker0(make_cluster):
    c = make_cluster(2, links="eth0:auto:1gbit,eth1:auto:100mbit", mgmt="eno1",
                     fake_docker0=True)
    node1, node2 = c.nodes
    assert set(node1.addrs) == {"eth0", "eth1", "eno1", "docker0"}
    subnets = [ipaddress.ip_network(link["subnet"]) for link in c.links]
    assert subnets[0] != subnets[1]
    for node in c.nodes:
        assert ipaddress.ip_address(node.addrs["eth1"]) in subnets[1]
        assert node.addrs["docker0"] == "198.18.255.1"
    assert node1.addrs["eno1"] != node2.addrs["eno1"]
    mgmt1 = ipaddress.ip_interface(node1.addrs["eno1"] + "/30").network
    assert ipaddress.ip_address(node2.addrs["eno1"]) not in mgmt1  # a subnet per node
    brief = c.exec("node1", ["ip", "-br", "-4", "addr"]).stdout
    assert "docker0" in brief and "198.18.255.1/24" in brief
    assert c.rate("node1", "eth0") == "1Gbit" and c.rate("node1", "eth1") == "100Mbit"
    # shared links reach the other node; the management interface only reaches the root ns
    assert can_connect(c, "node1", node2.addrs["eth0"]) == "ok"
    assert can_connect(c, "node1", node2.addrs["eth1"]) == "ok"
    assert can_connect(c, "node1", node2.addrs["eno1"]) == "OSError"  # ENETUNREACH: no route
    ssh = subprocess.run(SSH_BASE + ["-F", c.ssh_config, node2.addrs["eno1"], "--", "hostname"],
                         capture_output=True, text=True, timeout=20)
    assert ssh.stdout.strip() == "node2"


def test_clusters_side_by_side_get_distinct_subnets(make_cluster, two_nodes):
    other = make_cluster(1, hostname_prefix="gpu")
    assert other.nodes[0].name == "gpu1"
    assert not ipaddress.ip_network(other.links[0]["subnet"]).overlaps(
        ipaddress.ip_network(two_nodes.links[0]["subnet"]))
    ssh = subprocess.run(SSH_BASE + ["-F", other.ssh_config, "gpu1", "--", "hostname"],
                         capture_output=True, text=True, timeout=20)
    assert ssh.stdout.strip() == "gpu1"


def test_down_kills_every_process_and_removes_everything_idempotently():
    c = Cluster.up(2)
    stray = subprocess.Popen(c.exec_argv("node1", ["sleep", "600"]), start_new_session=True)
    end = time.monotonic() + 5
    while len(c.pids("node1")) < 2 and time.monotonic() < end:
        time.sleep(0.02)
    assert stray.pid in c.pids("node1")
    c.down()
    assert stray.wait(timeout=5) == -9
    assert impl.cluster_namespaces(c.name) == [] and impl.cluster_links(c.name) == []
    assert not c.state_dir.exists()
    assert not any(Path("/etc/netns").glob(f"ncc-{c.name}-*"))
    assert impl.teardown(c.name) == []  # idempotent
    c.down()


def test_failed_up_leaves_nothing_behind(two_nodes):
    taken = two_nodes.links[0]["subnet"]
    name = impl.new_name()
    with pytest.raises(ClusterError, match="already in use"):
        Cluster.up(1, name=name, links=f"eth0:{taken}")
    assert not impl.exists(name)


@pytest.mark.parametrize("kw, why", [
    (dict(name="Bad_Name"), "--name"),
    (dict(links="eth0:10.0.0.0/24"), "inside 198.18.0.0/15"),
    (dict(links="eth0:198.18.7.0/25"), "/24 or larger"),
    (dict(links="eth0,eth0"), "repeated"),
    (dict(links="eth0:auto:fast"), "expected a number and a unit"),
    (dict(rate="400 mbit"), "expected a number and a unit"),
    (dict(mgmt="eth0"), "--mgmt"),
])
def test_bad_options_are_refused_before_anything_is_built(kw, why):
    with pytest.raises(ClusterError, match=why):
        Cluster.up(1, **kw)


def test_command_line_up_status_exec_set_rate_down():
    name = impl.new_name()
    run = lambda *a: subprocess.run([sys.executable, str(SCRIPT), *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=60)
    try:
        up = run("up", "--nodes", "1", "--name", name, "--rate", "200mbit", "--json")
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)
        assert os.path.exists(info["ssh_config"]) and os.path.exists(info["hostfile"])
        again = run("up", "--nodes", "1", "--name", name)
        assert again.returncode == 1 and "exists; run: netns-cluster down" in again.stderr
        status = json.loads(run("status", "--name", name, "--json").stdout)
        assert status[0]["nodes"][0]["sshd_alive"] and status[0]["nodes"][0]["rate"] == "200Mbit"
        ex = run("exec", "--name", name, "node1", "--", "hostname")
        assert ex.stdout.strip() == "node1"
        assert run("set-rate", "--name", name, "node1", "none").returncode == 0
        assert json.loads(run("status", "--name", name, "--json").stdout)[0]["nodes"][0][
            "rate"] is None
    finally:
        down = run("down", "--name", name)
    assert down.returncode == 0 and "removed" in down.stdout
    assert run("down", "--name", name).stdout.strip() == f"{name}: nothing"
