"""``ib-gdr-not-ready`` where the log shows GPUDirect RDMA off only indirectly, and where it is off
by design.

* **Off, reason unprinted.** NCCL prints why GPUDirect RDMA is off (``NET/IB : GPU Direct RDMA
  Disabled for HCA n``, src/graph/topo.cc) only under ``NCCL_DEBUG_SUBSYS`` NET, which the
  default leaves out (src/debug.cc: ``NCCL_INIT|NCCL_ENV`` at v2.22.3-1, ``NCCL_INIT |
  NCCL_BOOTSTRAP | NCCL_ENV`` at v2.30.7-1). The
  connection lines are printed under INIT and carry ``/GDRDMA`` when a connection uses it
  (src/transport/net.cc). So a host whose every NET/IB connection lacks ``/GDRDMA``, with no
  ``GPU Direct RDMA`` line at all, stages all inter-node traffic through host memory and the log
  does not say why. NCCL uses GDR for a GPU/HCA pair only when the HCA can register GPU memory
  (a peer-memory module or DMA-BUF, src/transport/net_ib.cc ``ncclIbGdrSupport`` /
  ``ncclIbDmaBufSupport``) and the pair is no farther apart than ``NCCL_NET_GDR_LEVEL`` (PXB by
  default, src/graph/paths.cc ``ncclTopoCheckGdr``). Real sample: NVIDIA/nccl#1412, where
  enabling GPUDirect RDMA took all_gather_perf from 33 to 93 GB/s.
* **Off by design.** On DGX Spark the GB10's integrated GPU cannot expose cudaMalloc memory to PCIe
  devices: "the GPUDirect RDMA technology is not supported, and the mechanisms for direct I/O
  based on that technology, for example nvidia-peermem (for DOCA-Host), dma-buf or GDRCopy, do
  not work" (https://docs.nvidia.com/dgx/dgx-spark-porting-guide/porting/cuda.html). There NCCL's
  ``GPU Direct RDMA Disabled`` and channels without ``/GDRDMA`` are the expected state, and
  ``modprobe nvidia-peermem`` is wrong advice: no GDR finding is raised for such hosts. The
  GPU's name comes from nccl-tests' device lines (``#  Rank 0 ... NVIDIA GB10``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ncclcheck.judge.derived_base import _raise, plural
from ncclcheck.logparse.proc import Proc
from ncclcheck.logparse.state import LogState
from ncclcheck.platforms import NO_GDR_BY_DESIGN

#: user settings under which GDR off is the user's choice, not a fault.
GDR_SETTINGS = ("NCCL_NET_GDR_LEVEL", "NCCL_IB_CUDA_SUPPORT")
PORTING_GUIDE = "https://docs.nvidia.com/dgx/dgx-spark-porting-guide/porting/cuda.html"


def no_gdr_platform(state: LogState, host: Optional[str]) -> Optional[str]:
    """The platform without GPUDirect RDMA that ``host`` is (or, for a host the log names no GPU
    for, that every GPU in the log is), else None.

    >>> s = LogState(); s.gpu_models = {"spark-a": {"NVIDIA GB10"}}
    >>> no_gdr_platform(s, "spark-a"), no_gdr_platform(s, "other")
    ('DGX Spark (GB10)', 'DGX Spark (GB10)')
    >>> s.gpu_models["h100"] = {"NVIDIA H100 80GB HBM3"}
    >>> no_gdr_platform(s, "spark-a"), no_gdr_platform(s, "h100"), no_gdr_platform(s, None)
    ('DGX Spark (GB10)', None, None)
    """
    models = state.gpu_models.get(host or "") if host else None
    if not models:
        models = set().union(*state.gpu_models.values()) if state.gpu_models else set()
    platforms = {NO_GDR_BY_DESIGN.get(m) for m in models}
    if not models or None in platforms or len(platforms) != 1:
        return None
    return platforms.pop()


def without_gdr_by_design(state: LogState, procs: list[Proc]) -> list[Proc]:
    """``procs`` less those on a platform where GPUDirect RDMA is unsupported by design."""
    return [p for p in procs if not no_gdr_platform(state, p.host or p.node)]


def check_gdr_unseen(state: LogState) -> None:
    """``ib-gdr-not-ready``: no NET/IB connection of a host uses GPUDirect RDMA, and the log has
    no ``GPU Direct RDMA`` line saying why (``NCCL_DEBUG_SUBSYS`` without NET)."""
    if "ib-gdr-not-ready" in state.findings:
        return                          # the HCA lines or another host's GDRDMA said it already
    procs: dict[str, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        if p.gdr_connections:
            return                      # GDR in use somewhere: check_gdr_hosts' case
        host = p.host or p.node
        nets = sum(n for t, n in p.transports.items() if t.startswith("NET/"))
        if (not host or not nets or p.net_family() != "ib" or p.gdr
                or any(k in p.env for k in GDR_SETTINGS) or no_gdr_platform(state, host)):
            continue
        procs[host].append(p)
    if not procs:
        return
    hosts = sorted(procs)
    flat = [p for h in hosts for p in procs[h]]
    conns = sum(n for p in flat for t, n in p.transports.items() if t.startswith("NET/"))
    _raise(state, "ib-gdr-not-ready",
           f"none of the {conns} NET/IB connections on {', '.join(hosts[:4])} "
           f"({plural(len(flat), 'process')}) uses GPUDirect RDMA (no /GDRDMA on the channel "
           "lines), and the log has no 'GPU Direct RDMA' line saying why: inter-node traffic is "
           "staged through host memory",
           flat, [p.evidence.get("net_conn") for p in flat[:3]],
           severity="warning",
           cause="NCCL uses GPUDirect RDMA for a GPU and an HCA only when the HCA can register "
                 "GPU memory (a peer-memory module NCCL recognises, or DMA-BUF; "
                 "src/transport/net_ib.cc ncclIbGdrSupport/ncclIbDmaBufSupport) and the two are "
                 "no farther apart than NCCL_NET_GDR_LEVEL (PXB by default; src/graph/paths.cc "
                 "ncclTopoCheckGdr). Which one failed is printed only under "
                 "NCCL_DEBUG_SUBSYS=NET, which the default (INIT,BOOTSTRAP,ENV) leaves out. Staging "
                 "through host memory costs bandwidth: in NVIDIA/nccl#1412 enabling it took "
                 "all_gather_perf from 33 to 93 GB/s.",
           fix="Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and read the 'GPU Direct "
               "RDMA' lines: 'Disabled for HCA n' means no peer-memory path, so `modprobe "
               "nvidia-peermem` on every node (NCCL >= 2.23 sees /sys/module/nvidia_peermem; "
               "older releases need it registered under /sys/kernel/mm/memory_peers) or use "
               "DMA-BUF (open GPU kernel module, kernel >= 5.12); 'Disabled for GPU x / HCA y "
               "(distance d > l)' means the GPU and the HCA are not under a common PCIe switch, "
               "which is the topology's choice (`nvidia-smi topo -m`). On DGX Spark (GB10) "
               "GPUDirect RDMA is not supported by design: nothing to fix there. Then look for "
               "`via NET/IB/<n>/GDRDMA` in the channel lines.")
