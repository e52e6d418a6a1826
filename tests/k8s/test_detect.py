"""In-pod detection: what each job API's controller gives a pod, read as that pod would (the
variables as ncclcheck/k8s/podenv.py cites them), and the traps it closes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.bench.environ import rank_env, rendezvous
from ncclcheck.errors import BadInput
from ncclcheck.hostfile import load_hostfile, parse_hostfile
from ncclcheck.k8s.launcher import detect_launcher
from ncclcheck.k8s.podenv import pod_job
from ncclcheck.probes.host import launcher_facts as probe_launcher


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


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


# -- one precedence for probe, bench and rank ---------------------------------------------------
#: README's order ("Precedence, first match wins"), highest first: (kind, the variables that
#: make it, as ncclcheck/k8s/launcher.py cites their source lines).
PRECEDENCE = [
    ("torchrun", {"TORCHELASTIC_RUN_ID": "r1", "RANK": "1", "WORLD_SIZE": "4"}),
    ("deepspeed", {"CROSS_RANK": "0", "RANK": "1", "WORLD_SIZE": "4"}),
    ("pytorchjob", {**pytorchjob_env(1)}),
    ("torchrun", {"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "198.18.0.11"}),
    ("mpi", {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}),
    ("slurm", {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}),
    ("trainjob", trainjob_env(1)),
    ("lws", {"LWS_LEADER_ADDRESS": "lw-0.lw", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}),
    ("jobset", {"JOB_COMPLETION_INDEX": "1", "NNODES": "2", "HOSTNAME": "js-node-0-1"}),
]


def test_one_precedence_for_probe_bench_and_rank_as_documented():
    """Each rule beats every rule below it (its variables plus all theirs), and probe's
    launcher facts name the same kind as bench and rank read (before: probe had its own
    order, mpirun before torch.distributed and any SLURM_JOB_ID as slurm)."""
    for i, (kind, _) in enumerate(PRECEDENCE):
        env: dict[str, str] = {}
        for below, more in reversed(PRECEDENCE[i:]):
            if i == 3 and below == "trainjob":
                continue  # PET_NNODES with RANK, WORLD_SIZE, MASTER_ADDR *is* rule 3
            env.update(more)
        assert detect_launcher(env) == kind, (i, env)
        assert probe_launcher(env)["kind"] == kind, (i, env)
    # a Slurm allocation outside a step: the context probe records, never a launcher of ranks
    alloc = {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2"}
    assert detect_launcher(alloc) is None and probe_launcher(alloc)["kind"] == "slurm"
    assert probe_launcher({**alloc, **PRECEDENCE[4][1]})["kind"] == "mpi"
    # the documented order is this one
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = " ".join(readme.split("Precedence, first match wins:", 1)[1].split(". ")[0].split())
    said = ["torchrun (`TORCHELASTIC_RUN_ID`)", "DeepSpeed (`CROSS_RANK`)", "a PyTorchJob pod",
            "plain torch.distributed", "mpirun", "an srun step", "a TrainJob, LWS or JobSet pod"]
    assert [line.find(s) for s in said] == sorted(line.find(s) for s in said), line
    assert -1 not in [line.find(s) for s in said], line


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


def rank_in(envs: list[dict[str, str]], *args: str) -> list[tuple[int, str, str]]:
    """``ncclcheck rank --json`` in one process per environment (run at once), with only the
    variables given (and PATH, HOME): a pod's environment as its controller wrote it."""
    base = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR") if k in os.environ}
    procs = [subprocess.Popen([sys.executable, "-m", "ncclcheck", "rank", "--json", *args],
                              env={**base, **env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for env in envs]
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
        out.append((proc.returncode, stdout, stderr))
    return out


def test_rank_in_the_pod_of_each_api_without_a_hostfile(tmp_path):
    """``ncclcheck rank`` alone, in each API's pod: the node rank, node count, master and port
    the controller set (before: --hostfile was required, exit 2). The PyTorchJob trap: node 1
    of 2 with 8 processes each, not rank 1 of 16."""
    port = str(free_port())
    jobset = {"JOB_COMPLETION_INDEX": "0", "JOBSET_JOB_INDEX": "0", "NNODES": "2",
              "MASTER_ADDR": "js-node-0-0.js", "MASTER_PORT": port, "HOSTNAME": "gpu-node-7"}
    hydra = {"K_MPI_JOB_ROLE": "launcher", "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
             "PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "1", "MPI_LOCALRANKID": "0",
             "MASTER_ADDR": "mj-worker-0.mj.default.svc"}   # Intel MPI's mpirun -genv MASTER_ADDR
    cases = [
        (pytorchjob_env(1), [2, 1, "127.0.0.1", 23456, 8]),
        (trainjob_env(1), [2, 1, "tj-node-0-0.tj", 29400, 8]),
        ({"LWS_LEADER_ADDRESS": "lw-0.lw.default", "LWS_GROUP_SIZE": "4",
          "LWS_WORKER_INDEX": "3"}, [4, 3, "lw-0.lw.default", 29500, None]),
        (jobset, [2, 0, "js-node-0-0.js", int(port), None]),   # the master checks its port
        (hydra, [2, 1, "mj-worker-0.mj.default.svc", 29500, None]),
    ]
    results = rank_in([env for env, _ in cases])
    for (env, want), (code, out, err) in zip(cases, results):
        assert code == 0, (env, err)
        got = json.loads(out)
        assert [got["NNODES"], got["NODE_RANK"], got["MASTER_ADDR"], got["MASTER_PORT"],
                got.get("NPROC_PER_NODE")] == want, env


def test_rank_refuses_with_one_line_where_no_one_says_which_node():
    cases = [({}, "--hostfile is needed outside mpirun and the pods of"),
             ({"K_MPI_JOB_ROLE": "worker"}, "an MPIJob worker has no hostfile"),
             ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
               "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "runs once per node, not 2 times"),
             ({"PMI_RANK": "1", "PMI_SIZE": "2"}, "no MASTER_ADDR"),
             ({**pytorchjob_env(2)}, "node rank 2 is not below the node count 2")]
    for (env, want), (code, out, err) in zip(cases, rank_in([e for e, _ in cases])):
        assert (code, out) == (2, ""), env
        assert want in err and err.count("\n") == 1, err


def test_rank_in_an_mpijob_pod_reads_the_operators_intel_hostfile(tmp_path):
    """runLauncherAsWorker: the launcher is the hostfile's first line, ``host:8`` (mpi-operator
    v0.8.0 mpi_job_controller.go l.1319-1325); rank finds it there: 8 slots, not ssh port 8."""
    path = tmp_path / "hostfile"
    path.write_text(f"{socket.gethostname()}:8\nmj-worker-0.mj.default.svc:8\n")
    port = str(free_port())
    env = {"K_MPI_JOB_ROLE": "launcher", "I_MPI_HYDRA_HOST_FILE": str(path)}
    (code, out, err), (code2, _, err2) = rank_in([env, {}], "--hostfile", str(path),
                                                  "--port-range", port)
    assert code == 0, err
    assert json.loads(out) == {"NNODES": 2, "NODE_RANK": 0, "MASTER_ADDR": socket.gethostname(),
                               "MASTER_PORT": int(port), "NPROC_PER_NODE": 8}
    assert code2 == 2 and "ambiguous" in err2      # a hand-written host:8 outside an MPI job
    ((code, out, err),) = rank_in([env], "--port-range", port)   # no --hostfile: the job's
    assert code == 0 and json.loads(out)["NODE_RANK"] == 0, err


# The trap for real (two PyTorchJob pods, nprocPerNode 8, no torchrun): tests/k8s/test_pods.py.
