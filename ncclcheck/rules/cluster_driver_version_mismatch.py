"""cluster-driver-version-mismatch: nodes run different NVIDIA driver versions."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.cluster_nccl_version_mismatch import outliers


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when the driver version differs between nodes."""
    found = {hostname(n): fact(n, "gpu.driver_version") for n in nodes}
    known = {h: v for h, v in found.items() if v}
    if len(set(known.values())) < 2:
        return []
    common, odd = outliers(known)
    listing = ", ".join(f"{h}={known[h]}" for h in odd[:8])
    return [Finding(
        message=(f"NVIDIA driver versions differ: most nodes run {common}, but {listing}"
                 f"{' and more' if len(odd) > 8 else ''}"),
        evidence={"gpu.driver_version": known}, hosts=tuple(odd))]


RULE = Rule(
    id="cluster-driver-version-mismatch",
    title="Run one NVIDIA driver version on every node",
    severity=Severity.WARNING,
    reads=("gpu.driver_version",),
    sets=(),
    why=("The driver decides which CUDA features NCCL can use on each node (cuMem, DMA-BUF, "
         "NVLS, the CUDA version it supports); nodes on different drivers take different code "
         "paths, and NCCL's troubleshooting starts by making the software stack identical."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",
    fix="Install the same driver (and fabric manager) version on every node.",
    check=check,
    scope="cluster",
)
