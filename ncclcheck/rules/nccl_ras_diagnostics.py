"""nccl-ras-diagnostics: NCCL's own health tools, where the NCCL in use has them: RAS (since
2.24, on by default: env.rst@v2.30.7-1 NCCL_RAS_ENABLE, src/bootstrap.cc@v2.24.3-1) and the
active diagnostics at init (NCCL_RUN_DIAGNOSTICS, NCCL_RUN_RAS_DIAGNOSTICS), whose results are
logged as ``NCCL DIAG`` lines (P2P verification, network bandwidth across ranks).

The diagnostics are in no tag of NVIDIA/nccl up to v2.30.7-1 (the newest in the source read);
the variables and the ``NCCL DIAG`` strings are in the library of the nvidia-nccl-cu12 2.32.3
wheel, and issue 23 dates them to 2.31, which is the gate used here.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, version_tuple
from ncclcheck.rules.cluster_nccl_version_mismatch import node_version
from ncclcheck.rules.common import configured

RAS_SINCE, DIAG_SINCE = (2, 24), (2, 31)


def check(facts: dict[str, Any]) -> list[Finding]:
    """INFO: RAS turned off on an NCCL that has it; diagnostics available but not asked for."""
    version = node_version(facts)
    parsed = version_tuple(version)
    if not parsed or parsed < RAS_SINCE:
        return []
    findings = []
    if (configured(facts, "NCCL_RAS_ENABLE") or "").strip() == "0":
        findings.append(Finding(
            message=(f"NCCL {version} has RAS (2.24+), but NCCL_RAS_ENABLE=0 turns it off: a hung "
                     "job can then not be asked which ranks are missing (ncclras)"),
            fix="Unset NCCL_RAS_ENABLE (RAS is on by default); query a running job with ncclras",
            evidence={"nccl.version": version, "NCCL_RAS_ENABLE": "0"}))
    if parsed >= DIAG_SINCE and not configured(facts, "NCCL_RUN_DIAGNOSTICS"):
        findings.append(Finding(
            message=(f"NCCL {version} can check the machine itself at init (P2P verification "
                     "between every GPU pair, network bandwidth across ranks) with "
                     "NCCL_RUN_DIAGNOSTICS; its 'NCCL DIAG' lines name the slow or failing rank"),
            fix=("For a pre-flight or a suspect run: NCCL_RUN_DIAGNOSTICS=1 (and "
                 "NCCL_RUN_RAS_DIAGNOSTICS=1), with NCCL_DEBUG=INFO; feed the log to ncclcheck "
                 "diagnose"),
            evidence={"nccl.version": version}))
    return findings


RULE = Rule(
    id="nccl-ras-diagnostics",
    title="Use NCCL's own RAS and diagnostics where the NCCL has them",
    severity=Severity.INFO,
    reads=("env.nccl?", "nccl.conf_env?", "nccl.versions?", "nccl.torch_loads?",
           "nccl.system_loads?"),
    sets=(),
    why=("NCCL 2.24 added RAS, on by default (NCCL_RAS_ENABLE, env.rst@v2.30.7-1; "
         "src/bootstrap.cc@v2.24.3-1), which ncclras queries while a job runs. Newer releases "
         "(the 2.32.3 library has NCCL_RUN_DIAGNOSTICS, NCCL_RUN_RAS_DIAGNOSTICS and 'NCCL DIAG' "
         "lines; issue 23 dates them to 2.31) verify P2P between every GPU pair and measure "
         "network bandwidth across ranks at init, naming the rank that is off."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ras-enable",
    fix="Keep RAS on; run with NCCL_RUN_DIAGNOSTICS=1 for a pre-flight where NCCL has it.",
    check=check,
)
