"""cluster-net-plugin-partial: a network plugin, or libnccl itself, on only some nodes."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname


def _plugin(node: dict[str, Any]) -> str | None:
    choice = fact(node, "nccl.net_plugin") or {}
    return choice.get("path") if isinstance(choice, dict) else None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when NCCL would load a net plugin on some nodes and none on others, or when libnccl
    is found on some nodes only."""
    if len(nodes) < 2:
        return []
    findings = []
    plugins = {hostname(n): _plugin(n) for n in nodes}
    with_plugin = sorted(h for h, p in plugins.items() if p)
    without = sorted(h for h, p in plugins.items() if not p)
    if with_plugin and without:
        shown = ", ".join(f"{h} ({plugins[h]})" for h in with_plugin[:6])
        findings.append(Finding(
            message=(f"NCCL loads a network plugin on {len(with_plugin)} node(s), {shown}, but "
                     f"none on {', '.join(without[:6])}: the nodes pick different transports "
                     "and the job hangs or fails at connection setup"),
            fix=("Install the same plugin (libnccl-net.so, e.g. aws-ofi-nccl or nccl-rdma-sharp-"
                 "plugins) on every node, or remove it everywhere; NCCL_NET_PLUGIN=none disables "
                 "it on the nodes that have it"),
            evidence={"nccl.net_plugin.path": plugins},
            hosts=tuple(without + with_plugin)))
    libs = {hostname(n): len(fact(n, "nccl.libraries", [])) for n in nodes}
    missing = sorted(h for h, c in libs.items() if not c)
    if missing and len(missing) < len(nodes):
        findings.append(Finding(
            message=(f"no libnccl was found on {', '.join(missing[:6])}, while the other nodes "
                     "have one"),
            fix="Install the same NCCL (or the same torch with its nvidia-nccl wheel) everywhere",
            evidence={"nccl.libraries": libs}, hosts=tuple(missing)))
    return findings


RULE = Rule(
    id="cluster-net-plugin-partial",
    title="Install the NCCL network plugin on every node or none",
    severity=Severity.ERROR,
    reads=("nccl.net_plugin", "nccl.libraries"),
    sets=(),
    why=("NCCL dlopens libnccl-net.so (or NCCL_NET_PLUGIN) at init and, when it loads, prefers "
         "the plugin's network over its internal IB and Socket transports (src/plugin/net.cc). "
         "Ranks that found the plugin and ranks that did not then try to connect over different "
         "transports, and the job hangs (NVIDIA/nccl#1634: libnccl-net.so on part of a cluster)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/plugin/net.cc",
    fix="The same plugin on every node, or none anywhere (NCCL_NET_PLUGIN=none).",
    check=check,
    scope="cluster",
)
