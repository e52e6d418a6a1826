"""cluster-cuda-version-mismatch: nodes' drivers support different CUDA versions, or torch was
built for different CUDA versions."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import mismatch


def _cuda(facts: dict[str, Any]) -> str | None:
    driver = fact(facts, "gpu.cuda_driver_version")
    torch = (fact(facts, "nccl.torch") or {}).get("cuda")
    if driver and torch:
        return f"driver {driver}, torch {torch}"
    if driver:
        return f"driver {driver}"
    return f"torch {torch}" if torch else None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when the CUDA versions (the driver's, and torch's build) differ between nodes."""
    return mismatch(nodes, _cuda, "CUDA versions", "cuda")


RULE = Rule(
    id="cluster-cuda-version-mismatch",
    title="Run one CUDA version on every node",
    severity=Severity.WARNING,
    reads=("gpu.cuda_driver_version", "nccl.torch?"),
    sets=(),
    why=("NCCL is built per CUDA major version (nvidia-nccl-cu12, libnccl2 +cudaX.Y) and its "
         "features follow the driver's CUDA version (e.g. cuMem host allocations need driver "
         ">= 12.6 and runtime >= 12.2); nodes on different CUDA stacks behave differently and "
         "may not interoperate."),
    docs="https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html",
    fix="Use the same driver and the same torch/CUDA build on every node.",
    check=check,
    scope="cluster",
)
