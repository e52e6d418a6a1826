"""Vendor net plugin profiles: which plugin a node carries (on disk, on LD_LIBRARY_PATH, named by
NCCL_NET_PLUGIN, or announced by its own variables) and the NCCL settings its vendor's guide
requires with it. The debugging-variable rule stays quiet about those, and no rule writes a
line that bypasses the plugin (``NCCL_NET=IB`` while gIB is on disk).

Not a rule: the registry test skips this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncclcheck.rules.base import fact
from ncclcheck.rules.common import configured


@dataclass(frozen=True)
class Profile:
    """A vendor plugin: how it is recognised, what its guide sets, and the guide."""

    name: str
    paths: tuple[str, ...]     #: substrings of the plugin library's path
    env_prefix: str            #: a variable family only this plugin reads ("" if none)
    net_names: tuple[str, ...]  #: its NCCL_NET names
    requires: tuple[str, ...]  #: NCCL variables its guide sets
    guide: str


GCP = "https://github.com/GoogleCloudPlatform/container-engine-accelerators/blob/master/"
PROFILES = (
    Profile("GPUDirect-TCPX (GCP A3 High)", ("/tcpx/", "gpudirecttcpx"), "NCCL_GPUDIRECTTCPX_",
            ("GPUDirectTCPX",),
            ("NCCL_SOCKET_IFNAME", "NCCL_ALGO", "NCCL_PROTO", "NCCL_CROSS_NIC",
             "NCCL_NET_GDR_LEVEL", "NCCL_P2P_PXN_LEVEL", "NCCL_DYNAMIC_CHUNK_SIZE",
             "NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE", "NCCL_P2P_NVL_CHUNKSIZE",
             "NCCL_BUFFSIZE", "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS",
             "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS"),
            GCP + "gpudirect-tcpx/nccl-config.yaml"),
    Profile("GPUDirect-TCPXO / FasTrak (GCP A3 Mega)", ("tcpxo", "fastrak"), "NCCL_FASTRAK_",
            ("FasTrak",),
            ("NCCL_SOCKET_IFNAME", "NCCL_CROSS_NIC", "NCCL_PROTO", "NCCL_ALGO",
             "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_TUNER_PLUGIN",
             "NCCL_TUNER_CONFIG_PATH", "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_P2P_NET_CHUNKSIZE",
             "NCCL_P2P_PCI_CHUNKSIZE", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_BUFFSIZE",
             "NCCL_NET_GDR_LEVEL", "NCCL_NVLS_ENABLE"),
            GCP + "gpudirect-tcpxo/README.md"),
    Profile("gIB (GCP A3 Ultra, A4)", ("/gib/", "nccl-net_gib", "nccl-net-gib"), "", ("gIB",),
            ("NCCL_NET", "NCCL_CROSS_NIC", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_NET_CHUNKSIZE",
             "NCCL_NVLS_CHUNKSIZE", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_QPS_PER_CONNECTION",
             "NCCL_IB_TC", "NCCL_IB_FIFO_TC", "NCCL_TUNER_CONFIG_PATH", "NCCL_SOCKET_IFNAME"),
            GCP + "gpudirect-rdma/nccl-test.yaml"),
    Profile("aws-ofi-nccl (AWS EFA)", ("ofi-nccl", "nccl-net-ofi", "nccl-net-aws-ofi", "/amazon/"),
            "", ("Libfabric", "AWS Libfabric", "OFI"),
            ("NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TOPO_FILE",
             "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NET_FORCE_FLUSH",
             "NCCL_NETDEVS_POLICY", "NCCL_NVLS_ENABLE", "NCCL_TUNER_PLUGIN", "NCCL_PROTO"),
            "https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md"),
)


def _candidates(facts: dict[str, Any]) -> list[str]:
    """Plugin paths the node carries: what NCCL opens, what is on disk, NCCL_NET_PLUGIN, and
    the folders of LD_LIBRARY_PATH."""
    out = [str((fact(facts, "nccl.net_plugin") or {}).get("path") or "")]
    out += [str(p.get("path") or "") for p in fact(facts, "nccl.net_plugins", []) or []
            if p.get("kind") in ("net", None)]
    out.append(configured(facts, "NCCL_NET_PLUGIN") or "")
    out += str((fact(facts, "env.other") or {}).get("LD_LIBRARY_PATH") or "").split(":")
    return [c.lower() for c in out if c]


def plugin_profiles(facts: dict[str, Any]) -> list[Profile]:
    """The vendor plugins this node carries.

    >>> doc = {"sections": {"env": {"status": "ok", "data": {"nccl": {"NCCL_NET": "gIB"},
    ...        "other": {"LD_LIBRARY_PATH": "/usr/local/gib/lib64:/usr/lib"}}}}}
    >>> [p.name for p in plugin_profiles(doc)]
    ['gIB (GCP A3 Ultra, A4)']
    """
    paths = _candidates(facts)
    names = {k for k in (fact(facts, "env.nccl") or {}) if k.startswith("NCCL_")}
    net = (configured(facts, "NCCL_NET") or "").lower()
    found = []
    for profile in PROFILES:
        by_path = any(any(mark in p for mark in profile.paths) for p in paths)
        by_env = bool(profile.env_prefix) and any(n.startswith(profile.env_prefix) for n in names)
        by_net = net in (n.lower() for n in profile.net_names)
        if by_path or by_env or by_net:
            found.append(profile)
    return found


def vendor_owned(facts: dict[str, Any]) -> dict[str, str]:
    """``{variable: guide}`` for the settings a present vendor plugin's guide requires."""
    return {var: f"{p.name}: {p.guide}" for p in plugin_profiles(facts) for var in p.requires}
