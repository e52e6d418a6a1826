"""Ranks that disagree: NCCL version, driver, collectives, transport (§9 rows 19, 7;
socketFinalizeAccept)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import Detail, Signature, compile_all

VERSION_MISMATCH = Signature(
    id="cluster-nccl-version-mismatch",
    title="ranks run different NCCL versions",
    severity="error",
    cause="All ranks of a communicator must run the same NCCL: the bootstrap and wire protocols "
          "change between releases. PyTorch wheels bundle their own libnccl, so nodes with "
          "different torch builds (or a system NCCL on LD_LIBRARY_PATH or LD_PRELOAD) disagree.",
    fix="Pin one NCCL everywhere: compare `python -c 'import torch; print(torch.cuda.nccl.version())'` "
        "and the `NCCL version` line on every node, then align the torch / nvidia-nccl-cu* wheels "
        "or the system package.",
    docs="src/init.cc (Mismatched NCCL version detected); https://github.com/NVIDIA/nccl/issues/286; "
         "https://github.com/NVIDIA/nccl/issues/1267",
    patterns=compile_all(r"Mismatched NCCL version detected(?: : rank (\d+) version (\d+) rank (\d+) "
                         r"version (\d+))?"),
    keywords=("Mismatched NCCL version",),
    explain=lambda m: Detail(message=m.group(0)))

COLLECTIVE_MISMATCH = Signature(
    id="log-collective-mismatch",
    title="ranks exchanged messages of different sizes",
    severity="error",
    cause="A receiver got a different number of bytes than it posted: the ranks run different NCCL "
          "versions or settings (NCCL_PROTO, NCCL_ALGO, NCCL_BUFFSIZE differ between ranks), or the "
          "application issued different collectives (sizes, order) on different ranks.",
    fix="Make NCCL and every NCCL_* variable identical on all ranks (compare the `set by "
        "environment` lines per node); then check that all ranks call the same collectives in the "
        "same order (TORCH_DISTRIBUTED_DEBUG=DETAIL).",
    docs="https://github.com/NVIDIA/nccl/issues/1328; https://github.com/NVIDIA/nccl/issues/969",
    patterns=compile_all(r"collective mismatch error", r"message truncated : receiving \d+ bytes "
                         r"instead of \d+", r"Mismatched collective detected"),
    keywords=("mismatch error", "message truncated", "Mismatched collective"),
    explain=lambda m: Detail(message=m.string[m.start():][:200].strip()))


def _wrong_type_detail(m: re.Match[str]) -> Detail:
    names = {"1": "bootstrap", "2": "proxy", "3": "Socket", "4": "IB", "5": "RAS"}
    a, b = names.get(m.group(1), m.group(1)), names.get(m.group(2), m.group(2))
    return Detail(message=f"a connection of type {a} reached a listener expecting {b}: ranks use "
                          "different network transports")


TRANSPORT_MISMATCH = Signature(
    id="net-transport",
    title="ranks use different network transports",
    severity="error",
    cause="NCCL picks its network per process (external plugin, then IB, then Socket); when IB or "
          "a plugin works on some nodes but not on others, ranks try to talk IB to a Socket peer "
          "(socketFinalizeAccept: wrong type 4 != 3) or hang.",
    fix="Make every node pick the same network: fix IB (libibverbs, /dev/infiniband, ports ACTIVE) "
        "or the plugin on the nodes that fell back. NCCL_NET=IB (or the plugin's name) on every "
        "node makes a node that cannot use it fail at init with its reason instead of falling "
        "back. (Only where TCP is wanted on purpose: NCCL_NET=Socket on every node.)",
    docs="src/misc/socket.cc (socketFinalizeAccept); src/plugin/net.cc; "
         "https://github.com/NVIDIA/nccl-tests/issues/188",
    patterns=compile_all(r"socketFinalizeAccept: wrong type (\d+) != (\d+)"),
    keywords=("wrong type",),
    explain=_wrong_type_detail)

DRIVER_MISMATCH = Signature(
    id="cluster-driver-version-mismatch",
    title="ranks run on different NVIDIA drivers",
    severity="warning",
    cause="NCCL prints cudaDriverVersion, the CUDA version the node's driver supports; ranks that "
          "disagree run different drivers, which decide what NCCL may use on each node (cuMem, "
          "DMA-BUF, NVLS), so nodes take different code paths.",
    fix="Install the same NVIDIA driver (and fabric manager) version on every node; compare "
        "`nvidia-smi --query-gpu=driver_version --format=csv` across the nodes.",
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html; "
         "src/init.cc (cudaDriverVersion)")

SIGNATURES = (VERSION_MISMATCH, COLLECTIVE_MISMATCH, TRANSPORT_MISMATCH)
DERIVED = (DRIVER_MISMATCH,)
