"""NCCL plugins (``libnccl-net*.so`` such as aws-ofi-nccl): their kind, and
which net plugin NCCL opens."""

from __future__ import annotations

from ncclcheck.host.protocol import Host
from ncclcheck.probes.nccl.libs import _Lookup, exists
from ncclcheck.probes.nccl.types import Choice



def plugin_kind(name: str) -> str:
    """The plugin type a file name suggests (src/plugin/plugin_open.cc ``pluginPrefix``).

    >>> [plugin_kind(n) for n in ("libnccl-net.so", "libnccl-net-ofi.so", "libnccl-ofi-tuner.so",
    ...                           "libnccl-profiler-inspector.so", "libnccl-foo.so")]
    ['net', 'net', 'tuner', 'profiler', 'other']
    """
    for kind in ("net", "gin", "tuner", "profiler", "env"):
        if name.startswith(f"libnccl-{kind}"):
            return kind
    return "tuner" if "tuner" in name else "other"


def _net_plugin(env: dict[str, str], lookup: _Lookup, host: Host) -> Choice:
    """The library NCCL's plugin loader opens (src/plugin/plugin_open.cc ``openPluginLib``)."""
    requested = env.get("NCCL_NET_PLUGIN")
    if requested is not None and requested.strip().lower() == "none":
        return Choice(path=None, version=None,
                      reason="NCCL_NET_PLUGIN=none: NCCL uses only its internal IB and Socket")
    names: list[str] = []
    for item in (requested.split(",") if requested else [""]):
        item = item.strip()
        if not item:
            names.append("libnccl-net.so")
            continue
        names.append(item)
        if "/" not in item and not (item.startswith("lib") and item.endswith(".so")):
            names.append(f"libnccl-net-{item}.so")
    tried = []
    for name in names:
        if "/" in name:
            if exists(host, name):
                return Choice(path=name, version=None, reason=f"NCCL_NET_PLUGIN names {name}")
            tried.append(f"{name} (missing)")
            continue
        path, how = lookup.find(name)
        if path:
            origin = "NCCL_NET_PLUGIN" if requested else "NCCL_NET_PLUGIN unset"
            return Choice(path=path, version=None,
                          reason=f"NCCL opens {name} ({origin}); the loader finds it in {how}")
        tried.append(name)
    missing = (f"{tried[0]} is not" if len(tried) == 1 else f"none of {', '.join(tried)} is")
    return Choice(path=None, version=None,
                  reason=f"{missing} on the loader path: NCCL uses its internal IB and Socket "
                         "transports")
