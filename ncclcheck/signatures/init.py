"""Whole-log verdicts: ranks that never finished init, and WARN lines nothing explains."""

from __future__ import annotations

from ncclcheck.signatures.base import NCCL_TROUBLESHOOTING, Signature

INIT_INCOMPLETE = Signature(
    id="log-init-incomplete",
    title="some ranks started NCCL init but never reached Init COMPLETE",
    severity="warning",
    cause="NCCL prints 'Init START' when a communicator is created and 'Init COMPLETE' when every "
          "rank has connected; ranks stuck between the two are waiting for a peer (wrong interface, "
          "firewall, a rank that died or never started) or failed on their own.",
    fix="Look at the hosts listed: their last NCCL lines and any WARN show where init stopped; "
        "compare their Bootstrap/NET lines with the ranks that completed.",
    docs=f"{NCCL_TROUBLESHOOTING}; src/init.cc (ncclCommInitRank)")

UNRECOGNIZED_WARN = Signature(
    id="log-unrecognized-warn",
    title="NCCL printed warnings this tool does not recognise",
    severity="info",
    cause="These WARN lines match no known failure signature; many are harmless, some are the "
          "start of a problem this tool cannot name.",
    fix="Read the lines listed as evidence; search them in the NCCL issue tracker.",
    docs="https://github.com/NVIDIA/nccl/issues")

DERIVED = (INIT_INCOMPLETE, UNRECOGNIZED_WARN)
