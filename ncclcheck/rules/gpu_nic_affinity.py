"""gpu-nic-affinity: GPUs whose nearest NIC is across the CPU interconnect (path SYS)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import configured

#: nvidia-smi topo -m words, nearest first (NCCL's PATH_PIX < PXB < PHB < SYS; NODE between).
ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")


def _rank(cell: str | None) -> int:
    for i, word in enumerate(ORDER):
        if cell and cell.startswith(word):
            return i
    return len(ORDER)


def nearest_nic(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``{"GPU0": ("NIC0", "SYS")}``: each GPU's nearest NIC in the topology matrix.

    >>> doc = {"sections": {"gpu": {"status": "ok", "data": {"topology": {
    ...     "labels": ["GPU0", "GPU1", "NIC0"], "nics": {"NIC0": "mlx5_bond_0"},
    ...     "matrix": [["X", "NV12", "SYS"], ["NV12", "X", "NODE"], ["SYS", "NODE", "X"]]}}}}}
    >>> nearest_nic(doc)
    {'GPU0': ('NIC0', 'SYS'), 'GPU1': ('NIC0', 'NODE')}
    """
    topo = fact(facts, "gpu.topology") or {}
    labels, matrix = topo.get("labels") or [], topo.get("matrix") or []
    nics = [j for j, label in enumerate(labels) if label.startswith("NIC")]
    out = {}
    for i, label in enumerate(labels):
        if not label.startswith("GPU") or i >= len(matrix) or not nics:
            continue
        row = matrix[i] or []
        known = [(j, row[j]) for j in nics if j < len(row) and row[j]]
        if known:
            j, cell = min(known, key=lambda jc: _rank(jc[1]))
            out[label] = (labels[j], cell)
    return out


def pxn_relays(facts: dict[str, Any], far: dict[str, tuple[str, str]]) -> dict[str, str]:
    """``{far GPU: NVLink peer}`` for far GPUs that reach a NIC through an NVLink-connected GPU
    on that NIC's PCIe switch (PXN: NCCL relays through the peer, src/graph/paths.cc).

    >>> doc = {"sections": {"gpu": {"status": "ok", "data": {"topology": {
    ...     "labels": ["GPU0", "GPU1", "NIC0"],
    ...     "matrix": [["X", "NV12", "SYS"], ["NV12", "X", "PIX"], ["SYS", "PIX", "X"]]}}}}}
    >>> pxn_relays(doc, {"GPU0": ("NIC0", "SYS")})
    {'GPU0': 'GPU1'}
    """
    topo = fact(facts, "gpu.topology") or {}
    labels, matrix = topo.get("labels") or [], topo.get("matrix") or []
    index = {label: i for i, label in enumerate(labels)}
    out = {}
    for gpu in far:
        row = matrix[index[gpu]] if index.get(gpu, len(matrix)) < len(matrix) else []
        for j, label in enumerate(labels):
            if not label.startswith("GPU") or label == gpu or j >= len(row):
                continue
            peer = matrix[j] if j < len(matrix) else []
            near_nic = [k for k, lab in enumerate(labels) if lab.startswith("NIC")
                        and k < len(peer) and _rank(peer[k]) <= _rank("PXB")]
            if str(row[j] or "").startswith("NV") and near_nic:
                out[gpu] = label
                break
    return out


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when some GPU's nearest RDMA NIC is SYS (across sockets) away and no NVLink peer
    near a NIC relays for it (PXN); not on a VM given its topology by NCCL_TOPO_FILE."""
    if configured(facts, "NCCL_TOPO_FILE") and fact(facts, "platform.virtualized") is not False:
        return []  # the VM's nvidia-smi view is flat; NCCL reads the file's topology
    near = nearest_nic(facts)
    far = {g: v for g, v in near.items() if v[1] == "SYS"}
    relays = pxn_relays(facts, far) if configured(facts, "NCCL_PXN_DISABLE") != "1" else {}
    far = {g: v for g, v in far.items() if g not in relays}
    if not far:
        return []
    names = (fact(facts, "gpu.topology") or {}).get("nics") or {}
    off = {g: v for g, v in near.items() if _rank(v[1]) > _rank("PXB")}
    return [Finding(
        message=(f"{len(far)} of {len(near)} GPUs reach their nearest NIC only across the CPU "
                 "interconnect (SYS): "
                 + ", ".join(f"{g}->{n} ({names.get(n, n)})" for g, (n, _) in sorted(far.items()))
                 + f"; NCCL turns GPUDirect RDMA off beyond PXB by default, so {len(off)} GPUs "
                   "stage network traffic through host memory"),
        fix=("Put a NIC on each GPU's PCIe switch or socket (one rail per GPU), or run the job on "
             "the GPUs near the NIC (CUDA_VISIBLE_DEVICES). Leave NCCL_NET_GDR_LEVEL at its "
             "default unless a bench shows SYS is faster on this platform; keep "
             "NCCL_CROSS_NIC at its default so rings may use the nearer NIC on each node"),
        evidence={"gpu.topology.nearest_nic": {g: f"{n} {c}" for g, (n, c) in near.items()},
                  "pxn_relays": relays},
    )]


RULE = Rule(
    id="gpu-nic-affinity",
    title="Keep each GPU's NIC on its own PCIe switch or socket",
    severity=Severity.WARNING,
    reads=("gpu.topology?", "env.nccl?", "nccl.conf_env?", "platform.virtualized?"),
    sets=(),
    why=("ncclTopoCheckGdr (src/graph/paths.cc) enables GPUDirect RDMA only when the GPU-NIC "
         "path is no longer than NCCL_NET_GDR_LEVEL, PXB by default: across a host bridge "
         "(PHB/NODE) or the CPU interconnect (SYS) the NIC reads GPU memory through the CPU, "
         "slowly or not at all, so NCCL stages through host memory instead. NCCL_CROSS_NIC "
         "(default 2, src/graph/search.cc) lets a ring use different NICs on different nodes, "
         "which is how a far GPU can still use a near NIC elsewhere. PXN (on unless "
         "NCCL_PXN_DISABLE=1, src/graph/paths.cc@v2.30.7-1) sends a far GPU's data over NVLink "
         "to a peer GPU near the NIC, which is then not a loss."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net-gdr-level-formerly-nccl-ib-gdr-level",
    fix="Place NICs near the GPUs (one per PCIe switch), or use the GPUs near the NIC.",
    check=check,
)
