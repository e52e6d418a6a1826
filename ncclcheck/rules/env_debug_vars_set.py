"""env-debug-vars-set: debugging and tuning variables left in the environment or config files.

NCCL's environment documentation splits variables into system configuration and *debugging*
ones, which "should not be used in production nor retained in scripts": they pin algorithms,
protocols, channel counts or buffers for one experiment and silently cost bandwidth elsewhere
(nccl-tests#228: a stale NCCL_P2P_LEVEL=LOC cut an NVLink box's bus bandwidth to a fraction).
``NCCL_DEBUG=WARN`` (the recommended production level) and ``VERSION`` are fine; ``INFO`` and
``TRACE`` slow jobs and flood logs.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname

#: Variables from the debugging / tuning part of NCCL's env docs (env.rst, "Debugging").
DEBUG_VARS = frozenset({
    "NCCL_DEBUG_SUBSYS", "NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_BUFFSIZE",
    "NCCL_NTHREADS", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_SHM_DISABLE", "NCCL_CHECKS_DISABLE", "NCCL_CHECK_POINTERS", "NCCL_LAUNCH_MODE",
    "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_P2P_PXN_LEVEL", "NCCL_GRAPH_FILE",
    "NCCL_GRAPH_DUMP_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_P2P_LL_THRESHOLD", "NCCL_TREE_THRESHOLD", "NCCL_LL_THRESHOLD", "NCCL_SET_STACK_SIZE",
    "NCCL_IGNORE_DISABLED_P2P",
})
QUIET_DEBUG_LEVELS = ("WARN", "VERSION", "")


def debug_vars(facts: dict[str, Any]) -> dict[str, str]:
    """Debugging variables set on this node, from its environment and NCCL config files.

    >>> doc = {"sections": {"env": {"status": "ok", "data": {"nccl": {"NCCL_DEBUG": "INFO",
    ...        "NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": "Ring"}}}}}
    >>> debug_vars(doc)
    {'NCCL_ALGO': 'Ring', 'NCCL_DEBUG': 'INFO'}
    """
    found: dict[str, str] = {}
    sources = [(fact(facts, "env.nccl") or {}, ""), (fact(facts, "nccl.conf_env") or {}, " (config file)")]
    for values, where in sources:
        for name, value in values.items():
            if name in found:
                continue
            if name in DEBUG_VARS or (name == "NCCL_DEBUG"
                                      and str(value).strip().upper() not in QUIET_DEBUG_LEVELS):
                found[name] = f"{value}{where}"
    return dict(sorted(found.items()))


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """One finding per variable and value, naming the nodes where it is set."""
    by_setting: dict[str, list[str]] = {}
    for node in nodes:
        for name, value in debug_vars(node).items():
            by_setting.setdefault(f"{name}={value}", []).append(hostname(node))
    return [Finding(
        message=(f"{setting} is set on {len(hosts)} node(s) ({', '.join(hosts[:4])}"
                 f"{' ...' if len(hosts) > 4 else ''}): a debugging/tuning variable that NCCL's "
                 "docs keep out of production"),
        fix=f"Remove {setting.split('=', 1)[0]} unless a measurement shows it helps this cluster.",
        evidence={"setting": setting}, hosts=tuple(hosts))
        for setting, hosts in sorted(by_setting.items())]


RULE = Rule(
    id="env-debug-vars-set",
    title="Remove debugging and tuning variables from production",
    severity=Severity.WARNING,
    reads=("env.nccl", "nccl.conf_env?"),
    sets=(),
    why=("NCCL's env docs list these under 'Debugging': they 'should not be used in production "
         "nor retained in scripts', because they override choices NCCL makes per topology and "
         "message size; NCCL_DEBUG=INFO also slows every rank. A stale NCCL_P2P_LEVEL=LOC "
         "disabled NVLink in nccl-tests#228."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#debugging",
    fix="Unset the listed variables (and remove them from /etc/nccl.conf, ~/.nccl.conf).",
    check=check,
    scope="cluster",
)
