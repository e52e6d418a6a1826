"""The pods run for real: each API's rendered command on the network-namespace cluster's nodes,
with the environment and files that API's controller gives each pod (the variables as
ncclcheck/k8s/podenv.py cites them; the downward-API values the manifest asks for; the labels
file and the service account's files in the pod's own mount namespace; the MPI operator's
hostfile), and the same results as over ssh.

The commands are README's, with their defaults: ``k8s render bench --api API --nodes 2`` (one
GPU slot a pod: the namespace nodes have no GPU, so a pod is one CPU rank, as over ssh),
``k8s render probe --api API --nodes 2`` against ``probe --hostfile hosts``, one
``k8s render probe --label-nodes`` pod against a TLS test double of the API server, and the hunt
of ``k8s render pairwise --api API --nodes 4`` against the hunt over ssh (the MPIJob launcher's
``bench --pairwise --hostfile``, the one reference for all). One 4-node cluster serves the
module: the 2-node runs use its first two nodes. The runs start together from one module
fixture, at most ``AT_ONCE`` at a time (they wait on rendezvous and ssh more than on the CPU).
None of them asserts a timing, but the whole module stays ``alone``: its runs start up to 3
benches' ranks at once, and bench's rank 0 waits 15 s (bench/meet.py DEADLINE_S) for the others
after its own torch import, which a run beside other tests missed once (lws, load 5-10). The
hunts' verdicts are timings of the shared CPU: they run after them, one at a time, so no other
run's load makes a pair slow. Each test
then checks what differs between the APIs: how its pods found their node rank, node count and
master. Runs under Intel MPI's or MPICH's mpirun use Hydra installs (:data:`HYDRAS`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import needs_netns, running_alone
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.k8s.apis import render
from ncclcheck.k8s.render import RenderOptions

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

BIN = str(Path(sys.executable).parent / "ncclcheck")
IMAGE = "ghcr.io/example/ncclcheck:0.1"
AT_ONCE = 3
POD_APIS = ("jobset", "lws", "trainjob", "pytorchjob")
#: The APIs whose pods run the 4-node hunt (the MPIJob launcher's runs over ssh, always).
HUNT_APIS = POD_APIS
HAS_MPIRUN = bool(shutil.which("mpirun"))
_PORTS: set[int] = set()


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS:
            _PORTS.add(port)
            return port


def rendered(command: str, api: str, port: int, nodes: int = 2, **kw) -> list[dict]:
    """README's ``k8s render COMMAND --api API --nodes N`` (one GPU slot a pod), no extra args."""
    return render(RenderOptions(command, api, IMAGE, nodes=nodes, gpus_per_node=1, port=port,
                                **kw))


def pod_container(objs: list[dict]) -> dict:
    """The ncclcheck container of a rendered manifest (JobSet, LWS, TrainJob, PyTorchJob)."""
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
    raise AssertionError(json.dumps(objs)[:300])


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


def controller_env(api: str, node: int, c, port: int, nodes: int = 2) -> dict[str, str]:
    """What the API's controller (and the manifest's downward API) gives pod ``node``."""
    addr0 = c.addrs[0]
    base = {"POD_NAME": f"ncclcheck-{api}-{node}", "POD_NAMESPACE": "default",
            "NODE_NAME": c.nodes[node].name, "KUBERNETES_SERVICE_HOST": "198.18.255.1"}
    if api == "jobset":   # coordinator annotation -> MASTER_ADDR; job-index label
        return {**base, "JOB_COMPLETION_INDEX": str(node), "JOBSET_JOB_INDEX": "0",
                "MASTER_ADDR": addr0}
    if api == "lws":
        return {**base, "LWS_LEADER_ADDRESS": addr0, "LWS_GROUP_SIZE": str(nodes),
                "LWS_WORKER_INDEX": str(node)}
    if api == "trainjob":
        return {**base, "PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": "1",
                "PET_NODE_RANK": str(node), "PET_MASTER_ADDR": addr0,
                "PET_MASTER_PORT": str(port)}
    if api == "pytorchjob":
        return {**base, "MASTER_ADDR": addr0, "PET_MASTER_ADDR": addr0,
                "MASTER_PORT": str(port), "PET_MASTER_PORT": str(port),
                "WORLD_SIZE": str(nodes), "RANK": str(node), "PET_NODE_RANK": str(node),
                "PET_NPROC_PER_NODE": "1", "PET_NNODES": str(nodes), "PYTHONUNBUFFERED": "1"}
    raise AssertionError(api)


def run_pods(c, argv_env: list[tuple[list[str], dict]], timeout=400) -> list:
    """Start one process per pod on its node (node i runs pod i); (returncode, out, err)."""
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


def run_here(argv: list[str], env: dict | None = None, timeout=400) -> tuple[int, str, str]:
    out = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, out.stdout, out.stderr


def api_pods(c, api: str, command: str, nodes: int = 2, **kw) -> list:
    port = free_port()
    container = pod_container(rendered(command, api, port, nodes=nodes, **kw))
    argv = argv_of(container)
    return run_pods(c, [(argv, {**literal_env(container),
                                **controller_env(api, n, c, port, nodes)})
                        for n in range(nodes)])


def trap_pods(c) -> list:
    """A PyTorchJob with nprocPerNode 8 whose pods run ncclcheck without torchrun:
    WORLD_SIZE=16 for 2 pods (training-operator envvar.go l.62-64)."""
    port = free_port()
    envs = []
    for n in range(2):
        env = controller_env("pytorchjob", n, c, port)
        env.update(WORLD_SIZE="16", PET_NPROC_PER_NODE="8")
        envs.append(([BIN, "bench", "--json"], env))
    return run_pods(c, envs)


def mpirun_argv(c, launcher: dict, tmp: Path) -> tuple[list[str], dict]:
    """The MPI launcher's mpirun, run here: the operator's hostfile (Open MPI lines,
    ``host slots=1``, the 2 nodes' addresses), its env (K_MPI_JOB_ROLE,
    OMPI_MCA_orte_default_hostfile), and ssh/interface settings for the namespace cluster."""
    hostfile = tmp / "hostfile"
    hostfile.write_text("".join(f"{a} slots=1\n" for a in c.addrs[:2]))
    argv = [a.replace("ncclcheck-bench-worker-0.ncclcheck-bench", c.addrs[0])
            for a in launcher["command"]]
    argv[argv.index("ncclcheck")] = BIN
    argv[1:1] = ["-mca", "plm_rsh_args", f"-F {c.ssh_config}", "-mca", "btl_tcp_if_include",
                 c.links[0]["subnet"], "-mca", "oob_tcp_if_include", c.links[0]["subnet"]]
    return argv, {"K_MPI_JOB_ROLE": "launcher",
                  "OMPI_MCA_orte_default_hostfile": str(hostfile)}


def mpijob_bench(c, tmp: Path):
    """README's MPIJob line: the launcher's rendered mpirun of ``ncclcheck bench``."""
    (job,) = rendered("bench", "mpijob", free_port())
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    argv, env = mpirun_argv(c, launcher, tmp)
    return run_here(argv, env)


def mpijob_rank(c, tmp: Path):
    """``ncclcheck rank`` under the MPIJob launcher's mpirun, once per node (Open MPI)."""
    (job,) = rendered("bench", "mpijob", free_port())
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    argv, env = mpirun_argv(c, launcher, tmp)
    argv = argv[:argv.index(BIN) + 1] + ["rank", "--json"]
    return run_here(argv, env, timeout=120)


#: Hydra installs (the ``mpirun`` of Intel MPI and MPICH) to run ``rank`` under:
#: ``NCCLCHECK_TEST_HYDRA="mpich=PREFIX,intel=PREFIX"``, else the wheels scripts/install-test-deps
#: puts in ``.hydra`` (``pip install --prefix .hydra mpich``) and ``.hydra-intel`` (Intel MPI's
#: runtime, ``impi-rt``).
HYDRAS = dict(kv.split("=", 1) for kv in os.environ.get("NCCLCHECK_TEST_HYDRA", "").split(",")
              if "=" in kv) or {"mpich": str(Path(__file__).parents[2] / ".hydra"),
                                "intel": str(Path(__file__).parents[2] / ".hydra-intel")}


def hydra_rank(c, impl: str, tmp: Path):
    """README's ``mpirun -ppn 1 ncclcheck rank`` with Intel MPI's or MPICH's mpirun (Hydra), in an
    MPIJob launcher: the operator's env for that implementation (mpi-operator v0.8.0
    l.196-214: the hostfile named by I_MPI_HYDRA_HOST_FILE or HYDRA_HOST_FILE, its lines
    ``host:8`` for slotsPerWorker 8, l.1325-1336) and no MASTER_ADDR anywhere."""
    prefix = HYDRAS[impl]
    hostfile = tmp / "hostfile"
    hostfile.write_text("".join(f"{a}:8\n" for a in c.addrs[:2]))
    # for the namespace cluster: ssh's config, and the address the proxies call back (this
    # machine's name resolves nowhere there): -localhost (MPICH), the bridge's (Intel MPI)
    ssh = f"-F {c.ssh_config}"
    env = {"K_MPI_JOB_ROLE": "launcher", "PATH": f"{prefix}/bin:{os.environ['PATH']}"}
    argv = [f"{prefix}/bin/mpirun", "-n", "2", "-ppn", "1", BIN, "rank", "--json"]
    if impl == "intel":
        env.update(I_MPI_HYDRA_HOST_FILE=str(hostfile), I_MPI_PERHOST="8", I_MPI_ROOT=prefix,
                   I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=ssh,
                   I_MPI_HYDRA_IFACE=c.links[0]["bridge"])
    else:  # the operator sets HYDRA_LAUNCH_EXTRA_ARGS; MPICH's Hydra reads HYDRA_LAUNCHER_...
        env.update(HYDRA_HOST_FILE=str(hostfile), HYDRA_LAUNCHER_EXTRA_ARGS=ssh)
        argv[1:1] = ["-localhost", c.gateway]
    return run_here(argv, env, timeout=120)


def mpijob_launcher(c, command: str, tmp: Path, hostfile_lines: list[str],
                    env: dict[str, str], nodes: int = 2, timeout: float = 200,
                    ssh_config: str | None = None):
    """The MPIJob launcher's rendered command for probe or the hunt (over ssh, on the
    operator's hostfile, here written with ``hostfile_lines``), with the launcher's env."""
    (job,) = rendered(command, "mpijob", free_port(), nodes=nodes)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    hostfile = tmp / "hostfile"
    hostfile.write_text("".join(f"{line}\n" for line in hostfile_lines))
    argv = [str(hostfile) if a == "/etc/mpi/hostfile" else a for a in launcher["command"]]
    argv = [BIN, *argv[1:], "--ssh-config", ssh_config or c.ssh_config]
    return run_here(argv, {k: v.replace("/etc/mpi/hostfile", str(hostfile))
                           for k, v in env.items()}, timeout=timeout)


def kubelet_expand(arg: str, env: dict[str, str]) -> str:
    """``$(VAR)`` in a container's command, as the kubelet expands it from the container's env
    (an unknown name stays as written)."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), arg)


WORKER_PORT = 2222


def listening(addr: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((addr, port)) == 0


@contextlib.contextmanager
def worker_sshds(c, command: str, tmp: Path, nodes: int = 2):
    """The MPIJob workers: each node runs the rendered worker command (its sshd, with the
    ``$(VAR)``s the kubelet expands from the env the manifest and the operator give worker i:
    downward API, ``K_MPI_JOB_ROLE=worker``) in the pod's filesystem (its labels file), on
    port WORKER_PORT with the cluster's keys. Yields an ssh_config that reaches them."""
    (job,) = rendered(command, "mpijob", free_port(), nodes=nodes)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    procs = []
    try:
        for n in range(nodes):
            env = {"POD_NAME": f"{job['metadata']['name']}-worker-{n}", "POD_NAMESPACE": "default",
                   "NODE_NAME": c.nodes[n].name, "K_MPI_JOB_ROLE": "worker"}
            scratch = pod_files(tmp / f"worker{n}", pod_labels("mpijob", n))
            argv = [kubelet_expand(a, env) for a in worker["command"]] + [
                "-f", str(c.state_dir / "sshd_config"), "-p", str(WORKER_PORT), "-o",
                f"PidFile={scratch}/sshd.pid"]
            with open(tmp / f"worker{n}.log", "ab") as log:
                procs.append(subprocess.Popen(c.exec_argv(n, in_pod_fs(scratch, argv)),
                                              stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                              start_new_session=True))
        end = time.monotonic() + 20
        for n, proc in enumerate(procs):
            while not listening(c.addrs[n], WORKER_PORT):
                assert proc.poll() is None and time.monotonic() < end, (
                    tmp / f"worker{n}.log").read_text()[-800:]
                time.sleep(0.05)
        config = tmp / "ssh_config"
        config.write_text(Path(c.ssh_config).read_text().replace(
            "    Port 22\n", f"    Port {WORKER_PORT}\n"))
        yield str(config)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def intel_mpi_probe(c, tmp: Path):
    """The MPIJob probe launcher's command on an Intel MPI hostfile (``host:8``, mpi-operator
    v0.8.0 l.1325) named by I_MPI_HYDRA_HOST_FILE, over ssh to the workers' rendered sshd; then
    the same file by hand: refused."""
    lines = [f"{a}:8" for a in c.addrs[:2]]
    with worker_sshds(c, "probe", tmp) as config:
        inside = mpijob_launcher(c, "probe", tmp, lines, {
            "K_MPI_JOB_ROLE": "launcher", "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile"},
            ssh_config=config)
    by_hand = mpijob_launcher(c, "probe", tmp, lines, {"K_MPI_JOB_ROLE": "",
                                                       "I_MPI_HYDRA_HOST_FILE": ""}, timeout=60)
    return inside, by_hand


def mpijob_hunt(c, tmp: Path):
    """The MPIJob hunt as rendered: its launcher over ssh on the operator's Open MPI hostfile."""
    return mpijob_launcher(c, "pairwise", tmp, [f"{a} slots=1" for a in c.addrs], {
        "K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"},
        nodes=4, timeout=400)


#: The pod's own filesystem, in a private mount namespace on its node: /etc and /run get an
#: overlay whose upper layer holds what the kubelet mounts (the downward API's labels at
#: /etc/podinfo, the service account's token, ca.crt and namespace under
#: /var/run/secrets/kubernetes.io/serviceaccount), keeping the node's /etc/hosts. /tmp stays the
#: node's (the test's own TMPDIR is the pod's scratch): a tmpfs there would hide a checkout or
#: venv under /tmp, as CI's is. Nothing reaches the machine's filesystem.
POD_FS = """set -e
s=$1; shift
cp /etc/hosts "$s/etc.u/hosts"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$s/etc.u,workdir=$s/etc.w" /etc
mount -t overlay overlay -o "lowerdir=/run,upperdir=$s/run.u,workdir=$s/run.w" /run
exec "$@"
"""
SA_DIR = "secrets/kubernetes.io/serviceaccount"   # under /run (= /var/run)


def pod_files(tmp: Path, labels: dict[str, str], account: dict[str, str] | None = None) -> Path:
    """A scratch folder with the overlays' layers: the labels file (one ``key="value"`` a
    line, as the kubelet writes it) and, given, the service account's files."""
    for top in ("etc.u/podinfo", "etc.w", "run.u", "run.w"):
        (tmp / top).mkdir(parents=True, exist_ok=True)
    (tmp / "etc.u/podinfo/labels").write_text(
        "".join(f'{k}="{v}"\n' for k, v in sorted(labels.items())))
    if account:
        (tmp / "run.u" / SA_DIR).mkdir(parents=True)
        for name, text in account.items():
            (tmp / "run.u" / SA_DIR / name).write_text(text)
    return tmp


def in_pod_fs(scratch: Path, argv: list[str]) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", POD_FS, "sh",
            str(scratch), *argv]


#: Pod labels the probes read back: the manifest's own and a topology label of the node's zone.
def pod_labels(api: str, node: int) -> dict[str, str]:
    return {"app.kubernetes.io/name": "ncclcheck", "app.kubernetes.io/component": "probe",
            "topology.kubernetes.io/zone": f"zone-{node % 2}", "ncclcheck-test/api": api}


def probe_pods(c, api: str, tmp: Path) -> list:
    """README's ``k8s render probe --api API --nodes 2`` in each pod, with the labels file."""
    port = free_port()
    container = pod_container(rendered("probe", api, port))
    argv = argv_of(container)
    return run_pods(c, [(in_pod_fs(pod_files(tmp / f"pod{n}", pod_labels(api, n)), argv),
                         {**literal_env(container), **controller_env(api, n, c, port)})
                        for n in range(2)])


def probe_ssh(c, out: Path):
    """README: ncclcheck probe --hostfile hosts -o cluster.json, on the pods' two nodes."""
    return run_here([BIN, "probe", "--hostfile", c.hostfile, "--nodes", "2", "--ssh-config",
                     c.ssh_config, "-o", str(out)], timeout=200)


def label_pod(c, tmp: Path):
    """``k8s render probe --api jobset --nodes 1 --label-nodes`` in one pod: the probe, then
    ``k8s label`` with the in-cluster config the pod has (KUBERNETES_SERVICE_HOST/PORT, the
    service account's token and CA), against a TLS test double of the API server on the
    namespace cluster's root side. (the requests, (returncode, out, err))."""
    from fakeapi import FakeAPI, self_signed

    cert, key = self_signed(tmp, c.gateway)
    api = FakeAPI([c.nodes[0].name], host=c.gateway, cert=cert, key=key)
    try:
        port = free_port()
        container = pod_container(rendered("probe", "jobset", port, nodes=1, label_nodes=True))
        argv = argv_of(container)
        account = {"token": "pod-token-7\n", "ca.crt": Path(cert).read_text(),
                   "namespace": "default"}
        env = {**literal_env(container), **controller_env("jobset", 0, c, port, nodes=1),
               "KUBERNETES_SERVICE_HOST": c.gateway, "KUBERNETES_SERVICE_PORT": str(api.port),
               "PATH": f"{Path(BIN).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        scratch = pod_files(tmp / "pod", pod_labels("jobset", 0), account)
        (out,) = run_pods(c, [(in_pod_fs(scratch, argv), env)], timeout=200)
        return list(api.requests), out
    finally:
        api.close()


@contextlib.contextmanager
def pods_tmpdir(tmp: Path):
    """The pods' processes take this environment: a module fixture runs before conftest's
    per-test TMPDIR, and torchrun leaves torchelastic_* folders in the TMPDIR it gets."""
    (tmp / "tmp").mkdir()
    saved_tmpdir = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp / "tmp")
    try:
        yield
    finally:
        if saved_tmpdir is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_tmpdir


@pytest.fixture(scope="module")
def runs(make_cluster, tmp_path_factory):
    """Every run of the module but the hunts, started together on one 4-node cluster;
    name -> result (or the exception it raised)."""
    c = make_cluster(4)
    tmp = tmp_path_factory.mktemp("pods")
    ssh_out = tmp / "bench.json"
    with pods_tmpdir(tmp):
        return _run_all(c, tmp, ssh_out, tmp_path_factory)


def _run_all(c, tmp, ssh_out, tmp_path_factory):
    jobs = {
        # README: ncclcheck bench --nodes 2 --hostfile hosts --json -o bench.json
        "ssh": lambda: run_here([BIN, "bench", "--nodes", "2", "--hostfile", c.hostfile,
                                 "--ssh-config", c.ssh_config, "--json", "-o", str(ssh_out)]),
        **{api: (lambda api=api: api_pods(c, api, "bench")) for api in POD_APIS},
        "trap": lambda: trap_pods(c),
        "probe-ssh": lambda: probe_ssh(c, tmp / "cluster.json"),
        **{f"probe-{api}": (lambda api=api: probe_pods(c, api, tmp_path_factory.mktemp(api)))
           for api in POD_APIS},
        "intel-probe": lambda: intel_mpi_probe(c, tmp_path_factory.mktemp("intel")),
        "label": lambda: label_pod(c, tmp_path_factory.mktemp("label")),
    }
    for impl in HYDRAS:
        if Path(HYDRAS[impl], "bin", "mpirun").exists():
            jobs[f"hydra-{impl}"] = (lambda impl=impl: hydra_rank(
                c, impl, tmp_path_factory.mktemp(impl)))
    if HAS_MPIRUN:
        jobs["mpijob"] = lambda: mpijob_bench(c, tmp_path_factory.mktemp("mpijob"))
        jobs["mpijob-rank"] = lambda: mpijob_rank(c, tmp_path_factory.mktemp("mpirank"))
    results: dict = {}
    with ThreadPoolExecutor(AT_ONCE) as pool:
        list(pool.map(lambda name: guarded(jobs, name, results), jobs))
    results["ssh-doc"] = json.loads(ssh_out.read_text()) if ssh_out.exists() else None
    cluster = tmp / "cluster.json"
    results["probe-ssh-doc"] = json.loads(cluster.read_text()) if cluster.exists() else None
    return c, results


def guarded(jobs: dict, name: str, results: dict) -> None:
    """``results[name]``: what job ``name`` returned, or the exception it raised (the test that
    reads it fails with it)."""
    started = time.monotonic()
    try:
        results[name] = jobs[name]()
    except Exception as exc:  # noqa: BLE001 - the test that reads it fails with it
        results[name] = exc
    print(f"test_pods: {name} took {time.monotonic() - started:.1f} s", file=sys.stderr)


@pytest.fixture(scope="module")
def hunts(make_cluster, tmp_path_factory):
    """The 4-node hunts, one at a time, with nothing else running on the machine (only the
    hunts' tests are marked ``alone``: a hunt's verdicts are timings of the shared CPU, where
    every other run of the module asserts none and runs beside other tests). The reference
    over ssh is the MPIJob launcher's, README's ``bench --pairwise --hostfile`` on the
    operator's hostfile: one hunt over ssh for all."""
    assert running_alone(), "the hunts are timings: set up only by a test marked alone"
    c = make_cluster(4)
    jobs = {"hunt-mpijob": lambda: mpijob_hunt(c, tmp_path_factory.mktemp("mpihunt")),
            "hunt-jobset": lambda: api_pods(c, "jobset", "pairwise", nodes=4, host_network=True),
            **{f"hunt-{api}": (lambda api=api: api_pods(c, api, "pairwise", nodes=4))
               for api in HUNT_APIS if api != "jobset"}}
    results: dict = {}
    with pods_tmpdir(tmp_path_factory.mktemp("hunts")):
        for name in jobs:
            guarded(jobs, name, results)
    return c, results


def result(runs, name):
    c, results = runs
    got = results[name]
    if isinstance(got, BaseException):
        raise got
    return c, got, results


def all_ok(pods: list) -> None:
    assert [r[0] for r in pods] == [0] * len(pods), [r[2][-1500:] for r in pods]


def same_bench(doc: dict, ssh: dict) -> None:
    for key in ("world_size", "nodes", "op", "backend", "wrong_total", "sweep"):
        assert doc[key] == ssh[key], key
    assert [r["size_bytes"] for r in doc["rows"]] == [r["size_bytes"] for r in ssh["rows"]]


def ssh_doc(results) -> dict:
    code, _, err = results["ssh"] if not isinstance(results["ssh"], BaseException) else (1, "", "")
    assert code == 0 and results["ssh-doc"], err[-2000:]
    return results["ssh-doc"]


def test_bench_over_ssh_runs_the_default_sweep_over_gloo(runs):
    """The reference: README's line, with bench's defaults (gloo: 8 B to 8 MiB)."""
    _, _, results = result(runs, "ssh")
    doc = ssh_doc(results)
    assert (doc["world_size"], doc["backend"], doc["wrong_total"]) == (2, "gloo", 0)
    assert [r["size_bytes"] for r in doc["rows"]] == [8 << i for i in range(21)]


@pytest.mark.parametrize("api", POD_APIS)
def test_bench_in_the_pods_of_each_api_matches_ssh(runs, api):
    c, pods, results = result(runs, api)
    all_ok(pods)
    doc = json.loads(pods[0][1])
    same_bench(doc, ssh_doc(results))
    # what differs: plain pods read their API's variables; TrainJob and PyTorchJob run torchrun,
    # which reads PET_* (TrainJob has no MASTER_ADDR, RANK or WORLD_SIZE of its own)
    assert doc["launch"]["mode"] == ("torchrun" if api in ("trainjob", "pytorchjob") else api)
    assert doc["launch"]["master_addr"] == c.addrs[0]
    assert pods[1][1].strip() == ""          # rank 0 prints the document, node 1 nothing


def test_pytorchjob_pods_with_nproc_per_node_8_run_ncclcheck_without_torchrun(runs):
    """The trap: WORLD_SIZE=16 for 2 pods. Each pod is one rank of 2, and nothing hangs."""
    _, pods, results = result(runs, "trap")
    all_ok(pods)
    doc = json.loads(pods[0][1])
    same_bench(doc, ssh_doc(results))
    assert doc["launch"]["mode"] == "pytorchjob"


#: What a pod's probe sees of its pod and no probe over ssh can: the launcher facts, the
#: container runtime (kubernetes: KUBERNETES_SERVICE_HOST), the rendezvous address the API
#: gives (``netpath.resolve``'s ``master_addr``), and the allow-listed environment (the
#: controller's variables are the pod's env).
POD_ONLY = {("host", "launcher"), ("host", "container")}


def comparable(facts: dict) -> dict:
    """A facts document without what differs by who started the process: :data:`POD_ONLY`, the
    ``env`` section, the rendezvous address, the first entry of python's ``sys.path`` (the
    console script's folder in a pod, ssh's working folder for ``python -m``), and the free
    bytes of /dev/shm (a moment's use: the benches running beside the probes use it)."""
    out = {}
    for name, section in facts["sections"].items():
        if name == "env":
            continue
        data = {k: v for k, v in (section.get("data") or {}).items()
                if (name, k) not in POD_ONLY}
        if name == "netpath" and isinstance(data.get("resolve"), dict):
            data["resolve"] = {k: v for k, v in data["resolve"].items()
                               if k not in ("master_addr", "master_addrs")}
        if name == "limits" and isinstance(data.get("shm"), dict):
            data["shm"] = {k: v for k, v in data["shm"].items() if k != "free_bytes"}
        if name == "nccl" and isinstance(data.get("python"), dict):
            data["python"] = {**data["python"], "sys_path": data["python"]["sys_path"][1:]}
        out[name] = {"status": section.get("status"), "data": data}
    return out


def ssh_facts(results) -> list[dict]:
    got = results["probe-ssh"]
    code, _, err = got if not isinstance(got, BaseException) else (1, "", repr(got))
    assert code == 0 and results["probe-ssh-doc"], err[-2000:]
    return results["probe-ssh-doc"]["nodes"]


@pytest.mark.parametrize("api", POD_APIS)
def test_probe_in_the_pods_of_each_api_matches_ssh_and_names_the_pod(runs, api):
    """README's ``k8s render probe --api API`` in each pod, with the env and the labels file the
    pod gets: the same facts as ``probe --hostfile`` over ssh on the same nodes, but for the
    launcher facts, which name the API, the node rank, the pod, its node and topology labels."""
    c, pods, results = result(runs, f"probe-{api}")
    all_ok(pods)
    over_ssh = ssh_facts(results)
    for n, (_, out, _) in enumerate(pods):
        facts = json.loads(out)
        assert comparable(facts) == comparable(over_ssh[n]), (api, n)
        launcher = facts["sections"]["host"]["data"]["launcher"]
        assert (launcher["kind"], launcher["rank"], launcher["world_size"]) == (api, n, 2)
        assert launcher["pod"] == {"job_api": api, "pod": f"ncclcheck-{api}-{n}",
                                   "namespace": "default", "node": c.nodes[n].name,
                                   "topology": {"topology.kubernetes.io/zone": f"zone-{n % 2}"}}
        ssh_launcher = over_ssh[n]["sections"]["host"]["data"]["launcher"]
        assert ssh_launcher["kind"] is None and "pod" not in ssh_launcher


def test_mpijob_probe_launcher_matches_ssh_and_names_each_workers_pod(runs):
    """The MPIJob probe is its launcher's ``probe --hostfile /etc/mpi/hostfile`` over ssh to
    the workers' rendered sshd: the same nodes' facts as probe over ssh from outside, and the
    launcher facts of each worker name the API, its pod, node and topology labels (its sshd's
    ``SetEnv``), as the other APIs' pods do; no rank (mpirun gives ranks)."""
    c, (inside, _), results = result(runs, "intel-probe")
    assert inside[0] == 0, inside[2][-1500:]
    got = json.loads(inside[1])["nodes"]
    assert [comparable(f) for f in got] == [comparable(f) for f in ssh_facts(results)]
    for n, facts in enumerate(got):
        launcher = facts["sections"]["host"]["data"]["launcher"]
        assert launcher["kind"] is None and launcher["rank"] is None
        assert launcher["pod"] == {"job_api": "mpijob", "pod": f"ncclcheck-probe-worker-{n}",
                                   "namespace": "default", "node": c.nodes[n].name,
                                   "topology": {"topology.kubernetes.io/zone": f"zone-{n % 2}"}}


def test_label_nodes_in_a_pod_patches_its_node_with_the_in_cluster_config(runs, tmp_path):
    """``k8s render probe --label-nodes`` in one pod: after the probe, ``k8s label`` finds the
    API server, token and CA where the pod has them (KUBERNETES_SERVICE_HOST/PORT, the service
    account's files), checks the server's certificate, and sends one merge patch for the pod's
    node, the body ``k8s label --dry-run`` prints for the same document."""
    c, (requests, (code, out, err)), _ = result(runs, "label")
    assert code == 0, err[-1500:]
    text = out[:out.rindex("}") + 1]          # the probe's document, then label's line
    facts = json.loads(text)
    worst = max([{"warning": 1, "error": 2}.get(f["severity"], 0)
                 for f in facts["findings"]], default=0)
    want = {"metadata": {"labels": {"ncclcheck.io/probe": ("ok", "warning", "error")[worst]}}}
    assert requests == [("PATCH", f"/api/v1/nodes/{c.nodes[0].name}",
                         "application/merge-patch+json", "Bearer pod-token-7", want)]
    doc = tmp_path / "facts.json"
    doc.write_text(text)
    dry = run_here([BIN, "k8s", "label", str(doc), "--dry-run"], timeout=60)
    assert dry[1].splitlines()[1] == json.dumps(want, sort_keys=True)


def test_intel_mpi_host_colon_8_hostfile_in_an_mpijob_probes_and_never_hangs(runs):
    """mpi-operator writes ``host:8`` for Intel MPI: the launcher's probe reads it as slots and
    probes both workers over ssh; the same file outside an MPI job is refused, exit 2."""
    _, (inside, by_hand), _ = result(runs, "intel-probe")
    assert inside[0] == 0, inside[2][-1500:]
    assert len(json.loads(inside[1])["nodes"]) == 2
    assert by_hand[0] == 2 and "ambiguous" in by_hand[2]


@pytest.mark.skipif(not HAS_MPIRUN and not os.environ.get("CI"),
                    reason="Open MPI not installed (apt-get install openmpi-bin)")
def test_mpijob_launcher_runs_the_rendered_mpirun_on_the_operators_hostfile(runs):
    """The MPI operator's launcher env: K_MPI_JOB_ROLE, OMPI_MCA_orte_default_hostfile naming
    its hostfile (Open MPI lines, ``host slots=1``); mpirun reaches the workers over ssh."""
    _, (code, out, err), results = result(runs, "mpijob")
    assert code == 0, err[-2000:]
    doc = json.loads(out)
    same_bench(doc, ssh_doc(results))
    assert doc["launch"]["mode"] == "mpi"


@pytest.mark.skipif(not HAS_MPIRUN and not os.environ.get("CI"),
                    reason="Open MPI not installed (apt-get install openmpi-bin)")
def test_rank_under_the_mpijob_launchers_mpirun_gives_each_node_its_rank(runs):
    """``mpirun --map-by ppr:1:node ncclcheck rank``: each worker its node rank, and rank 0's
    address learned over MPI as bench learns it (no MASTER_ADDR given)."""
    c, (code, out, err), _ = result(runs, "mpijob-rank")
    assert code == 0, err[-2000:]
    values = sorted((json.loads(line) for line in out.splitlines() if line.startswith("{")),
                    key=lambda v: v["NODE_RANK"])
    assert [(v["NNODES"], v["NODE_RANK"], v["MASTER_ADDR"]) for v in values] == [
        (2, 0, c.addrs[0]), (2, 1, c.addrs[0])]
    assert values[0]["MASTER_PORT"] == values[1]["MASTER_PORT"]


@pytest.mark.parametrize("impl", ["mpich", "intel"])
def test_rank_under_hydras_mpirun_in_an_mpijob_learns_rank_0_over_mpi(runs, impl):
    """``mpirun -n 2 -ppn 1 ncclcheck rank`` under Intel MPI's or MPICH's mpirun (Hydra), with
    the MPIJob launcher's ``host:8`` hostfile and no MASTER_ADDR: each node its rank, both the
    same rank-0 address, which rank 0 told over MPI (MPICH ABI, ncclcheck/bench/mpiaddr.py);
    before, rank stopped with "mpirun -genv MASTER_ADDR HOST". Never hangs (120 s at most)."""
    if f"hydra-{impl}" not in runs[1]:
        if os.environ.get("CI"):
            pytest.fail(f"{impl}'s Hydra is not in {HYDRAS.get(impl)} (scripts/install-test-deps)")
        pytest.skip(f"no {impl} Hydra (NCCLCHECK_TEST_HYDRA={impl}=PREFIX)")
    c, (code, out, err), _ = result(runs, f"hydra-{impl}")
    assert code == 0, err[-2000:]
    values = sorted((json.loads(line) for line in out.splitlines() if line.startswith("{")),
                    key=lambda v: v["NODE_RANK"])
    assert [(v["NNODES"], v["NODE_RANK"], v["MASTER_ADDR"]) for v in values] == [
        (2, 0, c.addrs[0]), (2, 1, c.addrs[0])]
    assert values[0]["MASTER_PORT"] == values[1]["MASTER_PORT"]


def hunt_over_ssh(results) -> dict:
    """The hunt over ssh every pod hunt is held against: the MPIJob launcher's."""
    got = results["hunt-mpijob"]
    code, out, err = got if not isinstance(got, BaseException) else (1, "", repr(got))
    assert code == 0, err[-1500:]
    return json.loads(out)


@pytest.mark.alone
def test_four_node_hunt_of_the_mpijob_launcher_is_the_hunt_over_ssh(hunts):
    """The MPIJob hunt as rendered: its launcher's ``bench --pairwise --hostfile
    /etc/mpi/hostfile --nodes 4`` over ssh to the workers (README's hunt over ssh, on the
    operator's Open MPI hostfile), with the hunt's defaults: every node ok, named as the
    hostfile names it."""
    c, _, results = result(hunts, "hunt-mpijob")
    doc = hunt_over_ssh(results)
    assert [n["host"] for n in doc["nodes"]] == c.addrs
    assert [n["status"] for n in doc["nodes"]] == ["ok"] * 4
    assert doc["slow_nodes"] == [] and doc["failed"] == []


@pytest.mark.alone
@pytest.mark.parametrize("api", HUNT_APIS)
def test_four_node_hunt_in_the_pods_of_each_api_matches_the_hunt_over_ssh(hunts, api):
    """README's hunt (``k8s render pairwise --api API --nodes 4``; JobSet's with
    ``--host-network``) in 4 pods gives the same verdicts, all ok, as the hunt over ssh, both
    with the hunt's defaults."""
    c, pods, results = result(hunts, f"hunt-{api}")
    over_ssh = hunt_over_ssh(results)
    all_ok(pods)
    in_pods = json.loads(pods[0][1])
    # over ssh nodes are named by the hostfile (addresses), in pods by their hostnames
    assert [n["host"] for n in in_pods["nodes"]] == [x.name for x in c.nodes]
    assert [n["status"] for n in in_pods["nodes"]] == [n["status"] for n in over_ssh["nodes"]]
    assert in_pods["slow_nodes"] == over_ssh["slow_nodes"] == [] and in_pods["failed"] == []
    assert in_pods["schema"] == over_ssh["schema"] == "ncclcheck/pairwise"
    assert all(p[1].strip() == "" for p in pods[1:])   # rank 0 prints the document
