"""gpu-mig-enabled: MIG is on for a GPU the job uses. NCCL does not support MIG (NVIDIA/nccl#1716):
its topology takes one PCI device for one GPU and one rank, and MIG instances cannot use CUDA P2P
or NVLink between them."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def _visible(facts: dict[str, Any], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves to the job (all when unset or given by UUID)."""
    spec = str((fact(facts, "env.other") or {}).get("CUDA_VISIBLE_DEVICES") or "").strip()
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items or not all(s.isdigit() for s in items):
        return gpus
    wanted = {int(s) for s in items}
    return [g for g in gpus if g.get("index") in wanted]


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when a GPU of the job has MIG mode on."""
    gpus = _visible(facts, fact(facts, "gpu.gpus", []) or [])
    mig = sorted(g.get("index") for g in gpus if g.get("mig_mode") is True)
    if not mig:
        return []
    spec = (fact(facts, "env.other") or {}).get("CUDA_VISIBLE_DEVICES") or ""
    instances = sum(1 for s in str(spec).split(",") if s.strip().startswith("MIG-"))
    return [Finding(
        message=(f"MIG is enabled on GPU {', '.join(map(str, mig))}: NCCL does not support MIG "
                 "(NVIDIA/nccl#1716): ranks on instances of one GPU fail with 'Multiple Ranks "
                 "are using the same GPU/Partition' or get no P2P/NVLink, only host memory"
                 + (f"; CUDA_VISIBLE_DEVICES names {instances} MIG instances" if instances else "")),
        fix=("Disable MIG on the GPUs of the job (sudo nvidia-smi -i <gpu> -mig 0, then reset "
             "the GPU), or run one rank per physical GPU"),
        evidence={"gpu.gpus.mig_mode": {str(i): True for i in mig}},
        severity=Severity.ERROR if instances > 1 else None)]


RULE = Rule(
    id="gpu-mig-enabled",
    title="Turn MIG off on the GPUs of an NCCL job",
    severity=Severity.WARNING,
    reads=("gpu.gpus?", "env.other?"),
    sets=(),
    why=("NCCL's topology maps one PCI device to one GPU and one rank, and MIG instances cannot "
         "use CUDA P2P, so NCCL does not support MIG (NVIDIA/nccl#1716, maintainer). Ranks on "
         "one GPU's instances share its UUID: src/init.cc@v2.30.7-1 stops with 'Multiple Ranks "
         "are using the same GPU/Partition' unless NCCL_MULTI_RANK_GPU_ENABLE=1 (from "
         "v2.30.3-1)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/init.cc",
    fix="Disable MIG on the job's GPUs (nvidia-smi -mig 0), or one rank per physical GPU.",
    check=check,
)
