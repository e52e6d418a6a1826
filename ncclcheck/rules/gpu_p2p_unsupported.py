"""gpu-p2p-unsupported: GPU pairs NCCL would connect with P2P, but CUDA P2P does not work.

NCCL uses the P2P transport between two GPUs of a node when their path is no farther than
``p2pLevel`` (PXB by default: NVLink, one PCIe switch or several, never across a host bridge)
*and* NVML reports P2P read and write OK (``ncclTopoCheckP2p`` in src/graph/paths.cc). So:

* a PHB, NODE or SYS pair without P2P is normal on PCIe servers: NCCL would not use P2P there
  anyway, and nothing is reported;
* a PIX/PXB pair (or two GPUs on one board) without P2P: NCCL quietly copies through host
  memory (SHM) instead; PCIe ACS or an IOMMU is the usual cause (WARNING);
* an NVLink pair without P2P: NCCL aborts init with 'P2P is disabled between NVLINK connected
  GPUs' (v2.12.10-1 on) unless NCCL_IGNORE_DISABLED_P2P=1 (ERROR).

The path of a pair comes from ``gpu.topology`` (``nvidia-smi topo -m`` words); a pair whose path
is unknown is not judged.
"""

from __future__ import annotations

import re
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname

#: topo -m words of the paths within NCCL's default p2pLevel (PATH_PXB), besides NV<n>.
PCIE_P2P = ("PIX", "PXB", "INT")
_NVLINK = re.compile(r"^NV\d+$")


def pair_paths(facts: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(GPU label, GPU label) -> topo -m word, for the GPU pairs of ``gpu.topology``."""
    topo = fact(facts, "gpu.topology") or {}
    labels = topo.get("labels") or []
    out = {}
    for i, row in enumerate(topo.get("matrix") or []):
        for j, cell in enumerate(row or []):
            if i < len(labels) and j < len(labels) and cell and i != j:
                out[(labels[i], labels[j])] = str(cell)
    return out


def bad_pairs(facts: dict[str, Any]) -> dict[str, list[str]]:
    """Pairs whose read or write P2P status is not OK, by what NCCL does with them:
    ``{"nvlink": [...], "pcie": [...]}`` as ``GPU0-GPU3 read CNS (PXB)``.

    >>> gpus, ok = ["GPU0", "GPU1", "GPU2"], [["X", "OK", "OK"], ["OK", "X", "OK"], ["OK", "OK", "X"]]
    >>> doc = {"sections": {"gpu": {"status": "ok", "data": {
    ...     "p2p": {"labels": gpus, "read": [["X", "NS", "NS"], ["NS", "X", "OK"], ["NS", "OK", "X"]],
    ...             "write": ok},
    ...     "topology": {"labels": gpus, "matrix": [["X", "NV12", "SYS"], ["NV12", "X", "PIX"],
    ...                                             ["SYS", "PIX", "X"]]}}}}}
    >>> bad_pairs(doc)
    {'nvlink': ['GPU0-GPU1 read NS (NV12)'], 'pcie': []}
    """
    p2p = fact(facts, "gpu.p2p") or {}
    labels = p2p.get("labels") or []
    paths = pair_paths(facts)
    out: dict[str, list[str]] = {"nvlink": [], "pcie": []}
    for mode in ("read", "write"):
        for i, row in enumerate(p2p.get(mode) or []):
            for j, status in enumerate(row or []):
                if j <= i or status in (None, "X", "OK") or j >= len(labels) or i >= len(labels):
                    continue
                path = paths.get((labels[i], labels[j]))
                kind = ("nvlink" if path and _NVLINK.match(path) else
                        "pcie" if path in PCIE_P2P else None)
                if kind:
                    out[kind].append(f"{labels[i]}-{labels[j]} {mode} {status} ({path})")
    return out


def _sample(found: dict[str, list[str]]) -> str:
    return "; ".join(f"{h}: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''}"
                     for h, v in list(found.items())[:6])


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """An ERROR for NVLink pairs without P2P, a WARNING for PIX/PXB pairs without it."""
    nvlink: dict[str, list[str]] = {}
    pcie: dict[str, list[str]] = {}
    for node in nodes:
        if fact(node, "gpu.p2p_all_supported") is not False:
            continue
        pairs = bad_pairs(node)
        if pairs["nvlink"]:
            nvlink[hostname(node)] = pairs["nvlink"]
        if pairs["pcie"]:
            pcie[hostname(node)] = pairs["pcie"]
    findings = []
    if nvlink:
        findings.append(Finding(
            message=(f"CUDA P2P is off between NVLink-connected GPUs on {len(nvlink)} node(s) "
                     f"({_sample(nvlink)}): NCCL aborts init with 'P2P is disabled between "
                     "NVLINK connected GPUs'"),
            fix=("A hardware or driver fault: check nvidia-smi nvlink -s and the fabric manager "
                 "(NVSwitch systems), reset or replace the GPUs; NCCL_IGNORE_DISABLED_P2P=1 only "
                 "lets NCCL start without P2P there."),
            severity=Severity.ERROR, evidence={"gpu.p2p": nvlink}, hosts=tuple(sorted(nvlink))))
    if pcie:
        findings.append(Finding(
            message=(f"CUDA P2P is not supported between GPUs under a common PCIe switch on "
                     f"{len(pcie)} node(s) ({_sample(pcie)}): NCCL copies through host memory "
                     "(SHM) there, and PCIe ACS or an IOMMU can make P2P hang instead"),
            evidence={"gpu.p2p": pcie}, hosts=tuple(sorted(pcie))))
    return findings


RULE = Rule(
    id="gpu-p2p-unsupported",
    title="Check GPU peer-to-peer support (ACS, IOMMU, topology)",
    severity=Severity.WARNING,
    reads=("gpu.p2p_all_supported", "gpu.p2p?", "gpu.topology?"),
    sets=(),
    why=("NCCL uses P2P between two GPUs only when their path is within NCCL_P2P_LEVEL (PXB by "
         "default) and NVML reports P2P OK (ncclTopoCheckP2p, src/graph/paths.cc v2.30.7-1); "
         "PHB and SYS pairs without P2P are normal. Under a PCIe switch, missing P2P means "
         "copies through host memory, and PCIe ACS or IOMMU settings cause both 'not "
         "supported' and silent hangs; between NVLink-connected GPUs NCCL refuses to start "
         "('P2P is disabled between NVLINK connected GPUs')."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#pci-access-control-services-acs",
    fix="On bare metal disable ACS on the PCIe switches and use iommu=pt; in VMs enable ATS; "
        "compare nvidia-smi topo -p2p r across nodes.",
    check=check,
    scope="cluster",
)
