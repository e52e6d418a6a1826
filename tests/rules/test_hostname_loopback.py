"""host-hostname-loopback on the real H200 VM that the device tool lends: its /etc/hosts maps the
hostname to 127.0.0.1 (the cloud-init default) and nothing there is multi-node. That is INFO;
the same facts in a job of several nodes are a WARNING (issue: the lent machine's probe warned)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck import probe
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.rules import host_hostname_loopback
from ncclcheck.rules.engine import evaluate

H200 = Path(__file__).parent.parent / "fixtures" / "hosts" / "h200-vm-1gpu"
RULE = host_hostname_loopback.RULE


@pytest.fixture(scope="module")
def vm():
    """The recorded VM's facts, as `ncclcheck probe --replay` collects them."""
    return probe.collect_facts(RecordedHost(str(H200)))


def finding(nodes):
    [f] = evaluate([RULE], nodes)["findings"]
    return f


def test_a_lone_vm_gets_info_that_says_when_it_matters(vm):
    [f] = [f for f in vm["findings"] if f["rule"] == RULE.id]
    assert f["severity"] == "info"
    assert f["message"].startswith("the hostname host-1 resolves to 127.0.0.1 in /etc/hosts")
    assert "other nodes cannot reach" in f["message"]
    assert "(if other nodes connect to this one; the facts do not say how many nodes" in f["message"]
    assert "127.0.1.1" in f["fix"] and f["docs"].endswith("src/misc/socket.cc")


def launched(doc, launcher=None, **env):
    doc = copy.deepcopy(doc)
    doc["sections"]["host"]["data"]["launcher"].update(launcher or {})
    doc["sections"]["env"]["data"]["other"].update(env)
    return doc


@pytest.mark.parametrize("launcher, env, severity", [
    ({"kind": "slurm", "nnodes": 2}, {}, "warning"),
    ({"kind": "slurm", "nnodes": 1}, {}, "info"),
    ({"kind": "pytorchjob", "nnodes": 4}, {"PET_NNODES": "4"}, "warning"),
    ({"kind": "torchrun"}, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, "warning"),
    ({"kind": "torchrun"}, {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}, "info"),
    ({"kind": "mpi"}, {"OMPI_COMM_WORLD_SIZE": "16", "LOCAL_SIZE": "8"}, "warning"),
    ({}, {"MASTER_ADDR": "198.18.0.1"}, "warning"),   # another host hosts the rendezvous
    ({}, {"MASTER_ADDR": "localhost"}, "info"),
])
def test_a_warning_only_where_the_facts_show_several_nodes(vm, launcher, env, severity):
    f = finding([launched(vm, launcher, **env)])
    assert f["severity"] == severity, f["message"]
    if severity == "warning":
        assert "in a multi-node job (" in f["message"] and f["evidence"]["peers"]


def test_the_scheduler_environment_read_by_the_probe_makes_it_a_warning():
    host = RecordedHost(str(H200))
    host.env = {**host.env, "SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2"}
    doc = probe.collect_facts(host)
    [f] = [f for f in doc["findings"] if f["rule"] == RULE.id]
    assert f["severity"] == "warning"
    assert "multi-node job (the slurm job has 2 node(s))" in f["message"]


def test_several_nodes_probed_together_get_the_warning(vm):
    other = copy.deepcopy(vm)
    other["hostname"] = "host-2"
    found = evaluate([RULE], [vm, other])["findings"]
    assert [f["severity"] for f in found] == ["warning", "warning"]
    assert all("2 nodes in the facts" in f["message"] for f in found)


def test_master_addr_on_loopback_in_a_job_of_several_nodes_stays_an_error(vm):
    doc = launched(vm, {"kind": "slurm", "nnodes": 2})
    doc["sections"]["netpath"]["data"]["resolve"].update(master_addr="host-1",
                                                         master_addrs=["127.0.0.1"])
    f = finding([doc])
    assert f["severity"] == "error" and f["message"].startswith("MASTER_ADDR=host-1 resolves")


def test_probe_fail_on_warning_passes_on_the_lone_vm():
    """README: `ncclcheck probe --fail-on warning` exits 3 on a warning (CI gates); the lone VM
    has none now (it exited 3 on the old rule)."""
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--replay", str(H200),
                          "--fail-on", "warning"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "host-hostname-loopback" in out.stdout


@pytest.mark.parametrize("env", [
    {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},     # mpirun -np 4 -npernode 2
    {"PMI_SIZE": "4", "MPI_LOCALNRANKS": "2"},                           # MPICH/Hydra
])
def test_an_mpi_job_across_hosts_seen_by_the_probe_makes_it_a_warning(env):
    """The local size must reach the facts (the probe's allow-list) for peer_scope to read it:
    without OMPI_COMM_WORLD_LOCAL_SIZE / MPI_LOCALNRANKS there, an Open MPI or MPICH job across
    hosts looked like no job at all (INFO)."""
    host = RecordedHost(str(H200))
    host.env = {**host.env, **env}
    doc = probe.collect_facts(host)
    [f] = [f for f in doc["findings"] if f["rule"] == RULE.id]
    assert f["severity"] == "warning", f["message"]
    assert "world size 4, 2 on this node" in f["message"]
