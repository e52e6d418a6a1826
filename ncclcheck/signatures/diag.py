"""NCCL's own diagnostics: the ``NCCL DIAG`` lines of ``NCCL_RUN_DIAGNOSTICS`` and
``NCCL_RUN_RAS_DIAGNOSTICS`` (NCCL >= 2.31), read and said in words.

NCCL prints them as ``<host>:<pid> NCCL DIAG <text>``, not as INFO or WARN lines, each result led
by a tag: ``[OK]`` when a check passed, ``[INFO]`` otherwise; a problem is an ``[INFO]`` line
whose text names it. Init-time diagnostics: ``p2p:`` (a write and a read between every GPU
pair) and ``net bw:`` (bandwidth of each rank's NIC, ranks more than 30% off the median named);
RAS diagnostics: ``GPU inventory``, ``NVIDIA graphics driver version``, ``CUDA driver
version``, ``ECC``, ``NVLink``, ``IOMMU mode`` / ``IOMMU groups``, ``ATS state``,
``rdma_topo check``, ``NCCL environment`` and ``Xid``/``SXid`` events from the kernel log, each
across the communicator's ranks.

Source: the checks came with v2.31.2-1 (merged into master by NVIDIA/nccl#2339; NVIDIA/nccl#2342
patches their ``src/diagnostics/p2p.cc``); the mirror read here stops before (tags up to
v2.30.7-1, master at 2.31.0a7, neither has them), so the formats matched are those in the
nvidia-nccl-cu12 2.32.3 wheel's libnccl.so.2 (``strings``: ras/diagnostics.cc,
diagnostics_gpu.cc, diagnostics_pci.cc, diagnostics_env.cc, diagnostics_xid.cc and the init-time
checks), e.g. ``%s:%d NCCL DIAG [INFO] net bw: %s rank %d (%s): %.1f Gbit/s, >30%% off median
%.1f Gbit/s in comm 0x%lx``.
"""

from __future__ import annotations

import re
from typing import Optional

from ncclcheck.signatures.base import Detail, Signature

#: (finding, regex over the text after the tag, severity, what it means, what to do), first
#: match wins; a check that passed goes to the plain ``log-nccl-diag`` finding (info).
_MEANINGS: tuple[tuple[str, re.Pattern[str], str, str, str], ...] = tuple(
    (group, re.compile(rx), sev, means, fix) for group, rx, sev, means, fix in (
        ("p2p", r"^p2p: (?:write|read) mismatch", "error",
         "a GPU-to-GPU P2P copy returned other bytes than were written: NCCL's P2P transport "
         "between these GPUs corrupts data",
         "Do not run on this node until fixed: check PCIe ACS on the switches between the GPUs "
         "and the IOMMU, nvidia-smi topo -p2p rw and NVLink state; NCCL_P2P_DISABLE=1 as a "
         "stopgap"),
        ("p2p", r"^p2p: only \d+/\d+ GPU-to-GPU peer accesses passed", "error",
         "some GPU pairs failed NCCL's P2P verification: P2P between them hangs or gives wrong data",
         "Check PCIe ACS/IOMMU between the failing pairs and nvidia-smi topo -p2p rw; "
         "NCCL_P2P_LEVEL or NCCL_P2P_DISABLE=1 as a stopgap"),
        ("p2p", r"^p2p: (?:peer-memory import|destination buffer|local CUDA setup|topology check|"
         r"launch/check|setup) failed|^p2p: destination buffer unavailable", "warning",
         "NCCL's P2P check could not run between some GPUs (import of peer memory or CUDA setup "
         "failed): the same step fails when NCCL connects them",
         "Read the reason in the line and the CUDA/NCCL warnings just before it"),
        ("net-bw", r"^net bw: \S+ rank \d+ \(.*\): [\d.]+ Gbit/s, >30% off median|^net bw: \S+: \d+ more "
         r"ranks >30% off median", "warning",
         "a rank's NIC measured more than 30% off the median: one slow link slows every "
         "collective to its speed",
         "Check that rank's NIC: link speed and errors (ibstat, ethtool -S), cable, PCIe width, "
         "NUMA placement; compare with ncclcheck bench"),
        ("diag", r"^net bw: [\d.]+/[\d.]+/[\d.]+ Gbit/s", "info",
         "NCCL measured the network bandwidth of every rank's NIC (min/median/max)", ""),
        ("diag", r"^net bw: ", "info",
         "NCCL's network bandwidth check did not run or was partial (the line says why)", ""),
        ("gpu-health", r"^ECC: uncorrected volatile errors", "error",
         "a GPU has uncorrected ECC errors since the driver loaded: its results cannot be trusted",
         "Drain the node; reset the GPU (nvidia-smi -r) or follow the Xid guidance; replace it if "
         "the errors come back"),
        ("gpu-health", r"^ECC: corrected volatile errors at or above threshold", "warning",
         "a GPU corrects many ECC errors: memory that is wearing out",
         "Watch the count (nvidia-smi -q -d ECC) and plan the GPU's replacement"),
        ("gpu-health", r"^NVLink: inactive link", "error",
         "NVLink links are down on some GPUs: NCCL's NVLink bandwidth drops and, with links down "
         "on one side only, collectives can hang",
         "Check nvidia-smi nvlink -s and the fabric manager; reset or drain the node"),
        ("gpu-health", r"^NVLink: (?:link-count mismatch|inconsistent link speeds)", "warning",
         "NVLink differs across ranks: the slowest node sets the pace", "Compare nvidia-smi "
         "nvlink -s across the nodes"),
        ("mismatch", r"^(?:GPU inventory|NVIDIA graphics driver version|CUDA driver version): "
         r"(?:count |model )?mismatch", "warning",
         "nodes differ in GPUs or drivers: ranks take different code paths and the slowest sets "
         "the pace", "Run the same GPUs, driver and CUDA on every node of the job"),
        ("mismatch", r"^NCCL environment: (?:mismatch|\d+ NCCL_\* env var\(s\) differ|NCCL_\w+=)", "warning",
         "ranks run with different NCCL_* variables: a mismatch that can hang or corrupt "
         "(protocols, buffer sizes)", "Export the same NCCL_* environment on every rank"),
        ("mismatch", r"^IOMMU (?:mode: enabled|groups: GPU and NIC groups differ)", "warning",
         "the IOMMU translates DMA between GPU and NIC (or puts them in different groups): "
         "GPUDirect RDMA is slower or fails",
         "Boot with iommu=pt (passthrough) on bare metal; in VMs enable ATS (NCCL docs: PCI "
         "Access Control Services)"),
        ("diag", r"^ATS state: (?:disabled|ATSCtl disabled)", "info",
         "ATS is off on the NICs: with the IOMMU on (VMs), GPUDirect traffic is translated by "
         "the IOMMU", ""),
        ("mismatch", r"^rdma_topo check: failed", "warning",
         "NVIDIA's rdma_topo found a GPU/NIC topology problem on some ranks",
         "Run rdma_topo on the named ranks' nodes"),
        ("gpu-health", r"^S?Xid \d+ detected .*(?:Restart the affected|resetting the affected|recommended "
         r"response)", "error",
         "the GPU driver logged an Xid (SXid: NVSwitch) that needs action on that host",
         "Follow the Xid catalog link in the line; drain the host until done"),
        ("diag", r"^S?Xid \d+ detected", "info", "the GPU driver logged an Xid that needs no action", ""),
        ("diag", r"diagnostics incomplete|incomplete for comm", "info",
         "NCCL's diagnostics did not hear from every rank", ""),
    ))
_LINE = re.compile(r"NCCL DIAG (?:\[(OK|INFO|[A-Z]+)\]\s*)?(.*\S)")
_QUIET = re.compile(r"^(?:===|NCCL diagnostics completed|p2p: temporarily enabled|"
                    r"net bw: skipped|net bw: mode=)")
_RANK = re.compile(r"\brank (\d+) \(")


_PASSED = re.compile(r"\b(?:consistent|match on|passed on|no uncorrected|all active|no events)\b")


def classify(line: str) -> Optional[tuple[str, Detail]]:
    """Which finding an ``NCCL DIAG`` line belongs to, and what it says; None for banners.

    Lines in the 2.32.3 library's formats (see the module docstring):

    >>> g, d = classify("n1:7 NCCL DIAG [INFO] net bw: IB rank 11 (n2): 212.4 Gbit/s, >30% off "
    ...                 "median 391.0 Gbit/s in comm 0x55")
    >>> g, d.severity, d.rank
    ('net-bw', 'warning', 11)
    >>> classify("n1:7 NCCL DIAG [OK]   p2p: verified P2P access in both directions between "
    ...          "every GPU pair (56 peer accesses)")[1].message[-8:]
    ': passed'
    >>> classify("n1:7 NCCL DIAG === RAS Diagnostics ===") is None
    True
    """
    m = _LINE.search(line)
    if m is None or _QUIET.match(m.group(2)):
        return None
    tag, text = m.group(1) or "", m.group(2)
    check = text.split(":", 1)[0][:40]
    rank = _RANK.search(text)
    for group, rx, severity, means, fix in _MEANINGS:
        if rx.search(text):
            if tag == "OK" or _PASSED.search(text):
                group, severity = "diag", "info"
            return group, Detail(message=f"NCCL DIAG {text[:220]}: {means}",
                                 variant=f"{check} {severity}", severity=severity, fix=fix,
                                 rank=int(rank.group(1)) if rank else None)
    return "diag", Detail(message=f"NCCL DIAG {text[:220]}" + (": passed" if tag == "OK" else ""),
                          variant=f"{check} info", severity="info")


def _explainer(group: str):
    def explain(m: re.Match[str]) -> Optional[Detail]:
        found = classify(m.string)
        return found[1] if found and found[0] == group else None
    return explain


CAUSE = ("NCCL >= 2.31 checks the machine at init when asked (NCCL_RUN_DIAGNOSTICS: P2P "
         "between every GPU pair, each rank's network bandwidth; NCCL_RUN_RAS_DIAGNOSTICS: GPU, "
         "driver, ECC, NVLink, IOMMU/ATS, NCCL_* environment and Xid consistency across ranks) "
         "and logs each result as an 'NCCL DIAG' line: [OK] passed, [INFO] with the problem.")
DOCS = ("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; "
        "src/diagnostics/p2p.cc, src/ras/diagnostics*.cc (v2.31.2-1, "
        "https://github.com/NVIDIA/nccl/pull/2339); formats from nvidia-nccl-cu12 2.32.3's "
        "libnccl.so.2")


def _signature(group: str, title: str, severity: str, fix: str) -> Signature:
    return Signature(id=f"log-nccl-diag-{group}" if group != "diag" else "log-nccl-diag",
                     title=title, severity=severity, cause=CAUSE, fix=fix, docs=DOCS,
                     patterns=(_LINE,), keywords=("NCCL DIAG",), explain=_explainer(group))


SIGNATURES = (
    _signature("p2p", "NCCL's diagnostics: P2P between GPUs failed verification", "error",
               "Check PCIe ACS/IOMMU and NVLink between the named GPUs; NCCL_P2P_DISABLE=1 as a "
               "stopgap"),
    _signature("net-bw", "NCCL's diagnostics: a rank's network bandwidth is off the median",
               "warning", "Check the named rank's NIC, cable and PCIe link"),
    _signature("gpu-health", "NCCL's diagnostics: GPU health (ECC, NVLink, Xid) needs action",
               "error", "Drain the node and follow the line's guidance"),
    _signature("mismatch", "NCCL's diagnostics: ranks differ (GPUs, drivers, NCCL_*, IOMMU)",
               "warning", "Make the nodes and the NCCL_* environment alike"),
    _signature("diag", "NCCL's own diagnostics ran (NCCL_RUN_DIAGNOSTICS, RAS)", "info",
               "Nothing to do for the [OK] lines; they show what NCCL checked"),
)

