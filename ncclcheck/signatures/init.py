"""Whole-log verdicts: ranks that never finished init, debugging variables left set, and WARN
lines nothing explains."""

from __future__ import annotations

from ncclcheck.signatures.base import NCCL_ENV, NCCL_TROUBLESHOOTING, Signature

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

DEBUG_VARS_SET = Signature(
    id="env-debug-vars-set",
    title="debugging or tuning variables are set",
    severity="info",
    cause="NCCL's environment docs list these under 'Debugging': they pin algorithms, protocols, "
          "channels or buffers for one experiment and 'should not be used in production nor "
          "retained in scripts'; left set, they cost bandwidth on other sizes and topologies.",
    fix="Unset them (and remove them from /etc/nccl.conf, ~/.nccl.conf) unless a measurement on "
        "this cluster shows they help.",
    docs=f"{NCCL_ENV}#debugging")

DERIVED = (INIT_INCOMPLETE, DEBUG_VARS_SET, UNRECOGNIZED_WARN)
