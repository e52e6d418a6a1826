"""The engines clusters use, for real: Slurm (slurmctld + one slurmd per namespace node),
Open MPI's mpirun and pdsh, on a 2-node network-namespace cluster with 400 Mbit/s links.

The node names (``node1``, ``node2``) resolve nowhere but in Slurm's NodeAddr, as on clusters
whose node names are Slurm's own. torchrun across two nodes: tests/bench/test_torchrun.py.

Two tests are marked ``alone``: one holds a run's bandwidth to the link's rate, one a failure to
a bound (30 s) of twice its deadline (15 s). The others assert no timing of the shared CPU, or a
bound many times what the command takes (a failure before torch is imported), and run beside
other tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, slurm_cluster  # noqa: F401  (module-scoped fixtures)

pytest.importorskip("torch")
pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

BIN = str(Path(sys.executable).parent / "ncclcheck")
RATE_GBPS = 400e6 / 8 / 1e9  # the links' 400 Mbit/s in GB/s
SMALL = ["-e", "4M", "-w", "2", "-n", "5", "--timeout", "60"]


def run(argv, env, timeout=120, cwd=None):
    start = time.monotonic()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                         cwd=cwd)
    return out, time.monotonic() - start


def leftovers(c) -> list[str]:
    """Processes on the nodes other than their sshd and slurmd daemons."""
    left = []
    for node in c.nodes:
        for pid in c.pids(node):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if not re.match(r"^(sshd[: ]|/usr/sbin/sshd |slurmd )", cmd):
                left.append(f"{node.name}: {cmd}")
    return left


def no_leftovers(c, wait=10.0) -> list[str]:
    end = time.monotonic() + wait
    while (left := leftovers(c)) and time.monotonic() < end:
        time.sleep(0.2)
    return left


def warning_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines()
            if re.search(r"Warning|^\[W|^  \S", ln)]


@pytest.mark.alone
def test_srun_bench_with_no_flags_resolves_the_node_through_slurm(slurm_cluster):
    c, env = slurm_cluster
    out, _ = run(["srun", "-N2", BIN, "bench", *SMALL, "--json"], env)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert (doc["world_size"], doc["nodes"]) == (2, ["node1", "node2"])
    assert doc["launch"]["mode"] == "slurm" and doc["wrong_total"] == 0
    assert doc["peak_busbw_gbps"] >= 0.8 * RATE_GBPS, doc["peak_busbw_gbps"]
    assert warning_lines(out.stderr) == []
    assert no_leftovers(c) == []


def test_srun_bench_with_an_address_that_never_resolves_fails_fast_naming_it(slurm_cluster):
    c, env = slurm_cluster
    out, took = run(["srun", "-N2", BIN, "bench", *SMALL, "--master-addr",
                     "no-such-node.invalid"], env, timeout=60)
    assert out.returncode != 0
    assert took < 30, took
    assert re.search(r"rank [01] on node[12]: the rendezvous address no-such-node.invalid does "
                     r"not resolve.*fix: pass --master-addr", out.stderr), out.stderr[-2000:]
    assert no_leftovers(c) == []


@pytest.mark.alone
def test_srun_bench_with_an_address_of_the_wrong_node_fails_within_the_deadline(slurm_cluster):
    c, env = slurm_cluster
    other = c.nodes[1].addr  # rank 0 runs on node1: nobody listens on node2's address
    out, took = run(["srun", "-N2", BIN, "bench", *SMALL, "--master-addr", other], env,
                    timeout=60)
    assert out.returncode != 0
    assert took < 30, took
    assert f"rank 0 on node1: rank 0 hosts the rendezvous store but {other}" in out.stderr
    assert re.search(rf"rank 1 on node2: cannot reach the rendezvous at {other}:29500 within "
                     r"15 s", out.stderr), out.stderr[-2000:]
    assert no_leftovers(c) == []


def test_salloc_probe_launcher_slurm_writes_a_cluster_document(slurm_cluster, tmp_path):
    c, env = slurm_cluster
    out, _ = run(["salloc", "-N2", BIN, "probe", "--launcher", "slurm", "-o",
                  str(tmp_path / "cluster.json")], env)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "cluster.json").read_text())
    assert (doc["schema"], doc["source"]) == ("ncclcheck/cluster", "slurm")
    assert doc["hosts"] == ["node1", "node2"] and doc["failed"] == []
    assert sorted(n["hostname"] for n in doc["nodes"]) == ["node1", "node2"]
    assert no_leftovers(c) == []


def test_probe_through_slurm_lists_a_node_without_ncclcheck_and_keeps_the_other(
        slurm_cluster, tmp_path):
    c, env = slurm_cluster
    python = tmp_path / "python"  # node2 gets a python without ncclcheck
    python.write_text(f'#!/bin/sh\n[ "$(hostname)" = node2 ] && exec /usr/bin/python3 -I "$@"\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out, took = run(["salloc", "-N2", BIN, "probe", "--remote-python", str(python), "--json"],
                    env)  # the default launcher inside salloc is slurm
    assert out.returncode == 1, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert [n["hostname"] for n in doc["nodes"]] == ["node1"]
    assert doc["failed"][0]["host"] == "node2"
    assert "No module named ncclcheck" in doc["failed"][0]["reason"]
    assert no_leftovers(c) == []


def test_salloc_bench_runs_one_rank_per_node_through_srun_by_default(slurm_cluster):
    c, env = slurm_cluster
    out, _ = run(["salloc", "-N2", BIN, "bench", *SMALL, "--json"], env)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert (doc["world_size"], doc["nodes"], doc["launch"]["mode"]) == (
        2, ["node1", "node2"], "slurm")
    assert no_leftovers(c) == []


def test_bench_through_slurm_names_the_node_without_ncclcheck(slurm_cluster, tmp_path):
    c, env = slurm_cluster
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\n[ "$(hostname)" = node2 ] && exec /usr/bin/python3 -I "$@"\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out, took = run(["salloc", "-N2", BIN, "bench", *SMALL, "--remote-python", str(python)],
                    env, timeout=60)
    assert out.returncode == 1 and took < 30, took
    assert re.search(r"srun on node1,node2: node2: .*No module named 'ncclcheck'", out.stderr), \
        out.stderr[-2000:]
    assert no_leftovers(c) == []


def test_killing_one_task_fails_the_step_and_leaves_nothing(slurm_cluster):
    c, env = slurm_cluster
    proc = subprocess.Popen(["srun", "-N2", BIN, "bench", "-e", "64M", "-n", "50",
                             "--timeout", "60"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < end and proc.poll() is None:
        for pid in c.pids(c.nodes[1]):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if "ncclcheck" in cmd and "bench" in cmd:
                victim = pid
        time.sleep(0.5)
    assert victim, "rank 1 never started"
    # into the sweep: rank 0 streams a size's row (flushed) once both ranks have run that size
    row = next((ln for ln in proc.stdout if ln.strip() and not ln.startswith("#")), None)
    assert row and proc.poll() is None, row
    killed = time.monotonic()
    os.kill(victim, 9)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - killed
    assert proc.returncode != 0
    assert took < 30, took
    assert "node2" in err, err[-2000:]
    assert no_leftovers(c) == []


@pytest.mark.skipif(not shutil.which("mpirun") and not os.environ.get("CI"),
                    reason="Open MPI not installed (apt-get install openmpi-bin)")
def test_mpirun_two_nodes_with_and_without_master_addr(make_cluster, tmp_path):
    c = make_cluster(2)
    hosts = ",".join(c.addrs)

    def base(job):
        # each job its own session-directory root (mpirun's and the orteds' on both nodes, which
        # share this filesystem): Open MPI 4 creates ompi.<host>.<uid> with a check-then-mkdir,
        # and two jobs started together raced there ("mkdir ... File exists", orte_init failed)
        (tmp_path / job).mkdir()
        return ["mpirun", "--allow-run-as-root", "-np", "2", "--host", hosts,
                "-mca", "orte_tmpdir_base", str(tmp_path / job),
                "-mca", "plm_rsh_args", f"-F {c.ssh_config}",
                "-mca", "btl_tcp_if_include", c.links[0]["subnet"],
                "-mca", "oob_tcp_if_include", c.links[0]["subnet"]]
    # the two jobs side by side (neither asserts a timing), on two rendezvous ports of node1
    with ThreadPoolExecutor(2) as pool:
        given = pool.submit(run, base("given") + ["-x", f"MASTER_ADDR={c.addrs[0]}", "-x",
                                                  "MASTER_PORT=29501", BIN, "bench", *SMALL,
                                                  "--json"],
                            dict(os.environ))
        # no MASTER_ADDR: rank 0 says where it is over MPI (ncclcheck/bench/mpiaddr.py)
        found = pool.submit(run, base("found") + [BIN, "bench", *SMALL, "--json"],
                            dict(os.environ))
    out, _ = given.result()
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert (doc["world_size"], doc["nodes"], doc["launch"]["mode"]) == (2, ["node1", "node2"],
                                                                        "mpi")
    assert (doc["launch"]["master_addr"], doc["launch"]["master_port"]) == (c.addrs[0], 29501)
    out, _ = found.result()
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert (doc["world_size"], doc["launch"]["master_addr"]) == (2, c.addrs[0])
    assert no_leftovers(c) == []


@pytest.mark.skipif(not shutil.which("pdsh") and not os.environ.get("CI"),
                    reason="pdsh not installed (apt-get install pdsh)")
def test_probe_reads_pdsh_output(make_cluster, tmp_path):
    c = make_cluster(2)
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND=f"-F {c.ssh_config}")
    out, _ = run(["pdsh", "-w", "node1,node2", BIN, "probe", "--json"], env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"^node1: \{", out.stdout, re.M)
    (tmp_path / "pdsh.txt").write_text(out.stdout + "node3: oops, not JSON\n")
    res, _ = run([BIN, "probe", "--from", str(tmp_path / "pdsh.txt"), "--json"],
                 dict(os.environ))
    doc = json.loads(res.stdout)
    assert sorted(n["hostname"] for n in doc["nodes"]) == ["node1", "node2"]
    assert [f["host"] for f in doc["failed"]] == ["node3"]


@pytest.mark.skipif(not shutil.which("deepspeed", path=str(Path(sys.executable).parent))
                    and not os.environ.get("CI"),
                    reason="DeepSpeed not installed (scripts/install-test-deps installs it)")
@pytest.mark.skipif(not shutil.which("pdsh") and not os.environ.get("CI"),
                    reason="pdsh not installed (apt-get install pdsh)")
def test_readme_deepspeed_line_runs_bench_on_both_nodes(make_cluster, tmp_path):
    """README's line through DeepSpeed's real pdsh runner: its launch.py starts
    'python -u -m ncclcheck --local_rank=0 bench ...' on every node (issue 27 item 4)."""
    c = make_cluster(2)
    shim = tmp_path / "bin"   # the test cluster's ssh config, as a user's ~/.ssh/config would be:
    shim.mkdir()              # DeepSpeed's runner calls plain 'ssh HOST' and pdsh runs 'ssh'
    (shim / "ssh").write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {c.ssh_config} "$@"\n')
    (shim / "ssh").chmod(0o755)
    (tmp_path / "hosts").write_text("".join(f"{n.name} slots=1\n" for n in c.nodes))
    (tmp_path / ".deepspeed_env").write_text("NCCL_SOCKET_IFNAME=eth0\n")
    env = dict(os.environ, PATH=f"{shim}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    out, _ = run(["deepspeed", "--hostfile", "hosts", "--num_nodes", "2", "--module",
                  "ncclcheck", "bench"], env, timeout=400, cwd=tmp_path)
    assert "--local_rank=0" in out.stdout + out.stderr      # DeepSpeed did put it there
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "No such option" not in out.stdout + out.stderr
    assert re.search(r"^node1: # backend gloo, 2 ranks on 2 nodes \(launched by deepspeed\)",
                     out.stdout, re.M), out.stdout[-3000:]
    assert re.search(r"^node1: # Transport .*interface eth0", out.stdout, re.M)
    assert no_leftovers(c) == []
