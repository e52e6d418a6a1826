"""What PyTorch and nccl-tests print when NCCL fails: watchdog timeouts and error surfaces (§2.7, row 23)."""

from __future__ import annotations

import re
from typing import Optional

from ncclcheck.signatures.base import Detail, Signature, compile_all

_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d{1,9})\]")


def _rank_of(text: str) -> Optional[int]:
    """The rank in torch's ``[Rank 3]`` / ``[PG ID 0 PG GUID 0(default_pg) Rank 3]`` tag.

    >>> _rank_of("[PG ID 0 PG GUID 0(default_pg) Rank 3] Exception"), _rank_of("x")
    (3, None)
    """
    rank = _RANK.search(text)
    return int(rank.group(1)) if rank else None


def _watchdog_detail(m: re.Match[str]) -> Detail:
    groups = m.groupdict()
    if groups.get("op"):
        msg = (f"collective {groups['op']} (SeqNum {groups.get('seq') or '?'}) ran for "
               f"{int(groups['ran']) // 1000} s, past its {int(groups['timeout']) // 1000} s timeout")
    else:
        msg = "the watchdog or its heartbeat monitor timed out"
    return Detail(message=msg, rank=_rank_of(m.string), variant=groups.get("op") or "heartbeat")


WATCHDOG_TIMEOUT = Signature(
    id="log-watchdog-timeout",
    title="PyTorch's NCCL watchdog timed out a collective",
    severity="error",
    cause="A collective did not complete within the process group timeout (10 min by default): a "
          "rank died or hung, ranks issued different collectives (desync), or the network stalled "
          "(IB errors, a wrong interface, PCIe ACS). The timeout is where it surfaces, rarely the "
          "root cause.",
    fix="Find the first rank that failed or fell behind: NCCL_DEBUG=WARN on all ranks, "
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 with TORCH_NCCL_DUMP_ON_TIMEOUT=1 (flight recorder), "
        "TORCH_NCCL_DESYNC_DEBUG=1; only raise init_process_group(timeout=...) for steps that are "
        "legitimately slow.",
    docs="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; "
         "https://github.com/pytorch/pytorch/issues/118369",
    patterns=compile_all(
        r"Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?"
        r"OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<timeout>\d{1,15})\) ran for (?P<ran>\d{1,15}) "
        r"milliseconds",
        r"Heartbeat monitor timed out"),
    keywords=("Watchdog caught", "Heartbeat monitor timed out"),
    explain=_watchdog_detail)

_REASONS = ("unhandled system error", "internal error", "invalid usage", "invalid argument",
            "remote process exited or there was a network error", "unhandled cuda error")


def _call_failed_detail(m: re.Match[str]) -> Detail:
    text = m.string
    if "detected by watchdog" in m.group(0):
        return Detail(message="PyTorch's watchdog caught an NCCL error or timeout and the log has "
                              "no NCCL WARN line saying why", variant="watchdog exception",
                      rank=_rank_of(text))
    reason = next((r for r in _REASONS if r in text), None) or m.group(0)
    return Detail(message=f"an NCCL call failed ({reason.strip()[:100]}) and the log has no NCCL "
                          "WARN line saying why", variant=reason[:60])


NCCL_CALL_FAILED = Signature(
    id="log-nccl-call-failed",
    title="an NCCL call failed without a recognised cause in the log",
    severity="error",
    cause="PyTorch (or nccl-tests) reports the NCCL result code only; the reason is in NCCL's own "
          "WARN lines, which are missing from this log or not recognised.",
    fix="Re-run with NCCL_DEBUG=WARN (or INFO) and NCCL_DEBUG_SUBSYS=INIT,NET on every rank and "
        "diagnose that log; the line after 'Last error:' in the traceback is NCCL's reason.",
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",
    patterns=compile_all(r"NCCL error in: \S+, [^,]+", r"Test NCCL failure \S+ '[^']*'",
                         r"Exception \(either an error or timeout\) detected by watchdog",
                         r"ncclCommInitRank failed: .+", r"NCCL Error \d+: .+",
                         r"\bnccl(?:SystemError|InternalError|InvalidUsage|InvalidArgument|"
                         r"RemoteError)\b"),
    keywords=("NCCL error in", "NCCL failure", "ncclCommInitRank failed", "NCCL Error",
              "ncclSystemError", "ncclInternalError", "ncclInvalidUsage", "ncclInvalidArgument",
              "ncclRemoteError", "detected by watchdog"),
    explain=_call_failed_detail,
    fallback=True)

SIGNATURES = (WATCHDOG_TIMEOUT, NCCL_CALL_FAILED)
