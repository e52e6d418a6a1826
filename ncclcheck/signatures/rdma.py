"""RDMA present but unused: libibverbs missing, devices unopenable, silent Socket fallback (§4, row 8)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import (
    NCCL_ENV,
    NCCL_TROUBLESHOOTING,
    Detail,
    Signature,
    compile_all,
)

#: NCCL's messages when it cannot dlopen libibverbs: WARN up to 2.10, INFO 2.11-2.29, 2.30's typo.
IBVERBS_MISSING = compile_all(r"Failed to open libibverbs\.so", r"Cou(?:ld|nt) not open libibverbs")[0:2]
#: NCCL's internal IB transport found nothing usable (then it falls through to sockets).
IB_NO_DEVICE = compile_all(r"NET/IB ?: No device found|Net/IB: call to devices\(\) returned 0 devices")[0]
#: names of RDMA devices (mlx5_0, mlx5_bond_0, hfi1_0, efa_0, irdma0, rocep1s0f0, bnxt_re0, erdma_0).
RDMA_DEVICE = re.compile(r"\b(?:mlx\d_[\w]+|hfi1_\d+|efa_\d+|irdma\d+|rocep\w+|bnxt_re\d+|erdma_\d+|qedr\d+)\b")
#: IPoIB interface names: an InfiniBand port is there even if verbs are not.
IPOIB_IFACE = re.compile(r"^ib[\w\-.]*$")

IBVERBS_UNLOADABLE = Signature(
    id="nccl-ibverbs-unloadable",
    title="NCCL could not load libibverbs, so IB/RoCE was never tried",
    severity="warning",
    cause="NCCL dlopens libibverbs.so[.1] at init; when the library (rdma-core) or its provider "
          "(libmlx5) is missing, typically in a container image, the internal IB transport is "
          "skipped silently and traffic between nodes goes over TCP sockets.",
    fix="Install rdma-core userspace in the image (libibverbs1, ibverbs-providers / libmlx5), pass "
        "/dev/infiniband into the container, and check with `ibv_devinfo` that the HCA opens. "
        "(Only where TCP is wanted on purpose does NCCL_IB_DISABLE=1 make that choice explicit; "
        "it is not a fix.)",
    docs=f"{NCCL_TROUBLESHOOTING} (InfiniBand); src/misc/ibvsymbols.cc; "
         "https://github.com/pytorch/pytorch/issues/68893")

SILENT_SOCKET_FALLBACK = Signature(
    id="log-silent-socket-fallback",
    title="RDMA hardware is visible but NCCL uses TCP sockets",
    severity="warning",
    cause="NCCL's internal IB transport found no usable port and NCCL fell back to the Socket "
          "transport without an error: /dev/infiniband not passed into the container, ports not "
          "ACTIVE, NCCL_IB_HCA filtering every device, or the device cannot be opened.",
    fix="Check `ibstat`/`ibv_devinfo` inside the job's environment, pass the RDMA devices into the "
        "container (--device=/dev/infiniband, an RDMA device plugin in Kubernetes), bring the ports "
        "ACTIVE, fix NCCL_IB_HCA. (Only where TCP is wanted on purpose does NCCL_IB_DISABLE=1 make "
        "that choice explicit; it is not a fix.)",
    docs=f"{NCCL_ENV}#nccl-ib-hca; src/transport/net_ib/init.cc; "
         "https://github.com/NVIDIA/nccl/issues/952; https://github.com/NVIDIA/nccl/issues/451")


def _open_failed_detail(m: re.Match[str]) -> Detail:
    dev = m.group(1) if m.lastindex else None
    return Detail(message=f"NCCL could not open RDMA device {dev}" if dev
                  else "ibv_open_device failed for an RDMA device", variant=dev or "")


DEVICE_OPEN_FAILED = Signature(
    id="log-ib-device-open-failed",
    title="an RDMA device is listed but cannot be opened",
    severity="warning",
    cause="libibverbs sees the device in /sys/class/infiniband but opening its /dev/infiniband/"
          "uverbs node failed: the container does not have that device node, or lacks permission.",
    fix="Pass all /dev/infiniband/uverbs* devices into the container (or use NCCL_IB_HCA to select "
        "only the devices the container has).",
    docs="https://github.com/NVIDIA/nccl/issues/451; src/transport/net_ib/init.cc",
    patterns=compile_all(r"NET/IB ?: Unable to open device (\S+)", r"Call to ibv_open_device failed"),
    keywords=("Unable to open device", "ibv_open_device"),
    explain=_open_failed_detail)

MIXED_LINK_LAYERS = Signature(
    id="ib-hca-select",
    title="NCCL was asked to merge IB and RoCE ports",
    severity="warning",
    cause="NCCL_IB_MERGE_NICS fuses ports into one logical NIC, which needs them to share a link "
          "layer; the selected HCAs mix InfiniBand and Ethernet (RoCE) ports.",
    fix="Restrict NCCL_IB_HCA to ports of one link type, with exact names (=mlx5_0,mlx5_1).",
    docs=f"{NCCL_ENV}#nccl-ib-hca; src/transport/net_ib/init.cc",
    patterns=compile_all(r"Attempted to merge incompatible devices"),
    keywords=("merge incompatible",))

SIGNATURES = (DEVICE_OPEN_FAILED, MIXED_LINK_LAYERS)
DERIVED = (IBVERBS_UNLOADABLE, SILENT_SOCKET_FALLBACK)
