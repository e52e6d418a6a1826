"""ib-gdr-not-ready: GPUs and RDMA NICs, but no GPUDirect RDMA path NCCL would use.

NCCL offers GPU memory to the NIC when a peer-memory module is loaded or DMA-BUF registration
works. Which module files it looks for depends on its version (git show <tag>:src/transport/...):
up to 2.21 only ``/sys/kernel/mm/memory_peers/nv_mem/version`` (net_ib.cc, v2.21.5-1), 2.22 adds
``.../nv_mem_nc/version`` (v2.22.3-1), and only from 2.23 on ``/sys/module/nvidia_peermem/version``
(v2.23.4-1; net_ib/gdr.cc in v2.30.7-1). So with NCCL 2.22 or older, the ``nvidia_peermem``
module that current drivers ship is not seen and GDR stays off unless DMA-BUF works
(NVIDIA/nccl#1676: 10-18x slower). An unknown NCCL version is not guessed at.

Nodes whose GPUs are all DGX Spark's GB10 are skipped: GPUDirect RDMA is not supported there by
design (:data:`ncclcheck.platforms.NO_GDR_BY_DESIGN`). Nodes whose RDMA devices are all EFA, and
nodes where NCCL loads an external net plugin
(aws-ofi-nccl, gIB, TCPX...; unless NCCL_NET=IB bypasses it), are skipped: the plugin registers
GPU memory itself (aws-ofi-nccl through efa_nv_peermem or DMA-BUF), and NCCL's IB check is not
what decides there (src/plugin/net.cc@v2.30.7-1 prefers the plugin's network).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.platforms import NO_GDR_BY_DESIGN
from ncclcheck.rules.base import Finding, Rule, Severity, fact, version_tuple
from ncclcheck.rules.cloud_efa_plugin_owned import efa_devices
from ncclcheck.rules.cluster_nccl_version_mismatch import node_version
from ncclcheck.rules.common import configured

PEERMEM_SEEN_SINCE = (2, 23)


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when GPUs and RDMA devices exist and NCCL would find no GDR path.

    A node without GPUs or without RDMA devices (its section unavailable) passes.
    """
    gdr = fact(facts, "ib.gdr", {})
    devices = fact(facts, "ib.devices", [])
    gpus = fact(facts, "gpu.gpus", [])
    if not gpus or not devices:
        return []
    if all(g.get("name") in NO_GDR_BY_DESIGN for g in gpus):
        return []  # DGX Spark: no GPUDirect RDMA by design, host staging is the expected path
    if len(efa_devices(facts)) == len(devices):
        return []  # EFA: GPUDirect goes through aws-ofi-nccl (efa_nv_peermem or DMA-BUF)
    plugin = (fact(facts, "nccl.net_plugin") or {}).get("path")
    if plugin and configured(facts, "NCCL_NET") not in ("IB", "ib"):
        return []  # an external net plugin registers GPU memory itself, not NCCL's IB check
    if gdr.get("ready") is False:
        return [Finding(
            message=f"GPUDirect RDMA is not ready: {gdr.get('reason') or 'no nvidia-peermem'}; "
                    "NCCL will stage network traffic through host memory",
            evidence={"ib.gdr": gdr},
        )]
    only_peermem = (gdr.get("peermem") and not gdr.get("nv_peer_mem")
                    and gdr.get("dmabuf") is not True)
    version = node_version(facts)
    parsed = version_tuple(version)
    if gdr.get("ready") and only_peermem and parsed and parsed < PEERMEM_SEEN_SINCE:
        return [Finding(
            message=(f"nvidia_peermem is loaded, but NCCL {version} (2.22 and older) looks only "
                     "for /sys/kernel/mm/memory_peers/nv_mem[_nc]/version, not "
                     "/sys/module/nvidia_peermem: GPUDirect RDMA stays off and network traffic "
                     "is staged through host memory (NVIDIA/nccl#1676: 10-18x slower)"),
            fix=("Upgrade NCCL to 2.23 or newer (pip install -U nvidia-nccl-cu12), or use "
                 "DMA-BUF (the open GPU kernel module on a kernel >= 5.12)."),
            evidence={"ib.gdr": gdr, "nccl.version": version},
        )]
    return []


RULE = Rule(
    id="ib-gdr-not-ready",
    title="Enable GPUDirect RDMA (nvidia-peermem or DMA-BUF)",
    severity=Severity.WARNING,
    reads=("ib.gdr?", "ib.devices?", "gpu.gpus?", "nccl.versions?", "nccl.torch_loads?",
           "nccl.system_loads?", "nccl.net_plugin?", "env.nccl?", "nccl.conf_env?"),
    sets=(),
    why=("NCCL's IB transport offers GPU memory to the NIC only when a peer-memory module is "
         "loaded or DMA-BUF registration works; it looks for /sys/kernel/mm/memory_peers/nv_mem/"
         "version (all releases), .../nv_mem_nc/version (since 2.22) and "
         "/sys/module/nvidia_peermem/version only since 2.23 (src/transport/net_ib.cc at "
         "v2.21.5-1, v2.22.3-1, v2.23.4-1; net_ib/gdr.cc at v2.30.7-1). Otherwise every transfer "
         "is copied through host memory: 10-18x slower with nvidia_peermem loaded under NCCL "
         "2.22 (NVIDIA/nccl#1676)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "gpu_troubleshooting.html#gpu-to-nic-communication",
    fix="sudo modprobe nvidia-peermem (and load it at boot) with NCCL >= 2.23, or use the open "
        "GPU kernel module with a DMA-BUF capable kernel.",
    check=check,
)
