"""In-pod detection: what each job API's controller gives a pod, read as that pod would (the
variables as ncclcheck/k8s/podenv.py cites them), and the traps it closes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ncclcheck.bench.environ import detect_launcher, rank_env, rendezvous
from ncclcheck.errors import BadInput
from ncclcheck.hostfile import load_hostfile, parse_hostfile
from ncclcheck.k8s.podenv import pod_job
from ncclcheck.probes.host import detect_launcher as probe_launcher


def pytorchjob_env(node: int, nodes: int = 2, nproc: int = 8, master: str = "127.0.0.1",
                   port: int = 23456) -> dict[str, str]:
    """A PyTorchJob v1 pod's variables (training-operator v1.9.0 envvar.go l.62-122, master.go):
    Master replica 0 is node 0, Worker i is node i+1."""
    return {"PYTHONUNBUFFERED": "1", "MASTER_PORT": str(port), "PET_MASTER_PORT": str(port),
            "MASTER_ADDR": master, "PET_MASTER_ADDR": master,
            "WORLD_SIZE": str(nodes * nproc), "RANK": str(node), "PET_NODE_RANK": str(node),
            "PET_NPROC_PER_NODE": str(nproc), "PET_NNODES": str(nodes)}


def trainjob_env(node: int, nodes: int = 2) -> dict[str, str]:
    """A TrainJob pod (trainer v2.3.0 torch.go l.145-166): PET_* only."""
    return {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": str(node),
            "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29400"}


def test_pytorchjob_without_torchrun_is_one_rank_per_node_not_world_size():
    env = pytorchjob_env(1)
    assert detect_launcher(env) == "pytorchjob"          # before: "torchrun", world 16
    ident = rank_env(env)
    assert (ident["rank"], ident["world_size"], ident["local_rank"]) == (1, 2, 0)
    assert rendezvous(env, "pytorchjob", None, None) == ("127.0.0.1", 23456)


def test_torchrun_inside_a_pytorchjob_pod_keeps_torchruns_ranks():
    env = {**pytorchjob_env(1), "TORCHELASTIC_RUN_ID": "x", "RANK": "9", "WORLD_SIZE": "16",
           "LOCAL_RANK": "1"}
    assert detect_launcher(env) == "torchrun"
    assert rank_env(env)["world_size"] == 16


def test_trainjob_pod_has_only_pet_variables():
    env = trainjob_env(1)
    assert detect_launcher(env) == "trainjob"             # before: None (run by hand)
    assert rank_env(env)["rank"] == 1
    assert rendezvous(env, "trainjob", None, None) == ("tj-node-0-0.tj", 29400)


def test_lws_and_jobset_pods():
    env = {"LWS_LEADER_ADDRESS": "lw-0.lw.default", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}
    assert detect_launcher(env) == "lws"
    assert rendezvous(env, "lws", None, None) == ("lw-0.lw.default", 29500)
    env = {"JOB_COMPLETION_INDEX": "1", "NNODES": "2", "HOSTNAME": "js-node-0-1"}
    assert detect_launcher(env) == "jobset"
    assert rank_env(env)["rank"] == 1
    assert rendezvous(env, "jobset", None, None) == ("js-node-0-0", 29500)
    # one pod per Job (GKE's A3 recipes): the job index is the node
    assert pod_job({"JOB_COMPLETION_INDEX": "0", "NNODES": "4"}, "a3-w-3-0")["node_rank"] == 3
    with pytest.raises(BadInput, match="no node count"):
        rank_env({"JOB_COMPLETION_INDEX": "1", "HOSTNAME": "js-node-0-1"}, "jobset")
    with pytest.raises(BadInput, match="several Jobs of several pods"):
        pod_job({"JOB_COMPLETION_INDEX": "1"}, "js-node-2-1")


def test_an_indexed_job_with_its_own_hostname_and_plain_env_are_not_pods_of_an_api():
    assert detect_launcher({"JOB_COMPLETION_INDEX": "1", "HOSTNAME": "trainer-7"}) is None
    assert detect_launcher({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a"}) == "torchrun"
    assert detect_launcher({"K_MPI_JOB_ROLE": "worker"}) is None   # mpirun gives ranks


def test_bad_numbers_are_one_line():
    with pytest.raises(BadInput, match="LWS_GROUP_SIZE='two' is not a whole number"):
        detect_launcher({"LWS_LEADER_ADDRESS": "a", "LWS_GROUP_SIZE": "two"})
    with pytest.raises(BadInput, match="elastic"):
        pod_job({"PET_NNODES": "1:4", "PET_NODE_RANK": "0"})


def test_probe_records_job_api_pod_node_and_topology():
    env = {**pytorchjob_env(1), "POD_NAME": "j-worker-0", "NODE_NAME": "gpu-3",
           "POD_NAMESPACE": "ml", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    labels = ('app="x"\ncloud.google.com/gce-topology-block="b1"\n'
              'topology.kubernetes.io/zone="us-central1-a"\n')
    facts = probe_launcher(env, labels)
    assert (facts["kind"], facts["rank"], facts["world_size"]) == ("pytorchjob", 1, 2)
    assert facts["pod"] == {"job_api": "pytorchjob", "pod": "j-worker-0", "namespace": "ml",
                            "node": "gpu-3",
                            "topology": {"cloud.google.com/gce-topology-block": "b1",
                                         "topology.kubernetes.io/zone": "us-central1-a"}}
    assert "pod" not in probe_launcher({"RANK": "0", "WORLD_SIZE": "2"})


# -- hostfiles: host:N -------------------------------------------------------------------------
INTEL = "job-worker-0.job.default.svc:8\njob-worker-1.job.default.svc:8\n"


def test_intel_mpi_hostfile_in_an_mpijob_means_slots(tmp_path):
    """mpi-operator v0.8.0 writes host:N for Intel MPI and MPICH (mpi_job_controller.go l.1325)."""
    path = tmp_path / "hostfile"
    path.write_text(INTEL)
    for env in ({"K_MPI_JOB_ROLE": "launcher"}, {"I_MPI_HYDRA_HOST_FILE": str(path)},
                {"HYDRA_HOST_FILE": str(path)}):
        targets = load_hostfile(path, environ=env)
        assert [(t.host, t.slots, t.port) for t in targets] == [
            ("job-worker-0.job.default.svc", 8, None), ("job-worker-1.job.default.svc", 8, None)]


def test_hand_written_host_colon_n_outside_an_mpi_job_is_still_refused(tmp_path):
    path = tmp_path / "hosts"
    path.write_text(INTEL)
    with pytest.raises(BadInput, match="ambiguous"):
        load_hostfile(path, environ={"I_MPI_HYDRA_HOST_FILE": str(tmp_path / "other")})
    with pytest.raises(BadInput, match="ambiguous"):
        parse_hostfile(INTEL)


def test_rank_reads_an_mpijob_intel_hostfile(tmp_path):
    """``ncclcheck rank`` in an MPIJob pod: the hostfile's host:8 is slots, NPROC_PER_NODE 8."""
    path = tmp_path / "hostfile"
    path.write_text("localhost:8\n")
    env = {**os.environ, "K_MPI_JOB_ROLE": "launcher"}
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "rank", "--hostfile", str(path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "NPROC_PER_NODE=8" in out.stdout
    env.pop("K_MPI_JOB_ROLE")
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "rank", "--hostfile", str(path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2 and "ambiguous" in out.stderr

# The trap for real (two PyTorchJob pods, nprocPerNode 8, no torchrun): tests/k8s/test_pods.py.
