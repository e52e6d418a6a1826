"""Inside torchrun: bench acts as the ranks it was given and spawns nothing (one node, and two
nodes of a network-namespace cluster)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.hostfile import Target
from ncclcheck.remote.ssh import SSH

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.torch]  # no timing asserted: never ``alone``


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_tmp(tmp_path):
    """This environment with TMPDIR in ``tmp_path``: torchrun's torchelastic_* folders go there."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    """One torchrun job of 2 ranks on this node, shared by the tests below: bench prints its
    table to stdout and writes its document with ``-o`` (the same document ``--json`` prints)."""
    tmp_path = tmp_path_factory.mktemp("torchrun")
    port = free_port()
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(port),
         "-m", "ncclcheck", "bench", "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1",
         "--timeout", "30", "-o", str(tmp_path / "bench.json"),
         "--nccl-log-dir", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=120, env=in_tmp(tmp_path))
    return tmp_path, port, out


def test_ranks_under_torchrun_keep_torchs_warnings_in_their_logs(one_node):
    """What torchrun's ranks (ncclcheck bench itself) would print of torch's goes to the rank
    log, removed after a clean run; torchrun's own process still says what it says."""
    tmp_path, _, out = one_node
    assert out.returncode == 0, out.stderr[-2000:]
    assert "# Avg bus bandwidth" in out.stdout
    # the table names the launcher (it said "(ncclcheck)" before), and only rank 0 prints it
    assert "# backend gloo, 2 ranks on 1 node (launched by torchrun)\n" in out.stdout
    assert out.stdout.count("# ncclcheck bench: all_reduce float\n") == 1
    for noise in ("FutureWarning", "deprecated", "[c10d]", "[W"):
        assert noise not in out.stderr
    assert out.stderr.count("Failed to initialize NumPy") <= 1     # torchrun's, without numpy
    left = [p.name for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("torchelastic_")]
    assert left == []


def test_bench_under_torchrun_reports_once_from_rank_0(one_node):
    tmp_path, port, out = one_node
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "bench.json").read_text())   # written once: by rank 0
    assert doc["launch"] == {"mode": "torchrun", "master_addr": "127.0.0.1", "master_port": port}
    assert (doc["world_size"], doc["backend"], doc["wrong_total"]) == (2, "gloo", 0)
    assert [r["size_bytes"] for r in doc["rows"]] == [1024, 4096, 16384]
    pids = sorted(e["pid"] for e in doc["transport"]["per_rank"])
    assert len(set(pids)) == 2               # the two torchrun workers themselves
    for row in doc["rows"]:
        cell = row["out_of_place"]
        assert cell["busbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 / cell["time_us"])
    assert doc["env"]["NCCL_DEBUG_FILE"] == f"{tmp_path / 'logs'}/nccl.%h.%p"
    # the table on stdout is rank 0's alone: one header, one row per size
    assert out.stdout.count("# ncclcheck bench:") == 1
    assert sum(1 for ln in out.stdout.splitlines() if ln.split()[:1] in (["1024"], ["4096"],
                                                                          ["16384"])) == 3


@pytest.mark.netns
@needs_netns
def test_torchrun_on_two_nodes_with_ncclcheck_rank(make_cluster, tmp_path):
    """The README recipe on each node of a 2-node cluster: ``ncclcheck rank`` gives torchrun its
    values, torchrun starts one rank per node, bench reports once, from rank 0 on node1."""
    c = make_cluster(2)
    py = sys.executable
    (tmp_path / "tmp").mkdir()
    script = (f'export TMPDIR={tmp_path / "tmp"} && '  # torchrun's torchelastic_* go there
              f'eval "$({py} -m ncclcheck rank --hostfile {c.hostfile})" && exec {py} -m '
              "torch.distributed.run --nnodes=$NNODES --node-rank=$NODE_RANK "
              "--nproc-per-node=$NPROC_PER_NODE --master-addr=$MASTER_ADDR "
              "--master-port=$MASTER_PORT -m ncclcheck bench -b 1K -e 16K -f 4 -n 2 -w 1 "
              "--timeout 30 --json")
    ssh = SSH(ssh_config=c.ssh_config)
    runs = [ssh.start(Target(node.addr), ["sh", "-c", script], deadline=150) for node in c.nodes]
    results = [run.result(timeout=120) for run in runs]
    assert all(r.ok for r in results), [r.error for r in results]
    doc = json.loads(results[0].stdout)
    assert results[1].stdout.strip() == ""                       # rank 1 printed nothing
    assert doc["launch"] == {"mode": "torchrun", "master_addr": c.nodes[0].addr,
                             "master_port": 29500}
    assert (doc["world_size"], doc["nodes"], doc["wrong_total"]) == (2, ["node1", "node2"], 0)
    assert doc["transport"]["interfaces"] == ["eth0"]
    for row in doc["rows"]:
        for cell in (row["out_of_place"], row["in_place"]):
            assert cell["busbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 / cell["time_us"])
    for node in c.nodes:
        assert [p for p in c.pids(node) if p != node.sshd_pid] == []
