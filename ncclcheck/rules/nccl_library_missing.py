"""nccl-library-missing: a GPU node with no NCCL a job could load.

A node without GPUs (the gpu section unavailable: no NVIDIA driver) passes: it runs no NCCL
(issue 19). A CUDA torch with no libnccl on disk is asked for its version
(``torch.cuda.nccl.version()``, ``nccl.torch_nccl``): builds that link NCCL statically (some
source and vendor builds) carry it inside libtorch_cuda.so and need no file.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, absent, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when a node with GPUs has no libnccl file and its torch reports no NCCL either."""
    if fact(facts, "nccl.libraries", []):
        return []
    if absent(facts, "gpu") or not fact(facts, "gpu.gpus", []):
        return []  # a CPU-only node runs no NCCL
    torch = fact(facts, "nccl.torch")
    asked = fact(facts, "nccl.torch_nccl") or {}
    if asked.get("version"):
        return []  # linked into torch statically: nothing to install
    cuda_torch = bool(torch and torch.get("cuda"))
    because = f" ({asked['error']})" if asked.get("error") else ""
    return [Finding(
        message=("no libnccl found (site-packages nvidia/nccl/lib, ldconfig cache, "
                 "LD_LIBRARY_PATH, CUDA folders)"
                 + (f"; torch is a CUDA build and reports no NCCL of its own{because}: it will "
                    "fail to initialise NCCL" if cuda_torch else "")),
        severity=Severity.ERROR if cuda_torch else None,
        evidence={"nccl.libraries": [], "nccl.torch": torch, "nccl.torch_nccl": asked or None},
    )]


RULE = Rule(
    id="nccl-library-missing",
    title="Install an NCCL library",
    severity=Severity.WARNING,
    reads=("nccl.libraries", "nccl.torch?", "nccl.torch_nccl?", "gpu.gpus?"),
    sets=(),
    why=("PyTorch CUDA wheels load NCCL from the nvidia-nccl-cu12 wheel (site-packages/nvidia/"
         "nccl/lib); other frameworks and nccl-tests load libnccl.so.2 through the dynamic "
         "linker. NCCL's install guide lists both routes. torch builds that link NCCL "
         "statically (USE_STATIC_NCCL) need no file, so torch.cuda.nccl.version() is asked "
         "first; nodes without GPUs need no NCCL."),
    docs="https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html",
    fix="pip install nvidia-nccl-cu12 (matching your CUDA major), or install libnccl2 from "
        "NVIDIA's CUDA repository.",
    check=check,
)
