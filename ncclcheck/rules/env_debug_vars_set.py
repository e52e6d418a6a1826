"""env-debug-vars-set: debugging and tuning variables left in the environment or config files.

NCCL's environment documentation has a "Debugging" section whose variables "should generally not
be set for production code" (env.rst): forcing them "will prevent NCCL from selecting the best
setting automatically" and "can cause performance problems in the long term, or even break some
functionality". This rule reports the ones from that section that pin an algorithm, protocol,
channel count, buffer, transport or topology choice (:data:`~ncclcheck.envformat.DEBUG_VARS`);
the section also holds fabric settings that vendors keep on purpose (Azure's
``NCCL_IB_PCI_RELAXED_ORDERING``, ``NCCL_NET_GDR_LEVEL``, ``NCCL_NVLS_ENABLE``), which are left
alone. Three undocumented overrides read by NCCL's source (:data:`SOURCE_ONLY`) pin the same
choices and are reported too.
Measured cost of one: NVIDIA/nccl#1987, ``NCCL_P2P_LEVEL=PXB`` on an 8x A100 SXM node ran 18%
slower than NCCL's own choice.

A vendor net plugin the node carries (GPUDirect-TCPX/TCPXO, gIB, aws-ofi-nccl: see
:mod:`ncclcheck.rules.vendors`) comes with settings its vendor's guide requires (GKE's TCPX
guide sets NCCL_ALGO, NCCL_PROTO, channel counts and chunk sizes): those are left alone.

``NCCL_DEBUG`` (a system setting) is reported above ``WARN``: ``INFO`` logs every connection and
channel of every rank at init, ``TRACE`` every call; ``WARN`` and ``VERSION`` are fine.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.envformat import DEBUG_VARS
from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.vendors import vendor_owned

#: Read by NCCL's source but not in its docs: a saved graph, a graph dump, and the override of
#: the "P2P is disabled between NVLINK connected GPUs" check (src/graph).
SOURCE_ONLY = frozenset({"NCCL_GRAPH_FILE", "NCCL_GRAPH_DUMP_FILE", "NCCL_IGNORE_DISABLED_P2P"})
QUIET_DEBUG_LEVELS = ("WARN", "VERSION", "")


def debug_vars(facts: dict[str, Any]) -> dict[str, str]:
    """Debugging variables set on this node, from its environment and NCCL config files.

    >>> doc = {"sections": {"env": {"status": "ok", "data": {"nccl": {"NCCL_DEBUG": "INFO",
    ...        "NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": "Ring"}}}}}
    >>> debug_vars(doc)
    {'NCCL_ALGO': 'Ring', 'NCCL_DEBUG': 'INFO'}
    """
    found: dict[str, str] = {}
    owned = vendor_owned(facts)
    sources = [(fact(facts, "env.nccl") or {}, ""), (fact(facts, "nccl.conf_env") or {}, " (config file)")]
    for values, where in sources:
        for name, value in values.items():
            if name in found or name in owned:
                continue
            if name in DEBUG_VARS or name in SOURCE_ONLY or (name == "NCCL_DEBUG"
                                      and str(value).strip().upper() not in QUIET_DEBUG_LEVELS):
                found[name] = f"{value}{where}"
    return dict(sorted(found.items()))


def _kind(name: str) -> str:
    if name == "NCCL_DEBUG":
        return "debug output above WARN (WARN is the production level)"
    if name in SOURCE_ONLY:
        return "an undocumented override from NCCL's source that pins its choice"
    return "from the Debugging section of NCCL's env docs: not for production"


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """One finding per variable and value, naming the nodes where it is set."""
    by_setting: dict[str, list[str]] = {}
    for node in nodes:
        for name, value in debug_vars(node).items():
            by_setting.setdefault(f"{name}={value}", []).append(hostname(node))
    return [Finding(
        message=(f"{setting} is set on {len(hosts)} node(s) ({', '.join(hosts[:4])}"
                 f"{' ...' if len(hosts) > 4 else ''}): {_kind(setting.split('=', 1)[0])}"),
        fix=(f"Remove {setting.split('=', 1)[0]} unless a measurement (bench --compare) shows it "
             "helps this cluster."),
        evidence={"setting": setting}, hosts=tuple(hosts))
        for setting, hosts in sorted(by_setting.items())]


RULE = Rule(
    id="env-debug-vars-set",
    title="Remove debugging and tuning variables from production",
    severity=Severity.WARNING,
    reads=("env.nccl", "nccl.conf_env?", "env.other?", "nccl.net_plugin?", "nccl.net_plugins?"),
    sets=(),
    why=("NCCL's env docs put these under 'Debugging': forcing them 'will prevent NCCL from "
         "selecting the best setting automatically' and they 'should generally not be set for "
         "production code'; e.g. NCCL_P2P_LEVEL=PXB ran 18% slower than NCCL's own choice on "
         "8x A100 (NVIDIA/nccl#1987). NCCL_DEBUG=INFO logs every connection at init; WARN is "
         "the production level."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#debugging",
    fix="Unset the listed variables (and remove them from /etc/nccl.conf, ~/.nccl.conf).",
    check=check,
    scope="cluster",
)
