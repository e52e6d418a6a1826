"""ib-gdr-not-ready: GPUs and RDMA NICs, but no GPUDirect RDMA path (nvidia-peermem / DMA-BUF)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when GPUs and RDMA devices exist and the probe says GDR is not ready.

    A node without GPUs or without RDMA devices (its section unavailable) passes.
    """
    gdr = fact(facts, "ib.gdr", {})
    if not fact(facts, "gpu.gpus", []) or not fact(facts, "ib.devices", []):
        return []
    if gdr.get("ready") is not False:
        return []
    return [Finding(
        message=f"GPUDirect RDMA is not ready: {gdr.get('reason') or 'no nvidia-peermem'}; "
                "NCCL will stage network traffic through host memory",
        evidence={"ib.gdr": gdr},
    )]


RULE = Rule(
    id="ib-gdr-not-ready",
    title="Enable GPUDirect RDMA (nvidia-peermem or DMA-BUF)",
    severity=Severity.WARNING,
    reads=("ib.gdr?", "ib.devices?", "gpu.gpus?"),
    sets=(),
    why=("NCCL's IB transport offers GPU memory to the NIC only when "
         "/sys/kernel/mm/memory_peers/nv_mem/version, .../nv_mem_nc/version or "
         "/sys/module/nvidia_peermem/version exists, "
         "or DMA-BUF registration works (src/transport/net_ib/gdr.cc); otherwise every transfer is "
         "copied through host memory and bandwidth drops."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#gpu-to-nic-communication",
    fix="sudo modprobe nvidia-peermem (and load it at boot), or use the open GPU kernel module "
        "with a DMA-BUF capable kernel.",
    check=check,
)
