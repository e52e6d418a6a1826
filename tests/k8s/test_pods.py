"""The pods run for real: each API's rendered command on the network-namespace cluster's nodes,
with the environment and files that API's controller gives each pod (the variables as
ncclcheck/k8s/podenv.py cites them; the downward-API values the manifest asks for; the MPI
operator's hostfile), and the same results as over ssh. Two nodes, small sweeps: the whole
suite stays short."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.k8s.apis import render
from ncclcheck.k8s.render import RenderOptions

pytest.importorskip("torch")
pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

BIN = str(Path(sys.executable).parent / "ncclcheck")
SWEEP = ["-b", "1K", "-e", "64K", "-f", "8", "-w", "1", "-n", "3", "--timeout", "60"]
IMAGE = "ghcr.io/example/ncclcheck:0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pod_container(api: str, command: str, port: int, args=SWEEP) -> dict:
    """The ncclcheck container of the rendered manifest (2 nodes, 1 GPU each: CPU ranks)."""
    objs = render(RenderOptions(command, api, IMAGE, nodes=2, gpus_per_node=1, port=port,
                                args=list(args)))
    text = json.dumps(objs)
    for obj in objs:
        if obj["kind"] in ("TrainingRuntime", "JobSet", "LeaderWorkerSet", "PyTorchJob"):
            spec = obj["spec"]
            pod = (spec.get("template", {}).get("spec", {}).get("replicatedJobs") or
                   spec.get("replicatedJobs") or [None])[0]
            if pod:
                return pod["template"]["spec"]["template"]["spec"]["containers"][0]
            if "leaderWorkerTemplate" in spec:
                return spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
            return spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    raise AssertionError(text[:300])


def argv_of(container: dict) -> list[str]:
    """The container's command, run here: ncclcheck and torchrun from this environment; LWS's
    keep-alive (``sh -c '"$@"; ...; sleep infinity'``) left out."""
    argv = list(container["command"])
    if argv[:2] == ["sh", "-c"] and "sleep infinity" in argv[2]:
        argv = argv[4:]
    if argv[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    return [BIN if a == "ncclcheck" and i == 0 else a for i, a in enumerate(argv)]


def literal_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def controller_env(api: str, node: int, c, port: int) -> dict[str, str]:
    """What the API's controller (and the manifest's downward API) gives pod ``node``."""
    addr0 = c.addrs[0]
    base = {"POD_NAME": f"ncclcheck-{api}-{node}", "POD_NAMESPACE": "default",
            "NODE_NAME": c.nodes[node].name, "KUBERNETES_SERVICE_HOST": "198.18.255.1"}
    if api == "jobset":   # coordinator annotation -> MASTER_ADDR; job-index label
        return {**base, "JOB_COMPLETION_INDEX": str(node), "JOBSET_JOB_INDEX": "0",
                "MASTER_ADDR": addr0}
    if api == "lws":
        return {**base, "LWS_LEADER_ADDRESS": addr0, "LWS_GROUP_SIZE": "2",
                "LWS_WORKER_INDEX": str(node)}
    if api == "trainjob":
        return {**base, "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(node),
                "PET_MASTER_ADDR": addr0, "PET_MASTER_PORT": str(port)}
    if api == "pytorchjob":
        return {**base, "MASTER_ADDR": addr0, "PET_MASTER_ADDR": addr0,
                "MASTER_PORT": str(port), "PET_MASTER_PORT": str(port), "WORLD_SIZE": "2",
                "RANK": str(node), "PET_NODE_RANK": str(node), "PET_NPROC_PER_NODE": "1",
                "PET_NNODES": "2", "PYTHONUNBUFFERED": "1"}
    raise AssertionError(api)


def run_pods(c, argv_env: list[tuple[list[str], dict]], timeout=180) -> list:
    procs = []
    for node, (argv, env) in enumerate(argv_env):
        procs.append(subprocess.Popen(c.exec_argv(node, argv), env={**os.environ, **env},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=timeout))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


def same_bench(doc: dict, ssh: dict) -> None:
    for key in ("world_size", "nodes", "op", "backend", "wrong_total"):
        assert doc[key] == ssh[key], key
    assert [r["size_bytes"] for r in doc["rows"]] == [r["size_bytes"] for r in ssh["rows"]]


@pytest.fixture(scope="module")
def ssh_bench(make_cluster):
    c = make_cluster(2)
    out = subprocess.run([BIN, "bench", "--hostfile", c.hostfile, "--ssh-config", c.ssh_config,
                          "--nodes", "2", "--procs", "1", *SWEEP, "--json"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    return c, json.loads(out.stdout)


@pytest.mark.parametrize("api", ["jobset", "lws", "trainjob", "pytorchjob"])
def test_bench_in_the_pods_of_each_api_matches_ssh(ssh_bench, api):
    c, ssh = ssh_bench
    port = free_port()
    container = pod_container(api, "bench", port)
    argv = argv_of(container)
    results = run_pods(c, [(argv, {**literal_env(container), **controller_env(api, n, c, port)})
                           for n in range(2)])
    assert [r[0] for r in results] == [0, 0], [r[2][-1500:] for r in results]
    doc = json.loads(results[0][1])
    same_bench(doc, ssh)
    assert doc["launch"]["mode"] == ("torchrun" if api in ("trainjob", "pytorchjob") else api)


def test_pytorchjob_pods_with_nproc_per_node_8_run_ncclcheck_without_torchrun(ssh_bench):
    """The trap: WORLD_SIZE=16 for 2 pods. Each pod is one rank of 2, and nothing hangs."""
    c, ssh = ssh_bench
    port = free_port()
    envs = []
    for n in range(2):
        env = controller_env("pytorchjob", n, c, port)
        env.update(WORLD_SIZE="16", PET_NPROC_PER_NODE="8")
        envs.append(([BIN, "bench", *SWEEP, "--json"], env))
    results = run_pods(c, envs, timeout=150)
    assert [r[0] for r in results] == [0, 0], [r[2][-1500:] for r in results]
    doc = json.loads(results[0][1])
    same_bench(doc, ssh)
    assert doc["launch"]["mode"] == "pytorchjob"


def test_pairwise_in_jobset_pods(ssh_bench):
    c, _ = ssh_bench
    port = free_port()
    container = pod_container("jobset", "pairwise", port, args=["--timeout", "60"])
    results = run_pods(c, [(argv_of(container), {**literal_env(container),
                                                 **controller_env("jobset", n, c, port)})
                           for n in range(2)])
    assert [r[0] for r in results] == [0, 0], [r[2][-1500:] for r in results]
    doc = json.loads(results[0][1])
    assert doc["schema"] == "ncclcheck/pairwise"
    assert sorted(n["host"] for n in doc["nodes"]) == sorted(x.name for x in c.nodes)


def test_probe_in_a_pod_records_the_job_api_pod_and_node(ssh_bench):
    c, _ = ssh_bench
    port = free_port()
    container = pod_container("lws", "probe", port, args=["--only", "host"])
    results = run_pods(c, [(argv_of(container), {**literal_env(container),
                                                 **controller_env("lws", n, c, port)})
                           for n in range(2)])
    assert [r[0] for r in results] == [0, 0], [r[2][-800:] for r in results]
    for n, (_, out, _) in enumerate(results):
        launcher = json.loads(out)["sections"]["host"]["data"]["launcher"]
        assert (launcher["kind"], launcher["rank"], launcher["world_size"]) == ("lws", n, 2)
        assert launcher["pod"]["node"] == c.nodes[n].name
        assert launcher["pod"]["job_api"] == "lws"


@pytest.mark.skipif(not shutil.which("mpirun") and not os.environ.get("CI"),
                    reason="Open MPI not installed (apt-get install openmpi-bin)")
def test_mpijob_launcher_runs_the_rendered_mpirun_on_the_operators_hostfile(ssh_bench, tmp_path):
    """The MPI operator's launcher env: K_MPI_JOB_ROLE, OMPI_MCA_orte_default_hostfile naming
    its hostfile (Open MPI lines, ``host slots=1``); mpirun reaches the workers over ssh."""
    c, ssh = ssh_bench
    port = free_port()
    (job,) = render(RenderOptions("bench", "mpijob", IMAGE, nodes=2, gpus_per_node=1, port=port,
                                  args=SWEEP))
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    argv = list(launcher["command"])
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{a} slots=1\n" for a in c.addrs))
    argv = [a.replace("ncclcheck-bench-worker-0.ncclcheck-bench", c.addrs[0]) for a in argv]
    argv[argv.index("ncclcheck")] = BIN
    argv[1:1] = ["-mca", "plm_rsh_args", f"-F {c.ssh_config}", "-mca", "btl_tcp_if_include",
                 c.links[0]["subnet"], "-mca", "oob_tcp_if_include", c.links[0]["subnet"]]
    env = {**os.environ, "K_MPI_JOB_ROLE": "launcher",
           "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    same_bench(doc, ssh)
    assert doc["launch"]["mode"] == "mpi"


def test_intel_mpi_host_colon_8_hostfile_in_an_mpijob_probes_and_never_hangs(ssh_bench, tmp_path):
    """mpi-operator writes ``host:8`` for Intel MPI: in the launcher pod, probe over its ssh."""
    c, _ = ssh_bench
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{a}:8\n" for a in c.addrs))
    argv = [BIN, "probe", "--hostfile", str(hostfile), "--ssh-config", c.ssh_config, "--only",
            "host", "--json", "--timeout", "60"]
    env = {**os.environ, "K_MPI_JOB_ROLE": "launcher", "I_MPI_HYDRA_HOST_FILE": str(hostfile)}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert len(json.loads(out.stdout)["nodes"]) == 2
    env.pop("K_MPI_JOB_ROLE")
    env.pop("I_MPI_HYDRA_HOST_FILE")
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "ambiguous" in out.stderr


@pytest.mark.skipif(not os.environ.get("NCCLCHECK_K8S_HUNT4"),
                    reason="2.5 min on a loaded 2-core machine: NCCLCHECK_K8S_HUNT4=1 runs it")
def test_four_node_hunt_in_jobset_pods_matches_the_hunt_over_ssh(make_cluster):
    """The hunt in 4 JobSet pods gives the same verdicts, all ok, as the hunt over ssh."""
    c = make_cluster(4)
    args = ["--timeout", "60"]
    ssh = subprocess.run([BIN, "bench", "--pairwise", "--hostfile", c.hostfile, "--ssh-config",
                          c.ssh_config, *args, "--json"], capture_output=True, text=True,
                         timeout=300)
    assert ssh.returncode == 0, ssh.stderr[-1500:]
    port = free_port()
    objs = render(RenderOptions("pairwise", "jobset", IMAGE, nodes=4, gpus_per_node=1,
                                port=port, args=args))
    container = objs[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]
    env = literal_env(container)
    results = run_pods(c, [(argv_of(container),
                            {**env, "POD_NAME": f"p-{n}", "NODE_NAME": c.nodes[n].name,
                             "JOB_COMPLETION_INDEX": str(n), "JOBSET_JOB_INDEX": "0",
                             "MASTER_ADDR": c.addrs[0]}) for n in range(4)], timeout=300)
    assert [r[0] for r in results] == [0] * 4, [r[2][-800:] for r in results]
    pods, over_ssh = json.loads(results[0][1]), json.loads(ssh.stdout)
    # over ssh nodes are named by the hostfile (addresses), in pods by their hostnames
    assert [n["host"] for n in pods["nodes"]] == [x.name for x in c.nodes]
    assert [n["host"] for n in over_ssh["nodes"]] == c.addrs
    assert [n["status"] for n in pods["nodes"]] == [n["status"] for n in over_ssh["nodes"]]
    assert pods["slow_nodes"] == over_ssh["slow_nodes"] == [] and pods["failed"] == []
