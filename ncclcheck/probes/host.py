"""host: who this node is, and in which container and launcher context it runs.

Sources (relative to the host root):
    proc/sys/kernel/hostname, proc/sys/kernel/osrelease, etc/os-release, proc/cpuinfo,
    proc/meminfo, sys/devices/system/node/, proc/1/cgroup, .dockerenv, run/.containerenv,
    var/run/secrets/kubernetes.io/serviceaccount, etc/podinfo/labels (the pod's labels, a
    downward API volume that ``ncclcheck k8s render`` mounts), and the allow-listed environment.

In a Kubernetes pod, ``launcher`` gains ``pod``: the job API, pod, namespace, node and topology
labels (:func:`ncclcheck.k8s.podenv.pod_facts`); in a PyTorchJob, TrainJob, LWS or JobSet pod
without a process launcher, ``kind`` is that API and rank/world size are the node's (a
PyTorchJob's ``WORLD_SIZE`` counts nodes x ``nprocPerNode``, not processes that run).

Sample content of etc/os-release::

    PRETTY_NAME="Ubuntu 22.04.4 LTS"
    NAME="Ubuntu"
    VERSION_ID="22.04"
"""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict

from ncclcheck.errors import BadInput
from ncclcheck.host.protocol import Host
from ncclcheck.k8s import podenv
from ncclcheck.k8s.launcher import POD_LAUNCHERS, detect_launcher


class HostData(TypedDict):
    """The ``host`` section's data."""

    hostname: str
    kernel: Optional[str]
    os: Optional[str]
    cpu_model: Optional[str]
    cpu_count: Optional[int]
    numa_nodes: list[int]
    memory_total_bytes: Optional[int]
    container: dict[str, Any]    # {"runtime": "docker"|"podman"|"kubernetes"|"containerd"|None, "evidence": [...]}
    launcher: dict[str, Any]     # {"kind": "slurm"|"torchrun"|"mpi"|"deepspeed"|<pod API>|None, ...}


def parse_os_release(text: str) -> Optional[str]:
    """The PRETTY_NAME of an os-release file (else NAME and VERSION_ID).

    Recorded on a DGX H100 (DGX OS 6), first lines::

        PRETTY_NAME="Ubuntu 22.04.3 LTS"
        NAME="Ubuntu"
        VERSION_ID="22.04"

    >>> parse_os_release('PRETTY_NAME="Ubuntu 22.04.3 LTS"\\nNAME="Ubuntu"\\nVERSION_ID="22.04"\\n')
    'Ubuntu 22.04.3 LTS'
    >>> parse_os_release('NAME="Debian GNU/Linux"\\nVERSION_ID="12"\\n')
    'Debian GNU/Linux 12'
    >>> parse_os_release("garbage") is None
    True
    """
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values.get("PRETTY_NAME") or (" ".join(filter(None, [values.get("NAME"),
                                                                values.get("VERSION_ID")]))
                                         or None)


def parse_cpuinfo(text: str) -> tuple[Optional[str], Optional[int]]:
    """The CPU model name and the number of logical CPUs in /proc/cpuinfo.

    Recorded on a DGX H100 (the first two of 224 entries, other fields cut)::

        processor       : 0
        vendor_id       : GenuineIntel
        model name      : Intel(R) Xeon(R) Platinum 8480C

        processor       : 1
        ...

    >>> parse_cpuinfo("processor\\t: 0\\nvendor_id\\t: GenuineIntel\\n"
    ...               "model name\\t: Intel(R) Xeon(R) Platinum 8480C\\n\\n"
    ...               "processor\\t: 1\\nvendor_id\\t: GenuineIntel\\n"
    ...               "model name\\t: Intel(R) Xeon(R) Platinum 8480C\\n")
    ('Intel(R) Xeon(R) Platinum 8480C', 2)
    >>> parse_cpuinfo("garbage")
    (None, None)
    """
    model, count = None, 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            count += 1
        elif key in ("model name", "Model", "cpu model") and model is None:
            model = value.strip() or None
    return model, (count or None)


def parse_meminfo_total(text: str) -> Optional[int]:
    """MemTotal from /proc/meminfo, in bytes.

    Recorded on a DGX H100 (first lines)::

        MemTotal:       2113389444 kB
        MemFree:        1056694722 kB

    >>> parse_meminfo_total("MemTotal:       2113389444 kB\\nMemFree:        1056694722 kB\\n")
    2164110790656
    >>> parse_meminfo_total("garbage") is None
    True
    """
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def parse_node_list(names: list[str]) -> list[int]:
    """NUMA node numbers from the entries of sys/devices/system/node.

    Recorded listing of a two-socket node: ``has_cpu  has_memory  node0  node1  online  possible``.

    >>> parse_node_list(["has_cpu", "has_memory", "node0", "node1", "online", "possible"])
    [0, 1]
    >>> parse_node_list(["node10", "node2", "nodeX"])
    [2, 10]
    """
    return sorted(int(n[4:]) for n in names if re.fullmatch(r"node\d+", n))


def parse_cgroup_runtime(text: str) -> Optional[str]:
    """The container runtime named in /proc/1/cgroup, if any.

    Recorded (ids shortened): a Kubernetes pod on containerd with the systemd cgroup driver, a
    Docker container on cgroup v1, a Slurm job step on bare metal (not a container)::

        0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d.slice/...
        12:pids:/docker/4f1c9a7b2d3e
        0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0

    >>> parse_cgroup_runtime("0::/kubepods.slice/kubepods-burstable.slice/"
    ...                      "kubepods-burstable-pod1a2b3c4d.slice/cri-containerd-9f8e7d.scope")
    'kubernetes'
    >>> parse_cgroup_runtime("12:pids:/docker/4f1c9a7b2d3e\\n0::/system.slice/docker-4f1c.scope")
    'docker'
    >>> print(parse_cgroup_runtime("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0"))
    None
    """
    for pattern, runtime in ((r"kubepods", "kubernetes"), (r"/docker[-/]", "docker"),
                             (r"libpod", "podman"), (r"containerd", "containerd"),
                             (r"/lxc/", "lxc")):
        if re.search(pattern, text):
            return runtime
    return None


def detect_container(host: Host, env: dict[str, str]) -> dict[str, Any]:
    """Which container runtime, with the evidence that says so."""
    evidence: list[str] = []
    runtime = None
    if host.exists(".dockerenv"):
        runtime = "docker"
        evidence.append("/.dockerenv")
    if host.exists("run/.containerenv") or env.get("container") == "podman":
        runtime = "podman"
        evidence.append("/run/.containerenv" if host.exists("run/.containerenv")
                        else "container=podman")
    if env.get("KUBERNETES_SERVICE_HOST") or host.exists(
            "var/run/secrets/kubernetes.io/serviceaccount"):
        runtime = "kubernetes"
        evidence.append("KUBERNETES_SERVICE_HOST" if env.get("KUBERNETES_SERVICE_HOST")
                        else "/var/run/secrets/kubernetes.io")
    cgroup = parse_cgroup_runtime(host.read("proc/1/cgroup") or "")
    if cgroup:
        runtime = runtime or cgroup
        evidence.append(f"/proc/1/cgroup mentions {cgroup}")
    return {"runtime": runtime, "evidence": evidence}


def launcher_facts(env: dict[str, str], pod_labels: str = "",
                   hostname: str = "") -> dict[str, Any]:
    """The launcher (or Slurm allocation) this process runs in, and the rank facts it gives.
    ``kind`` is :func:`ncclcheck.k8s.launcher.detect_launcher`'s, with a Slurm allocation
    outside a step counted; a malformed pod variable gives no kind, never a crash.

    >>> launcher_facts({"SLURM_JOB_ID": "42", "SLURM_NNODES": "4", "SLURM_PROCID": "3"})["kind"]
    'slurm'
    >>> launcher_facts({"TORCHELASTIC_RUN_ID": "x", "RANK": "1", "WORLD_SIZE": "2"})["world_size"]
    2
    >>> launcher_facts({})["kind"] is None
    True
    >>> facts = launcher_facts({"RANK": "1", "WORLD_SIZE": "16", "MASTER_ADDR": "m",
    ...     "PET_NNODES": "2", "PET_NODE_RANK": "1", "POD_NAME": "j-worker-0"})
    >>> facts["kind"], facts["rank"], facts["world_size"], facts["pod"]["pod"]
    ('pytorchjob', 1, 2, 'j-worker-0')
    """
    def num(*names: str) -> Optional[int]:
        for n in names:
            if env.get(n, "").isdigit():
                return int(env[n])
        return None

    try:
        kind = detect_launcher(env, hostname, allocation=True)
    except BadInput:  # a malformed pod variable: no launcher facts, never a crash
        kind = None
    facts = {
        "kind": kind,
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "rank": num("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"),
        "world_size": num("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
        "local_rank": num("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"),
        "nnodes": num("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "CROSS_SIZE"),
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
    }
    try:
        job = podenv.pod_job(env, hostname)
    except BadInput:
        job = None
    if job is not None or env.get("KUBERNETES_SERVICE_HOST"):
        facts["pod"] = podenv.pod_facts(env, hostname, labels=podenv.parse_downward_labels(pod_labels))
    if job and kind in POD_LAUNCHERS:
        facts.update(kind=job["api"], rank=job["node_rank"], world_size=job["nnodes"],
                     nnodes=job["nnodes"], local_rank=0,
                     master_addr=job["master_addr"],
                     master_port=str(job["master_port"]) if job["master_port"] else None)
    return facts


def pod_labels(host: Host, env: dict[str, str]) -> str:
    """The pod's labels file (downward API, ``/etc/podinfo/labels``), read only in a pod."""
    if not env.get("KUBERNETES_SERVICE_HOST") and not any(
            env.get(v) for v in ("K_MPI_JOB_ROLE", "PET_NNODES", "LWS_GROUP_SIZE",
                                 "JOB_COMPLETION_INDEX")):
        return ""
    return host.read("etc/podinfo/labels") or ""


def collect(host: Host, errors: list[str]) -> HostData:
    """Read the node's identity, container and launcher context."""
    env = host.environ()
    hostname = (host.read("proc/sys/kernel/hostname") or host.read("etc/hostname") or "").strip()
    if not hostname:
        errors.append("hostname: proc/sys/kernel/hostname unreadable")
    cpuinfo = host.read("proc/cpuinfo")
    model, count = parse_cpuinfo(cpuinfo) if cpuinfo else (None, None)
    return HostData(
        hostname=hostname or "unknown",
        kernel=(host.read("proc/sys/kernel/osrelease") or "").strip() or None,
        os=parse_os_release(host.read("etc/os-release") or host.read("usr/lib/os-release") or ""),
        cpu_model=model,
        cpu_count=count,
        numa_nodes=parse_node_list(host.listdir("sys/devices/system/node")),
        memory_total_bytes=parse_meminfo_total(host.read("proc/meminfo") or ""),
        container=detect_container(host, env),
        launcher=launcher_facts(env, pod_labels(host, env), hostname),
    )
