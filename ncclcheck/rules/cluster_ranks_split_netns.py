"""cluster-ranks-split-netns: ranks of one machine in separate network namespaces (a pod per GPU)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when facts documents with GPUs share a kernel (boot_id) but not a network namespace."""
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
        findings.append(Finding(
            message=(f"{', '.join(hosts)} run on one machine (boot_id {boot_id[:8]}) in "
                     f"{len(spaces)} network namespaces: NCCL's intra-node P2P passes cuMem "
                     "file descriptors over abstract Unix sockets, which do not cross network "
                     "namespaces, so P2P setup fails or hangs"),
            evidence={"netpath.identity": spaces}, hosts=tuple(hosts)))
    return findings


RULE = Rule(
    id="cluster-ranks-split-netns",
    title="Keep the ranks of one node in one network namespace",
    severity=Severity.ERROR,
    reads=("netpath.identity", "gpu.count"),
    sets=(),
    why=("With cuMem (the default from NCCL 2.19 on recent drivers) intra-node P2P and NVLS "
         "exchange memory handles as POSIX file descriptors over a Unix socket named "
         "/tmp/nccl-socket-<rank>-<hash> in the abstract namespace "
         "(src/os/linux_ipcsocket.cc, NCCL_IPC_USE_ABSTRACT_SOCKET=1 by default); abstract "
         "sockets belong to a network namespace, so ranks in different pods or containers on "
         "one machine cannot reach each other's socket."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/os/linux_ipcsocket.cc",
    fix=("Run all ranks of a machine in one pod/container, or share the network namespace "
         "(hostNetwork: true, --network host or --network container:<first>). If they must stay "
         "apart: NCCL_IPC_USE_ABSTRACT_SOCKET=0 with a /tmp shared between them, or "
         "NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC; loses NVLS)."),
    check=check,
    scope="cluster",
)
