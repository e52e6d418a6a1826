"""gpu-cuda-driver-too-old: the CUDA driver is of an older major version than the CUDA runtime
torch was built for, and no forward-compatibility package (cuda-compat) bridges the gap.

A minor-version gap (driver for 12.2, torch for 12.4) is not reported: CUDA's minor-version
compatibility runs such a program, and NCCL itself skips the kernels that need a newer driver
("Skipping kernel ... which requires driver", src/enqueue.cc@v2.28.7-1, the first tag with it).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, version_tuple


def _compat(facts: dict[str, Any], runtime: tuple[int, ...]) -> list[dict[str, Any]]:
    """Toolkits with a cuda-compat libcuda for the runtime's major version or newer."""
    return [t for t in fact(facts, "cuda.toolkits", []) or []
            if t.get("compat") and (version_tuple(t.get("version")) or (0,))[:1] >= runtime[:1]]


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error when the driver's CUDA major version is below torch's and no cuda-compat libcuda is
    on LD_LIBRARY_PATH; INFO when one is (forward compatibility: data-center GPUs only)."""
    driver = version_tuple(fact(facts, "gpu.cuda_driver_version"))
    torch = fact(facts, "nccl.torch") or {}
    runtime = version_tuple(torch.get("cuda"))
    if not driver or not runtime or driver[:1] >= runtime[:1]:
        return []
    d, r = fact(facts, "gpu.cuda_driver_version"), torch.get("cuda")
    said = (f"the driver ({fact(facts, 'gpu.driver_version')}) supports CUDA {d}, but torch "
            f"{torch.get('version')} was built for CUDA {r}")
    evidence = {"gpu.cuda_driver_version": d, "nccl.torch.cuda": r}
    compat = _compat(facts, runtime)
    path = str((fact(facts, "env.other") or {}).get("LD_LIBRARY_PATH") or "")
    used = [t for t in compat if f"{t['path']}/compat" in path.split(":")
            or any(f"{a}/compat" in path.split(":") for a in t.get("aliases") or [])]
    if used:
        t = used[0]
        return [Finding(
            message=(f"{said}: bridged by CUDA forward compatibility ({t['path']}/compat, libcuda "
                     f"{t['compat']}, on LD_LIBRARY_PATH), which works on data-center GPUs only"),
            fix="Nothing on data-center GPUs; on other GPUs install a driver for CUDA " + str(r),
            evidence={**evidence, "cuda.toolkits.compat": t["compat"]}, severity=Severity.INFO)]
    hint = (f"; or put the installed cuda-compat first: export LD_LIBRARY_PATH="
            f"{compat[0]['path']}/compat:$LD_LIBRARY_PATH (data-center GPUs only)" if compat else
            "; or, on data-center GPUs, the cuda-compat package of CUDA "
            f"{r.split('.')[0]} (forward compatibility) on LD_LIBRARY_PATH")
    return [Finding(
        message=(f"{said}: CUDA fails with 'CUDA driver version is insufficient for CUDA runtime "
                 "version' before NCCL starts"),
        fix=f"Install a driver for CUDA {r} or newer, or a torch build for CUDA {d}{hint}",
        evidence=evidence)]


RULE = Rule(
    id="gpu-cuda-driver-too-old",
    title="Use a CUDA driver at least as new as the runtime",
    severity=Severity.ERROR,
    reads=("gpu.cuda_driver_version?", "nccl.torch?", "cuda.toolkits?", "env.other?"),
    sets=(),
    why=("A CUDA runtime needs a driver of its major version or newer "
         "(cudaErrorInsufficientDriver: 'CUDA driver version is insufficient for CUDA runtime "
         "version'), unless the cuda-compat package's libcuda is loaded first (forward "
         "compatibility, data-center GPUs only). Within a major version, minor-version "
         "compatibility runs the program, and NCCL skips the kernels that need a newer driver "
         "(src/enqueue.cc@v2.28.7-1 'Skipping kernel ... which requires driver'); it also gates "
         "features on the driver it finds (src/misc/cudawrap.cc: cuMem needs 12.0+, cuMem host "
         "memory 12.2+)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/misc/cudawrap.cc",
    fix="Upgrade the driver (or use a torch/NCCL build for the driver's CUDA version).",
    check=check,
)
