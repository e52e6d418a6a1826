"""cluster-driver-version-mismatch: nodes run different NVIDIA driver versions."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import mismatch


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when the driver version differs between nodes."""
    return mismatch(nodes, lambda n: fact(n, "gpu.driver_version"), "NVIDIA driver versions",
                    "gpu.driver_version")


RULE = Rule(
    id="cluster-driver-version-mismatch",
    title="Run one NVIDIA driver version on every node",
    severity=Severity.WARNING,
    reads=("gpu.driver_version",),
    sets=(),
    why=("The driver decides which CUDA features NCCL can use on each node (cuMem, DMA-BUF, "
         "NVLS, the CUDA version it supports: ncclCuMemHostEnable turns cuMem host memory on "
         "only with a driver for CUDA >= 12.6, src/misc/cudawrap.cc v2.24.3-1); nodes on "
         "different drivers take different code paths."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.24.3-1/src/misc/cudawrap.cc",
    fix="Install the same driver (and fabric manager) version on every node.",
    check=check,
    scope="cluster",
)
