"""gpu-p2p-unsupported: nodes where CUDA P2P does not work between some GPU pairs."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname


def bad_pairs(facts: dict[str, Any]) -> list[str]:
    """GPU pairs whose read or write P2P status is not OK, as ``GPU0-GPU3 read CNS``.

    >>> doc = {"sections": {"gpu": {"status": "ok", "data": {"p2p": {"labels": ["GPU0", "GPU1"],
    ...        "read": [["X", "NS"], ["NS", "X"]], "write": [["X", "OK"], ["OK", "X"]]}}}}}
    >>> bad_pairs(doc)
    ['GPU0-GPU1 read NS']
    """
    p2p = fact(facts, "gpu.p2p") or {}
    labels = p2p.get("labels") or []
    out = []
    for mode in ("read", "write"):
        matrix = p2p.get(mode) or []
        for i, row in enumerate(matrix):
            for j, status in enumerate(row or []):
                if j > i and status not in (None, "X", "OK") and i < len(labels) and j < len(labels):
                    out.append(f"{labels[i]}-{labels[j]} {mode} {status}")
    return out


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire for every node whose GPUs cannot all reach each other with P2P."""
    found = {}
    for node in nodes:
        if fact(node, "gpu.p2p_all_supported") is False:
            found[hostname(node)] = bad_pairs(node) or ["some pairs"]
    if not found:
        return []
    sample = "; ".join(f"{h}: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''}"
                       for h, v in list(found.items())[:6])
    return [Finding(
        message=(f"CUDA P2P is not supported between some GPUs on {len(found)} node(s) "
                 f"({sample}): NCCL copies through host memory (SHM) there, and PCIe ACS or an "
                 "IOMMU can make P2P hang instead"),
        evidence={"gpu.p2p": found}, hosts=tuple(sorted(found)))]


RULE = Rule(
    id="gpu-p2p-unsupported",
    title="Check GPU peer-to-peer support (ACS, IOMMU, topology)",
    severity=Severity.WARNING,
    reads=("gpu.p2p_all_supported", "gpu.p2p?"),
    sets=(),
    why=("NCCL uses the P2P transport (NVLink or PCIe) when CUDA reports peer access "
         "(src/graph/paths.cc); without it traffic goes through /dev/shm and host memory at a "
         "fraction of the bandwidth. PCIe ACS and IOMMU settings cause both 'not supported' and "
         "silent hangs (troubleshooting: PCI Access Control Services)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#pci-access-control-services-acs",
    fix="On bare metal disable ACS on the PCIe switches and use iommu=pt; in VMs enable ATS; "
        "compare nvidia-smi topo -p2p r across nodes.",
    check=check,
    scope="cluster",
)
