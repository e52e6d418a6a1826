"""env-ll128-buffsize: an NCCL_LL128_BUFFSIZE that LL128's 120-byte payload lines do not divide.

LL128 moves 128-byte lines that carry 120 bytes of data and an 8-byte flag
(``NCCL_LL128_LINESIZE`` 128, ``NCCL_LL128_DATAELEMS`` 15 of 16 words: src/include/device.h@v2.30.7-1);
its default buffer is 120 x 640 threads x 8 steps x 8 bytes (``DEFAULT_LL128_BUFFSIZE``,
src/init.cc@v2.30.7-1). NCCL's maintainer (NVIDIA/nccl#1739): "LL128 does require to be a
multiple of 120 bytes", 131072 hung or failed the data check, 123000 (120 x 1025) hung too;
"120 * a power of two is usually a good recipe", and the recommendation is not to change it.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity
from ncclcheck.rules.common import configured

VAR = "NCCL_LL128_BUFFSIZE"


def check(facts: dict[str, Any]) -> list[Finding]:
    """Error for a value not a multiple of 120; warning for 120 x n, n not a power of two."""
    raw = configured(facts, VAR)
    if raw is None:
        return []
    try:
        value = int(str(raw).strip(), 0)
    except ValueError:
        return []
    if value <= 0:
        return []
    fix = (f"Unset {VAR} (NCCL's default is 4915200 = 120 x 40960); if it must change, use 120 "
           "times a power of two, e.g. 122880, and check the data with nccl-tests -c 1")
    if value % 120:
        return [Finding(
            message=(f"{VAR}={raw} is not a multiple of 120 bytes, LL128's data per 128-byte "
                     "line: LL128 collectives hang or return wrong data (NVIDIA/nccl#1739)"),
            fix=fix, evidence={VAR: raw})]
    lines = value // 120
    if lines & (lines - 1):
        return [Finding(
            message=(f"{VAR}={raw} is 120 x {lines}, not 120 times a power of two: "
                     "NVIDIA/nccl#1739 saw 123000 (120 x 1025) hang"),
            fix=fix, evidence={VAR: raw}, severity=Severity.WARNING)]
    return []


RULE = Rule(
    id="env-ll128-buffsize",
    title="Keep NCCL_LL128_BUFFSIZE a multiple of 120 bytes (or unset)",
    severity=Severity.ERROR,
    reads=("env.nccl", "nccl.conf_env?"),
    sets=(),
    why=("LL128 lines are 128 bytes holding 120 bytes of data and a flag (src/include/device.h"
         "@v2.30.7-1 NCCL_LL128_LINESIZE, NCCL_LL128_DATAELEMS); NCCL_LL128_BUFFSIZE is read "
         "as is (src/init.cc@v2.30.7-1 computeBuffSizes). A size that 120 does not divide hangs "
         "LL128 or corrupts its data (NVIDIA/nccl#1739, maintainer: 'LL128 does require to be a "
         "multiple of 120 bytes'; '120 * a power of two is usually a good recipe')."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/include/device.h",
    fix="Unset NCCL_LL128_BUFFSIZE, or use 120 x a power of two.",
    check=check,
)
