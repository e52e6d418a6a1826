"""cloud-efa-plugin-owned: on AWS EFA, leave the variables aws-ofi-nccl sets to the plugin.

aws-ofi-nccl (the ``libnccl-net-ofi.so`` net plugin) injects NCCL settings per instance type
when the user has not set them (src/platform-aws.cpp ``insert_envvar(..., overwrite=false)``):
buffer and chunk sizes, a topology file, NVLS chunk sizes, the tuner, sometimes
``NCCL_PROTO=simple``. A value exported by hand wins over the plugin's and usually loses
bandwidth; the EFA cheatsheet also says the socket thread variables do not apply. So on EFA
nothing here sets them, and those already set are reported. EFA devices without the plugin mean
NCCL falls back to TCP over ENA.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import configured

#: What aws-ofi-nccl sets itself per platform when unset (src/platform-aws.cpp ``insert_envvar``).
PLUGIN_SETS = ("NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TOPO_FILE", "NCCL_PROTO",
               "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NET_FORCE_FLUSH",
               "NCCL_NETDEVS_POLICY", "NCCL_NVLS_ENABLE", "NCCL_TUNER_PLUGIN")
#: What the EFA guidance (aws-ofi-nccl doc/efa-env-var.md, the EFA cheatsheet) says to leave at
#: its default, or that does not apply to EFA.
GUIDANCE_LEAVES = ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "NCCL_MIN_NCHANNELS")
PLUGIN_OWNED = PLUGIN_SETS + GUIDANCE_LEAVES


def efa_devices(facts: dict[str, Any]) -> list[str]:
    """RDMA devices of the EFA driver (``rdmap<bus>s<slot>``, ``efa_<n>``)."""
    return [str(d.get("name")) for d in fact(facts, "ib.devices", [])
            if str(d.get("name", "")).startswith(("rdmap", "efa"))]


def ofi_plugin(facts: dict[str, Any]) -> str | None:
    """The aws-ofi-nccl library NCCL would open, or one that is installed, or None."""
    chosen = (fact(facts, "nccl.net_plugin") or {}).get("path") or ""
    if "ofi" in chosen.rsplit("/", 1)[-1] or "/amazon/" in chosen:
        return chosen
    for plugin in fact(facts, "nccl.net_plugins", []):
        path = str(plugin.get("path", ""))
        if plugin.get("kind") == "net" and ("ofi" in path.rsplit("/", 1)[-1] or "/amazon/" in path):
            return path
    return None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Report EFA nodes: variables set that the plugin owns, or a missing plugin."""
    efa = {hostname(n): (efa_devices(n), ofi_plugin(n)) for n in nodes}
    efa = {h: v for h, v in efa.items() if v[0] or v[1]}
    if not efa:
        return []
    findings = []
    no_plugin = sorted(h for h, (devs, plugin) in efa.items() if devs and not plugin)
    if no_plugin:
        findings.append(Finding(
            message=(f"EFA devices but no aws-ofi-nccl plugin on {', '.join(no_plugin[:6])}: "
                     "NCCL falls back to TCP sockets over ENA"),
            fix="Install aws-ofi-nccl (efa-installer, or the DLAMI/DLC images) and put its lib "
                "folder on LD_LIBRARY_PATH.",
            severity=Severity.ERROR, hosts=tuple(no_plugin),
            evidence={"ib.devices": {h: efa[h][0] for h in no_plugin}}))
    owned: dict[str, list[str]] = {}
    for node in nodes:
        host = hostname(node)
        if host not in efa:
            continue
        for name in PLUGIN_OWNED:
            value = configured(node, name)
            if value is not None:
                owned.setdefault(f"{name}={value}", []).append(host)
    if owned:
        def listing(names: tuple[str, ...]) -> str:
            return "; ".join(f"{k} on {', '.join(v[:4])}" for k, v in sorted(owned.items())
                             if k.split("=", 1)[0] in names)
        parts = [f"overriding the value aws-ofi-nccl sets per instance type: {text}"
                 for text in [listing(PLUGIN_SETS)] if text]
        parts += [f"that the EFA guidance leaves at NCCL's default or says do not apply: {text}"
                  for text in [listing(GUIDANCE_LEAVES)] if text]
        findings.append(Finding(
            message="set by hand on EFA nodes, " + "; and ".join(parts),
            fix="Unset these and let the plugin choose (keep them only if a measurement says so).",
            severity=Severity.WARNING, hosts=tuple(sorted({h for v in owned.values() for h in v})),
            evidence={"plugin_owned": owned}))
    no_device = sorted(h for h, (devs, plugin) in efa.items() if plugin and not devs)
    if no_device:
        findings.append(Finding(
            message=(f"aws-ofi-nccl is installed but there is no EFA device on "
                     f"{', '.join(no_device[:6])}: the plugin finds no EFA provider and NCCL "
                     "falls back to its Socket transport over ENA"),
            fix="Use an EFA-enabled instance type with EFA interfaces attached, or ignore this "
                "on instances without EFA.",
            severity=Severity.INFO, hosts=tuple(no_device)))
    if not findings:
        findings.append(Finding(
            message=(f"EFA with aws-ofi-nccl on {len(efa)} node(s): the network, buffer, chunk, "
                     "protocol, topology and socket-thread variables are left to the plugin"),
            severity=Severity.INFO, evidence={"nccl.net_plugin": {h: p for h, (_, p) in efa.items()}}))
    return findings


RULE = Rule(
    id="cloud-efa-plugin-owned",
    title="On AWS EFA, leave the plugin's variables alone",
    severity=Severity.INFO,
    reads=("nccl.net_plugin", "nccl.net_plugins", "ib.devices?", "env.nccl?", "nccl.conf_env?"),
    sets=(),
    why=("aws-ofi-nccl sets NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE, NCCL_TOPO_FILE and more per "
         "instance type, only when they are unset (src/platform-aws.cpp); the EFA cheatsheet "
         "says to leave NCCL_BUFFSIZE and NCCL_MIN_NCHANNELS at their defaults and that the "
         "socket thread variables do not apply."),
    docs="https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md",
    fix="Unset the plugin-owned variables; install aws-ofi-nccl where EFA has no plugin.",
    check=check,
    scope="cluster",
)
