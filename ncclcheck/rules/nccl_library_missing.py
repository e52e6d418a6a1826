"""nccl-library-missing: no libnccl on the node."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when the probe found no libnccl.so anywhere it looked."""
    if fact(facts, "nccl.libraries", []):
        return []
    torch = fact(facts, "nccl.torch")
    cuda_torch = bool(torch and torch.get("cuda"))
    return [Finding(
        message=("no libnccl found (site-packages nvidia/nccl/lib, ldconfig cache, "
                 "LD_LIBRARY_PATH, CUDA folders)"
                 + ("; torch is a CUDA build and will fail to initialise NCCL" if cuda_torch
                    else "")),
        severity=Severity.ERROR if cuda_torch else None,
        evidence={"nccl.libraries": [], "nccl.torch": torch},
    )]


RULE = Rule(
    id="nccl-library-missing",
    title="Install an NCCL library",
    severity=Severity.WARNING,
    reads=("nccl.libraries", "nccl.torch?"),
    sets=(),
    why=("PyTorch CUDA wheels load NCCL from the nvidia-nccl-cu12 wheel (site-packages/nvidia/"
         "nccl/lib); other frameworks and nccl-tests load libnccl.so.2 through the dynamic "
         "linker. NCCL's install guide lists both routes."),
    docs="https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html",
    fix="pip install nvidia-nccl-cu12 (matching your CUDA major), or install libnccl2 from "
        "NVIDIA's CUDA repository.",
    check=check,
)
