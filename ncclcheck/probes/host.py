"""host: who this node is, and in which container and launcher context it runs.

Sources (relative to the host root):
    proc/sys/kernel/hostname, proc/sys/kernel/osrelease, etc/os-release, proc/cpuinfo,
    proc/meminfo, sys/devices/system/node/, proc/1/cgroup, .dockerenv, run/.containerenv,
    var/run/secrets/kubernetes.io/serviceaccount, and the allow-listed environment.

Sample content of etc/os-release::

    PRETTY_NAME="Ubuntu 22.04.4 LTS"
    NAME="Ubuntu"
    VERSION_ID="22.04"
"""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict

from ncclcheck.host import Host


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
    launcher: dict[str, Any]     # {"kind": "slurm"|"torchrun"|"mpi"|"deepspeed"|None, ...}


def parse_os_release(text: str) -> Optional[str]:
    """The PRETTY_NAME of an os-release file.

    >>> parse_os_release('NAME="Ubuntu"\\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\\n')
    'Ubuntu 22.04.4 LTS'
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

    >>> parse_cpuinfo("processor\\t: 0\\nmodel name\\t: AMD EPYC 7V13 64-Core Processor\\n"
    ...               "processor\\t: 1\\nmodel name\\t: AMD EPYC 7V13 64-Core Processor\\n")
    ('AMD EPYC 7V13 64-Core Processor', 2)
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

    >>> parse_meminfo_total("MemTotal:       2113418660 kB\\nMemFree: 1 kB\\n")
    2164140707840
    """
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def parse_node_list(names: list[str]) -> list[int]:
    """NUMA node numbers from the entries of sys/devices/system/node.

    >>> parse_node_list(["has_cpu", "node1", "node0", "possible", "nodeX"])
    [0, 1]
    """
    return sorted(int(n[4:]) for n in names if re.fullmatch(r"node\d+", n))


def parse_cgroup_runtime(text: str) -> Optional[str]:
    """The container runtime named in /proc/1/cgroup, if any.

    >>> parse_cgroup_runtime("12:pids:/kubepods/burstable/pod1a2b/0f3c")
    'kubernetes'
    >>> parse_cgroup_runtime("0::/system.slice/docker-4f1c.scope")
    'docker'
    >>> parse_cgroup_runtime("0::/init.scope") is None
    True
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


def detect_launcher(env: dict[str, str]) -> dict[str, Any]:
    """The scheduler or launcher whose variables are set, and the rank facts they give.

    >>> detect_launcher({"SLURM_JOB_ID": "42", "SLURM_NNODES": "4", "SLURM_PROCID": "3"})["kind"]
    'slurm'
    >>> detect_launcher({"TORCHELASTIC_RUN_ID": "x", "RANK": "1", "WORLD_SIZE": "2"})["world_size"]
    2
    >>> detect_launcher({})["kind"] is None
    True
    """
    def num(*names: str) -> Optional[int]:
        for n in names:
            if env.get(n, "").isdigit():
                return int(env[n])
        return None

    kind = None
    if "TORCHELASTIC_RUN_ID" in env:
        kind = "torchrun"
    elif "CROSS_RANK" in env or "CROSS_SIZE" in env:
        kind = "deepspeed"
    elif any(k in env for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")):
        kind = "mpi"
    elif "SLURM_JOB_ID" in env:
        kind = "slurm"
    elif "RANK" in env and "WORLD_SIZE" in env:
        kind = "torch.distributed"
    return {
        "kind": kind,
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "rank": num("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"),
        "world_size": num("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
        "local_rank": num("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"),
        "nnodes": num("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "CROSS_SIZE"),
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
    }


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
        launcher=detect_launcher(env),
    )
