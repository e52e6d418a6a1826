"""cluster-ranks-split-netns: ranks of one machine in separate network namespaces (a pod per GPU)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname, version_tuple
from ncclcheck.rules.cluster_nccl_version_mismatch import node_version


#: NCCL_IPC_USE_ABSTRACT_SOCKET exists from 2.29.2 (src/misc/ipcsocket.cc@v2.29.2-1; absent
#: from every earlier tag's src/).
ABSTRACT_SOCKET_SINCE = (2, 29, 2)


def _fix(hosts: list[str], nodes: list[dict[str, Any]]) -> str:
    versions = {node_version(n) for n in nodes if hostname(n) in hosts}
    parsed = [version_tuple(v) for v in versions]
    share = ("Run all ranks of a machine in one pod/container, or share the network namespace "
             "(hostNetwork: true, --network host or --network container:<first>)")
    if parsed and all(p and p >= ABSTRACT_SOCKET_SINCE for p in parsed):
        return (share + ". If they must stay apart: NCCL_IPC_USE_ABSTRACT_SOCKET=0 with a /tmp "
                "shared between them, or NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC; loses NVLS)")
    found = ", ".join(sorted(str(v) for v in versions if v)) or "unknown"
    return (share + ". If they must stay apart: NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC; loses "
            f"NVLS); NCCL_IPC_USE_ABSTRACT_SOCKET=0 exists only from NCCL 2.29.2 (here: {found})")


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Documents with GPUs that share a kernel (boot_id) but not a network namespace: error
    when they share a hostname too (NCCL's host hash, hostname + boot_id, makes them one host
    that then fails its P2P setup), else a warning that NVLink/P2P goes unused."""
    machines: dict[str, dict[str, list[str]]] = {}
    for node in nodes:
        ident = fact(node, "netpath.identity", {})
        if not ident.get("boot_id") or not ident.get("netns") or not fact(node, "gpu.count", 0):
            continue
        machines.setdefault(ident["boot_id"], {}).setdefault(ident["netns"], []).append(
            hostname(node))
    findings = []
    for boot_id, spaces in machines.items():
        if len(spaces) < 2:
            continue
        hosts = sorted(h for names in spaces.values() for h in names)
        owners: dict[str, set[str]] = {}
        for ns, names in spaces.items():
            for name in names:
                owners.setdefault(name, set()).add(ns)
        shared = sorted(h for h, ns in owners.items() if len(ns) > 1)
        apart = sorted(set(hosts) - set(shared))
        if shared:
            findings.append(Finding(
                message=(f"{', '.join(shared)} runs on one machine (boot_id {boot_id[:8]}) in "
                         f"{len(spaces)} network namespaces under one hostname: NCCL's host "
                         "hash (hostname + boot_id) makes them one host, and its intra-node "
                         "P2P passes cuMem file descriptors over abstract Unix sockets, which "
                         "do not cross network namespaces, so P2P setup fails or hangs"),
                fix=_fix(shared, nodes),
                evidence={"netpath.identity": spaces}, hosts=tuple(shared)))
        if len(apart) > 1:
            findings.append(Finding(
                message=(f"{', '.join(apart)} run on one machine (boot_id {boot_id[:8]}) in "
                         f"separate network namespaces with different hostnames: NCCL's host "
                         "hash (hostname + boot_id) differs, so it treats them as separate "
                         "nodes and NVLink/P2P goes unused: their traffic goes through the NIC"),
                fix=("Run all ranks of a machine in one pod/container (or with hostNetwork: "
                     "true / --network host) so NCCL sees them as one node and uses NVLink/P2P"),
                evidence={"netpath.identity": spaces}, hosts=tuple(apart),
                severity=Severity.WARNING))
    return findings


RULE = Rule(
    id="cluster-ranks-split-netns",
    title="Keep the ranks of one node in one network namespace",
    severity=Severity.ERROR,
    reads=("netpath.identity", "gpu.count", "nccl.versions?", "nccl.torch_loads?",
           "nccl.system_loads?"),
    sets=(),
    why=("NCCL tells nodes apart by a host hash of the hostname and the kernel's boot_id "
         "(src/misc/utils.cc@v2.30.7-1 getHostHashOnce): pods with their own hostnames are "
         "separate nodes to it, and it sends between them through the NIC. With one hostname "
         "they are one node: with cuMem (the default from NCCL 2.19 on recent drivers) intra-node P2P and NVLS "
         "exchange memory handles as POSIX file descriptors over a Unix socket named "
         "/tmp/nccl-socket-<rank>-<hash> in the abstract namespace "
         "(src/os/linux_ipcsocket.cc; NCCL_IPC_USE_ABSTRACT_SOCKET, default 1, exists from "
         "2.29.2: src/misc/ipcsocket.cc@v2.29.2-1); abstract "
         "sockets belong to a network namespace, so ranks in different pods or containers on "
         "one machine cannot reach each other's socket."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/os/linux_ipcsocket.cc",
    fix=("Run all ranks of a machine in one pod/container, or share the network namespace "
         "(hostNetwork: true, --network host or --network container:<first>). If they must stay "
         "apart: NCCL_IPC_USE_ABSTRACT_SOCKET=0 (NCCL >= 2.29.2) with a /tmp shared between "
         "them, or NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC; loses NVLS)."),
    check=check,
    scope="cluster",
)
