"""Across nodes over ssh, on a network-namespace cluster with gloo (no GPU needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.bench.formulas import OPS

pytest.importorskip("torch")
#: Only the --compare test is marked ``alone``: its best candidate is a timing of the shared CPU.
#: The others hold a failure to a bound many times what it takes, and run beside other tests.
pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]


#: One cluster for the module: two links, the second slow (the --compare test); the other tests
#: run over the first.
LINKS = "eth0:auto:1gbit,eth1:auto:50mbit"


def bench(c, *args, timeout=180, **kw):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--hostfile", c.hostfile,
                           "--ssh-config", c.ssh_config, *args],
                          capture_output=True, text=True, timeout=timeout, **kw)


def cmdlines(c, node) -> dict[int, str]:
    out = {}
    for pid in c.pids(node):
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return out


def ours_left(c) -> list[str]:
    """Processes on the nodes other than sshd's listener, and local ssh clients to them, as
    soon as the launcher has exited: it waits for the nodes to stop their agents and ranks."""
    remote = [cmd for node in c.nodes for pid, cmd in cmdlines(c, node).items()
              if pid != node.sshd_pid]
    local = []
    for entry in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if cmd.startswith("ssh ") and c.ssh_config in cmd:
            local.append(cmd)
    return remote + local


@pytest.mark.alone
def test_compare_follows_the_socket_interface_of_each_candidate(make_cluster, tmp_path):
    """Each candidate is a whole 2-node run over ssh: the fast one's document is checked as
    any such run (ranks, nodes, launch, rows by the formulas), then the comparison."""
    c = make_cluster(2, links=LINKS)
    fast, slow = tmp_path / "fast.env", tmp_path / "slow.env"
    fast.write_text("NCCL_SOCKET_IFNAME==eth0\n")
    slow.write_text("# the slow link\nexport NCCL_SOCKET_IFNAME=eth1\n")
    out = bench(c, "--nodes", "2", "-b", "1K", "-e", "256K", "-f", "16", "-n", "3", "-w", "1",
                "--timeout", "30", "--compare", str(fast), str(slow), "-o", str(tmp_path / "c.json"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    # named by content, not by file name (issue 27 item 13)
    fast_label, slow_label = "NCCL_SOCKET_IFNAME==eth0", "NCCL_SOCKET_IFNAME=eth1"
    runs = {r["label"]: r["bench"] for r in doc["runs"]}
    one = runs[fast_label]
    assert (one["backend"], one["world_size"], one["ranks_per_node"]) == ("gloo", 2, 1)
    assert one["nodes"] == ["node1", "node2"]
    assert one["launch"]["mode"] == "ssh" and one["launch"]["master_addr"] == c.nodes[0].addr
    assert one["launch"]["hosts"] == c.addrs
    assert one["transport"]["interfaces"] == ["eth0"]
    for run in runs.values():
        assert run["wrong_total"] == 0
        assert [r["size_bytes"] for r in run["rows"]] == [1024, 16384, 262144]
        for row in run["rows"]:
            for cell in (row["out_of_place"], row["in_place"]):
                assert cell["wrong"] == 0
                assert cell["algbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 /
                                                           cell["time_us"])
                assert cell["busbw_gbps"] == pytest.approx(cell["algbw_gbps"] *
                                                           OPS["all_reduce"].bus_factor(2))
    assert runs[fast_label]["env"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert runs[slow_label]["env"]["GLOO_SOCKET_IFNAME"] == "eth1"
    assert doc["best"]["label"] == fast_label
    # under the 50 Mbit/s link at 256K (smaller messages pass in the tbf's burst)
    big = runs[slow_label]["rows"][-1]
    assert max(big["out_of_place"]["busbw_gbps"], big["in_place"]["busbw_gbps"]) < \
        50e6 / 8 / 1e9 * 1.1
    assert f"# best: {fast_label}" in out.stdout and "*" in out.stdout
    header = next(ln for ln in out.stdout.splitlines() if ln.lstrip("# ").startswith("size"))
    assert fast_label in header and slow_label in header and ".env" not in header, header
    from ncclcheck.report.page import make_report
    md = make_report([str(tmp_path / "c.json")], "md", None)
    assert fast_label in md
    assert ours_left(c) == []


def test_unreachable_node_is_named_quickly(make_cluster, tmp_path):
    c = make_cluster(2, links=LINKS)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{c.nodes[0].addr}\n{c.unreachable_addr}\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--hostfile", str(hostfile),
                          "--ssh-config", c.ssh_config, "--connect-timeout", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith(f"ncclcheck: error: {c.unreachable_addr}: ")
    assert time.monotonic() - started < 20
    assert ours_left(c) == []


def test_killing_one_nodes_agent_fails_fast_names_it_and_leaves_nothing(make_cluster, tmp_path):
    c = make_cluster(2, links=LINKS)
    timeout = 20
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", "--hostfile", c.hostfile,
                             "--ssh-config", c.ssh_config, "--nodes", "2", "-b", "64K", "-e", "64K",
                             "-n", "100000", "-w", "1", "--timeout", str(timeout),
                             "--nccl-log-dir", str(tmp_path / "logs")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        agent = None
        end = time.monotonic() + 60
        while time.monotonic() < end:
            procs = cmdlines(c, "node2")
            workers = [p for p, cmd in procs.items() if "ncclcheck.bench.worker" in cmd]
            agents = [p for p, cmd in procs.items()
                      if "ncclcheck.bench.agent" in cmd and "watchdog" not in cmd]
            if workers and agents:
                agent = agents[0]
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert agent, "the agent on node2 never started its rank"
        time.sleep(4)                                    # rendezvous done, inside the sweep
        killed_at = time.monotonic()
        os.kill(agent, signal.SIGKILL)
        _, err = proc.communicate(timeout=timeout + 10)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert took < timeout + 10
    assert err.startswith(f"ncclcheck: error: {c.nodes[1].addr} (node2): agent killed by signal 9")
    assert "Traceback" not in err
    assert ours_left(c) == []


def test_a_master_addr_the_first_node_lacks_is_refused_before_anything_starts(make_cluster):
    """Rank 0 hosts the rendezvous store on the first node: node2's address there would make
    every rank wait --timeout for a store that never listens."""
    c = make_cluster(2, links=LINKS)
    started = time.monotonic()
    out = bench(c, "--nodes", "2", "--master-addr", c.nodes[1].addr, "--timeout", "60")
    has = ", ".join(sorted(c.nodes[0].addrs.values()))      # its two links' addresses
    assert out.returncode == 2
    assert out.stderr == (f"ncclcheck: error: --master-addr {c.nodes[1].addr} is not an address "
                          f"of {c.nodes[0].addr}, the first node, where rank 0 hosts the "
                          f"rendezvous store (it has {has})\n")
    assert time.monotonic() - started < 15
    assert ours_left(c) == []


def test_a_session_keeps_one_agent_per_node_across_runs_and_a_failed_run_starts_a_new_one(
        make_cluster):
    """tune's runs over ssh (ncclcheck/bench/session.py): each node's agent (and its torch) is
    started once for many runs, each run still gets the candidate's interface; a failed run
    stops the agents, the next starts new ones; closing the session leaves nothing."""
    from ncclcheck.bench import launch
    from ncclcheck.bench.command import BenchRequest, bench_options
    from ncclcheck.bench.session import Session
    from ncclcheck.errors import NcclcheckError
    from ncclcheck.remote.ssh import SSH

    c = make_cluster(2, links=LINKS)

    def run(session, ifname=None):
        req = BenchRequest(hostfile=c.hostfile, ssh_config=c.ssh_config, min_bytes="1K",
                           max_bytes="8K", iters=2, warmup=1, timeout=30)
        env = {"NCCL_SOCKET_IFNAME": f"={ifname}"} if ifname else {}     # None: NCCL's default
        return launch.run(bench_options(req, env), session=session)

    def agents(node):
        return [pid for pid, cmd in cmdlines(c, node).items()
                if "ncclcheck.bench.agent --serve" in cmd and "watchdog" not in cmd]

    session = Session(c.hostfile, None, SSH(ssh_config=c.ssh_config), 120)
    try:
        first = run(session)
        kept = {node: agents(node) for node in ("node1", "node2")}
        assert all(len(pids) == 1 for pids in kept.values()), kept
        second = run(session, "eth1")
        # the baseline after a candidate: nothing of eth1's run is left in the agents (tune's
        # first version measured its baseline on the previous candidate's interface)
        third = run(session)
        assert {node: agents(node) for node in kept} == kept and session.starts == 1
        for doc, ifname in ((first, "eth0"), (second, "eth1"), (third, "eth0")):
            assert (doc["world_size"], doc["nodes"], doc["wrong_total"]) == (
                2, ["node1", "node2"], 0)
            assert doc["transport"]["interfaces"] == [ifname]
            assert doc["launch"]["mode"] == "ssh"
        assert "NCCL_SOCKET_IFNAME" not in third["env"] and third["candidate_env"] == {}
        with pytest.raises(NcclcheckError, match="nope0"):
            run(session, "nope0")
        assert not session.alive()
        assert run(session)["wrong_total"] == 0 and session.starts == 2
    finally:
        session.close()
    end = time.monotonic() + 10
    while ours_left(c) and time.monotonic() < end:
        time.sleep(0.2)
    assert ours_left(c) == []


def test_a_session_words_a_node_that_refuses_ssh_as_a_one_run_launch_does(make_cluster,
                                                                           tmp_path):
    """node1 is healthy, the second host refuses the connection at once (the root namespace's
    address: no sshd there). The session's hello waits for node1's answer instead of calling it
    timed out, and says what the one-run launch says (the review of the session found both)."""
    import ipaddress

    from ncclcheck.bench import launch
    from ncclcheck.bench.command import BenchRequest, bench_options
    from ncclcheck.bench.session import Session
    from ncclcheck.errors import NcclcheckError
    from ncclcheck.remote.ssh import SSH

    c = make_cluster(2, links=LINKS)
    refusing = str(next(ipaddress.ip_network(c.links[0]["subnet"]).hosts()))
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{c.nodes[0].addr}\n{refusing}\n")
    req = BenchRequest(hostfile=str(hostfile), ssh_config=c.ssh_config, min_bytes="1K",
                       max_bytes="1K", iters=1, warmup=1, timeout=30)
    said = []
    for session in (None, Session(str(hostfile), None, SSH(ssh_config=c.ssh_config), 60)):
        try:
            with pytest.raises(NcclcheckError) as exc:
                launch.run(bench_options(req), session=session)
        finally:
            if session is not None:
                session.close()
        said.append(str(exc.value))
    assert said[0] == said[1] and said[1].startswith(f"{refusing}: "), said
    assert "timed out" not in said[1] and c.nodes[0].addr not in said[1], said
    end = time.monotonic() + 10
    while ours_left(c) and time.monotonic() < end:
        time.sleep(0.2)
    assert ours_left(c) == []
