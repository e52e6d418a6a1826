"""InfiniBand / RoCE verbs failures: completion errors, QP setup, memlock, GDR, MTU, ports (§5, §7,
rows 10-15, 22)."""

from __future__ import annotations

import re
from typing import Optional

from ncclcheck.signatures.base import (
    NCCL_ENV,
    NCCL_TROUBLESHOOTING,
    Detail,
    Signature,
    compile_all,
)

LOC_LEN_ERR = 1                #: IBV_WC_LOC_LEN_ERR: a message longer than the receive buffer / MTU
_STATUS = {
    12: ("IBV_WC_RETRY_EXC_ERR", "error",
         "The transport retry counter was exhausted: the peer stopped answering. Either the peer "
         "process died or hung (check its log first), the link flapped, or, on RoCE, packets are "
         "dropped (PFC/ECN misconfiguration, wrong GID index or traffic class, no route); on very "
         "large fabrics NCCL_IB_TIMEOUT can be too short.",
         "Look for the first failure on the peer named in the message; check `ibstat`, "
         "`rdma statistic` (local_ack_timeout_err) and switch counters; on large fabrics raise "
         "NCCL_IB_TIMEOUT (e.g. 22) and keep NCCL_IB_RETRY_CNT=7."),
    5: ("IBV_WC_WR_FLUSH_ERR", "warning",
        "A work request was flushed because its queue pair was already in error: a consequence of "
        "an earlier failure, not the root cause.",
        "Find the first error in the log (often a status 12 or 4 completion, or a dead peer)."),
    4: ("IBV_WC_LOC_PROT_ERR", "error",
        "Local protection error: the NIC was refused access to the buffer, typically GPUDirect RDMA "
        "broken by PCIe ACS on bare metal or missing ATS in a VM.",
        "Disable ACS on the PCIe bridges (bare metal) or enable ATS (VMs); confirm by running with "
        "NCCL_NET_GDR_LEVEL=LOC (GDR off)."),
}


def _completion_detail(m: re.Match[str]) -> Optional[Detail]:
    status = int(m.group("status"))
    if status == LOC_LEN_ERR:
        return None                      # reported as cluster-mtu-mismatch
    peer = m.group("peer")
    name, severity, cause, fix = _STATUS.get(status, (f"status {status}", "error", "", ""))
    where = f" from peer {peer}" if peer else ""
    return Detail(message=f"IB completion error {status} ({name}){where}",
                  variant=f"status {status}", cause=cause, fix=fix, severity=severity)


IB_COMPLETION_ERROR = Signature(
    id="log-ib-completion-error",
    title="InfiniBand/RoCE work completion with an error",
    severity="error",
    cause="A verbs work request completed with an error status; the status says why.",
    fix="Check the peer process and the fabric (ibstat, rdma statistic, switch counters).",
    docs=f"{NCCL_ENV}#nccl-ib-timeout; src/transport/net_ib/common.h (printIbWcStatusHint); "
         "https://github.com/NVIDIA/nccl/issues/1664; https://github.com/NVIDIA/nccl/issues/902",
    patterns=compile_all(
        r"Got completion (?:from peer (?P<peer>\S+?) )?with (?:error |status=)"
        r"(?:IBV_WC_\w+\()?(?P<status>\d{1,6})"),
    keywords=("Got completion",),
    explain=_completion_detail)

ROCE_GID_INDEX = Signature(
    id="ib-roce-gid-index",
    title="ibv_modify_qp rejected the address (wrong RoCE GID index)",
    severity="error",
    cause="Moving the queue pair to RTR failed with EINVAL, which on RoCE almost always means the "
          "GID index points at an entry the fabric cannot route (before NCCL 2.21 the default was 0, "
          "a RoCE v1 link-local GID; a hard-coded NCCL_IB_GID_INDEX may be wrong on some nodes).",
    fix="On NCCL >= 2.21 unset NCCL_IB_GID_INDEX (auto-selection picks the RoCE v2 IPv4 GID); on "
        "older NCCL set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 index `show_gids` reports, the same "
        "on every node.",
    docs=f"{NCCL_TROUBLESHOOTING} (networking: RoCE GID index); {NCCL_ENV}#nccl-ib-gid-index; "
         "src/transport/net_ib/connect.cc (ncclIbGetGidIndex)",
    patterns=compile_all(r"Call to ibv_modify_qp failed with (?:error )?(?:\d+ )?Invalid argument"),
    keywords=("ibv_modify_qp",),
    explain=lambda m: Detail(message="ibv_modify_qp failed with EINVAL while connecting a queue "
                                     "pair (RoCE GID index)"))

MEMLOCK = Signature(
    id="limits-memlock-limited",
    title="registering or creating RDMA resources failed (locked-memory limit)",
    severity="error",
    cause="RDMA needs pinned memory: ibv_reg_mr, ibv_create_cq and ibv_create_qp fail with ENOMEM "
          "when the locked-memory limit (ulimit -l) of the process is small, which is the default "
          "for services, containers and many batch launchers.",
    fix="Set memlock to unlimited (`* soft/hard memlock unlimited` in /etc/security/limits.conf, "
        "LimitMEMLOCK=infinity for slurmd/systemd units, docker --ulimit memlock=-1 and "
        "--cap-add=IPC_LOCK) and check `ulimit -l` inside the launcher (mpirun ... sh -c 'ulimit -l').",
    docs=f"{NCCL_TROUBLESHOOTING} (InfiniBand: memlock); "
         "https://github.com/NVIDIA/nccl-tests/issues/206; https://github.com/NVIDIA/nccl/issues/380",
    patterns=compile_all(
        r"Call to (?P<call>ibv_reg_mr(?:_iova2)?|ibv_create_cq|ibv_create_qp) failed"
        r"(?: with (?:error )?(?P<err>.*))?$",
        r"ibv_create_cq\(\) failed: Cannot allocate memory|set max locked memory"),
    keywords=("ibv_reg_mr", "ibv_create_cq", "ibv_create_qp", "max locked memory"),
    explain=lambda m: _memlock_detail(m))


def _memlock_detail(m: re.Match[str]) -> Optional[Detail]:
    groups = m.groupdict()
    err = (groups.get("err") or "").strip()
    if err and "Cannot allocate memory" not in err and "12" not in err:
        return None                      # another errno: reported by VERBS_FAILED
    call = groups.get("call") or "ibv_create_cq"
    return Detail(message=f"{call} failed{' with ' + err if err else ''}", variant=call)


def _verbs_detail(m: re.Match[str]) -> Optional[Detail]:
    call, err = m.group("call"), (m.group("err") or "").strip()
    if call == "ibv_modify_qp" and "Invalid argument" in err:
        return None                                      # ROCE_GID_INDEX
    if call in ("ibv_reg_mr", "ibv_reg_mr_iova2", "ibv_create_cq", "ibv_create_qp") and (
            not err or "Cannot allocate memory" in err):
        return None                                      # MEMLOCK
    if call == "ibv_open_device":
        return None                                      # rdma.DEVICE_OPEN_FAILED
    cause = ""
    if call == "ibv_modify_qp" and ("unreachable" in err or "No such device" in err):
        cause = ("The queue pair could not be connected to the peer's address: on RoCE the chosen "
                 "GID has no route to the peer (address on another subnet, wrong GID index, "
                 "interface down) or the netdev behind the GID is not in this network namespace.")
    return Detail(message=f"{call} failed{' with ' + err if err else ''}", variant=call, cause=cause)


VERBS_FAILED = Signature(
    id="log-ib-verbs-failed",
    title="an InfiniBand verbs call failed",
    severity="error",
    cause="A verbs call NCCL needs to set up or use an RDMA connection failed; the error text names "
          "the reason.",
    fix="Run ib_write_bw between the same two nodes with the same device, GID index and traffic "
        "class (perftest) to reproduce outside NCCL; check `ibv_devinfo` and `show_gids`.",
    docs=f"{NCCL_TROUBLESHOOTING} (networking); src/misc/ibvwrap.cc",
    patterns=compile_all(r"Call to (?P<call>ibv_\w+) failed(?: with (?:error )?(?P<err>.*))?$"),
    keywords=("Call to ibv_",),
    explain=_verbs_detail)

GDR_NOT_READY = Signature(
    id="ib-gdr-not-ready",
    title="GPUDirect RDMA is disabled for the HCAs NCCL uses",
    severity="warning",
    cause="NCCL's IB transport offers GPUDirect RDMA only when nvidia-peermem (or the legacy "
          "nv_peer_mem) is loaded or DMA-BUF registration works; otherwise every transfer between "
          "nodes is staged through host memory (lower bandwidth, more CPU).",
    fix="Load the peer-memory module on every node (`modprobe nvidia-peermem`, check "
        "/sys/module/nvidia_peermem) or use a kernel and the open GPU kernel module with DMA-BUF "
        "support; then look for `via NET/IB/<n>/GDRDMA` in the channel lines. Not on DGX Spark "
        "(GB10), where GPUDirect RDMA is not supported by design.",
    docs=f"{NCCL_TROUBLESHOOTING} (GPU Direct); src/transport/net_ib/gdr.cc; "
         "https://github.com/NVIDIA/nccl/issues/1537")



#: DGX Spark's integrated GB10 supports neither nvidia-peermem nor DMA-BUF (DGX Spark porting guide,
#: https://docs.nvidia.com/dgx/dgx-spark-porting-guide/porting/cuda.html): nothing to load there.
NOT_ON_SPARK = (" Not on DGX Spark (GB10): GPUDirect RDMA is not supported there by design "
                "(nvidia-peermem and DMA-BUF do not work on its integrated GPU), so host staging "
                "is expected and there is nothing to load.")


def peermem_words(version: Optional[str]) -> tuple[str, str]:
    """Cause and fix of ``GPU Direct RDMA Disabled for HCA n`` (``(no module)`` in some versions)
    for the NCCL version that printed it: the peer-memory files that version looks for
    (src/transport/net_ib.cc ncclIbGdrSupport; src/transport/net_ib/gdr.cc from 2.30). NCCL <= 2.8
    knows only nv_peer_mem; 2.9-2.22 also the memory_peers registration of nvidia-peermem; from
    2.23 also /sys/module/nvidia_peermem (NVIDIA/nccl#1676: a DGX OS upgrade replacing nv_peer_mem
    by nvidia-peermem turned GPUDirect RDMA off for NCCL <= 2.22).

    >>> "nv_peer_mem" in peermem_words("2.8.4")[0], "2.23" in peermem_words("2.21.5")[0]
    (True, True)
    >>> "not loaded" in peermem_words("2.27.3")[0], "1676" in peermem_words(None)[0]
    (True, True)
    """
    try:
        v = tuple(int(x) for x in (version or "").split(".")[:2])
    except ValueError:
        v = ()
    check = "`lsmod | grep peermem` and `ls /sys/kernel/mm/memory_peers/ /sys/module/nvidia_peermem`"
    if v and v < (2, 9):
        return (f"NCCL {version} recognises only the legacy nv_peer_mem module "
                "(/sys/kernel/mm/memory_peers/nv_mem/version); the nvidia-peermem module that "
                "drivers >= 470 ship is not seen by it, so GPUDirect RDMA stays off even where "
                "that module is loaded.",
                f"Check {check}; upgrade NCCL (>= 2.23 reads /sys/module/nvidia_peermem) or load "
                "nv_peer_mem.")
    if v and v < (2, 23):
        return (f"NCCL {version} looks only for /sys/kernel/mm/memory_peers/nv_mem/version and "
                ".../nvidia-peermem/version; an nvidia_peermem module that does not register "
                "there (a DGX OS or driver upgrade that replaced nv_peer_mem, NVIDIA/nccl#1676) is "
                "not seen before NCCL 2.23, which also reads /sys/module/nvidia_peermem/version. "
                "Without it GPUDirect RDMA stays off unless DMA-BUF works.",
                f"Check {check}: loaded but unseen, upgrade NCCL to >= 2.23 (or load nv_peer_mem); "
                "not loaded, `modprobe nvidia-peermem`; or use DMA-BUF (open GPU kernel module, "
                "kernel >= 5.12).")
    if v:
        return (f"NCCL {version} found none of /sys/kernel/mm/memory_peers/nv_mem/version, "
                ".../nv_mem_nc/version or /sys/module/nvidia_peermem/version: the peer-memory "
                "module is not loaded on this host, and DMA-BUF registration was not available "
                "either.",
                "`modprobe nvidia-peermem` on this host (and at boot), or use DMA-BUF (open GPU "
                "kernel module, kernel >= 5.12); then look for `via NET/IB/<n>/GDRDMA` in the "
                "channel lines." + NOT_ON_SPARK)
    return ("NCCL found no peer-memory module it recognises: either none is loaded, or NCCL <= "
            "2.22 does not see the nvidia_peermem that is (it reads only "
            "/sys/kernel/mm/memory_peers/{nv_mem,nvidia-peermem}/version; 2.23 added "
            "/sys/module/nvidia_peermem, NVIDIA/nccl#1676); DMA-BUF registration was not "
            "available either.",
            f"Check {check}: loaded but unseen, upgrade NCCL to >= 2.23; not loaded, `modprobe "
            "nvidia-peermem`; or use DMA-BUF (open GPU kernel module, kernel >= 5.12)."
            + NOT_ON_SPARK)


def _mtu_detail(m: re.Match[str]) -> Detail:
    if m.groupdict().get("status") is not None:
        return Detail(message="IB completion error 1 (IBV_WC_LOC_LEN_ERR): a message was longer "
                              "than the buffer or MTU the receiving side expected",
                      variant="status 1")
    return Detail(message="the HCA raised the asynchronous event 'local access violation work "
                          "queue error' on a queue pair", variant="async event")


MTU_MISMATCH = Signature(
    id="cluster-mtu-mismatch",
    title="IB/RoCE length or access error on a queue pair (usually an MTU mismatch)",
    severity="error",
    cause="The two ends of a connection disagree on the path MTU, or jumbo frames are not supported "
          "end to end: NCCL 2.20.x stopped adjusting the remote MTU (current releases negotiate the "
          "smaller one), and RoCE ports whose netdev MTU differs between nodes or from the switch "
          "drop or reject the larger packets.",
    fix="Make the MTU the same on every node and switch port (RoCE: netdev MTU 4200 gives an active "
        "IB MTU of 4096); compare `ibv_devinfo` active_mtu on both ends and test the path with "
        "`ping -M do -s <MTU-28> <peer>`.",
    docs="https://github.com/NVIDIA/nccl/issues/1524; https://github.com/NVIDIA/nccl/issues/1957; "
         "src/transport/net_ib (ncclIbAsyncThreadMain, completion status)",
    patterns=compile_all(
        r"Got async event : local access violation work queue error",
        r"Got completion (?:from peer \S+? )?with (?:error |status=)(?:IBV_WC_LOC_LEN_ERR\()?"
        r"(?P<status>1)\b"),
    keywords=("local access violation", "Got completion"),
    explain=_mtu_detail)

PORT_ERROR = Signature(
    id="cluster-ib-ports-down",
    title="an RDMA port went down while NCCL was using it",
    severity="error",
    cause="The HCA reported the asynchronous event 'port error' (IBV_EVENT_PORT_ERR): the link of a "
          "port NCCL uses became unavailable (cable, transceiver, switch port, or the subnet "
          "manager). Connections over that rail fail, usually as completion errors or a timeout.",
    fix="Check the port on the host named here (`ibstat`, `ibv_devinfo`, `mlxlink -d <dev>`), its "
        "cable and switch port, and the subnet manager; restrict NCCL_IB_HCA to healthy ports "
        "until it is fixed.",
    docs="src/transport/net_ib (ncclIbAsyncThreadMain: 'Got async event'); "
         "https://man7.org/linux/man-pages/man3/ibv_get_async_event.3.html",
    patterns=compile_all(r"(?:(?P<dev>[\w.\-]+:\d+) )?Got async event : port error"),
    keywords=("async event : port error",),
    explain=lambda m: Detail(message=f"RDMA port {m.group('dev') or ''} reported 'port error' (link "
                                     "down) during the job".replace("port  ", "port "),
                             variant=m.group("dev") or ""))

SIGNATURES = (IB_COMPLETION_ERROR, MTU_MISMATCH, PORT_ERROR, ROCE_GID_INDEX, MEMLOCK, VERBS_FAILED)
DERIVED = (GDR_NOT_READY,)
