"""gpu-cuda-driver-too-old: the CUDA driver is older than the CUDA runtime torch was built for."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, version_tuple


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error when the driver's CUDA major version is below torch's; warning for the minor."""
    driver = version_tuple(fact(facts, "gpu.cuda_driver_version"))
    torch = fact(facts, "nccl.torch") or {}
    runtime = version_tuple(torch.get("cuda"))
    if not driver or not runtime or driver[:2] >= runtime[:2]:
        return []
    major = driver[0] < runtime[0]
    d, r = fact(facts, "gpu.cuda_driver_version"), torch.get("cuda")
    return [Finding(
        message=(f"the driver ({fact(facts, 'gpu.driver_version')}) supports CUDA {d}, but torch "
                 f"{torch.get('version')} was built for CUDA {r}"
                 + (": CUDA fails with 'CUDA driver version is insufficient for CUDA runtime "
                    "version' before NCCL starts" if major else
                    ": minor-version compatibility runs it, but PTX JIT and features newer than "
                    f"{d} fail (NCCL kernels built for a newer toolkit among them)")),
        fix=(f"Install a driver for CUDA {r} or newer, or a torch build for CUDA {d}"
             + ("" if major else " (or the cuda-compat package of the same major version)")),
        evidence={"gpu.cuda_driver_version": d, "nccl.torch.cuda": r},
        severity=Severity.ERROR if major else Severity.WARNING,
    )]


RULE = Rule(
    id="gpu-cuda-driver-too-old",
    title="Use a CUDA driver at least as new as the runtime",
    severity=Severity.ERROR,
    reads=("gpu.cuda_driver_version?", "nccl.torch?"),
    sets=(),
    why=("A CUDA runtime needs a driver of its major version or newer "
         "(cudaErrorInsufficientDriver: 'CUDA driver version is insufficient for CUDA runtime "
         "version'); within a major version, minor-version compatibility runs the program but "
         "not PTX compiled for the newer toolkit. NCCL also gates features on the driver it "
         "finds (src/misc/cudawrap.cc: cuMem needs 12.0+, cuMem host memory 12.2+/12.6+; "
         "src/enqueue.cc checks each kernel's required driver)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/cudawrap.cc",
    fix="Upgrade the driver (or use a torch/NCCL build for the driver's CUDA version).",
    check=check,
)
