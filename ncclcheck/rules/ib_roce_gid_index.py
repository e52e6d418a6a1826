"""ib-roce-gid-index: ``NCCL_IB_GID_INDEX`` for RoCE, by NCCL version.

Before 2.21 NCCL uses GID index 0 unless told otherwise: on RoCE that is the link-local RoCE v1
entry, and connections fail with 'Call to ibv_modify_qp failed with error Invalid argument' or
never route. The index to set is the RoCE v2 entry of the port's IPv4 address
(``roce_v2_ipv4_gid_index``, what ``show_gids`` shows as v2 with an IPv4), and it must be the
same on every node, because one value is exported everywhere. From 2.21 on NCCL selects that
entry itself (``ncclIbGetGidIndex`` in src/transport/net_ib/connect.cc) and its docs say the
variable should then normally not be set.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.cluster_nccl_version_mismatch import oldest, versions
from ncclcheck.rules.ib_hca_select import natural, wanted_ports
from ncclcheck.rules.net_transport import active_ports, ib_ready

VAR = "NCCL_IB_GID_INDEX"
AUTO_SINCE = (2, 21)


def roce_ports(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The RoCE ports NCCL will use on this node (after ib-hca-select's choice)."""
    keep = set(wanted_ports(facts)[1])
    return sorted((p for p in active_ports(facts)
                   if p.get("link_layer") == "Ethernet" and f"{p['device']}:{p['port']}" in keep),
                  key=lambda p: natural(f"{p['device']}:{p['port']}"))


def _current(facts: dict[str, Any]) -> str | None:
    return (fact(facts, "env.nccl") or {}).get(VAR) or (fact(facts, "nccl.conf_env") or {}).get(VAR)


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Set the RoCE v2 IPv4 index below 2.21; say to leave it unset from 2.21 on."""
    ports = {hostname(n): roce_ports(n) for n in nodes}
    if not any(ports.values()) or not all(ib_ready(n)[0] for n in nodes):
        return []
    known = versions(nodes)
    low, low_text = oldest(nodes)
    if low is None:
        return [Finding(
            message=("RoCE ports are in use but no node's NCCL version is known: below 2.21 "
                     "NCCL_IB_GID_INDEX must be set, from 2.21 on it should not"),
            severity=Severity.INFO, evidence={"nccl.version": known})]
    if low >= AUTO_SINCE:
        set_now = {hostname(n): _current(n) for n in nodes if _current(n)}
        if not set_now:
            return []
        return [Finding(
            message=(f"NCCL {low_text} picks the RoCE v2 GID itself, but {VAR} is set "
                     f"({', '.join(f'{h}={v}' for h, v in list(set_now.items())[:6])}); "
                     "unset it unless the fabric owner requires a fixed index"),
            fix=f"Remove {VAR} from the environment and NCCL config files.",
            severity=Severity.INFO, evidence={VAR: set_now, "nccl.version": known},
            hosts=tuple(set_now))]
    indexes: dict[str, set[int | None]] = {}
    for host, plist in ports.items():
        indexes[host] = {p.get("roce_v2_ipv4_gid_index") for p in plist}
    evidence = {"ib.roce_v2_ipv4_gid_index": {
        h: {f"{p['device']}:{p['port']}": p.get("roce_v2_ipv4_gid_index") for p in plist}
        for h, plist in ports.items()}, "nccl.version": known}
    missing = sorted(h for h, idx in indexes.items() if None in idx)
    if missing:
        return [Finding(
            message=(f"NCCL {low_text} needs {VAR}, but RoCE ports on {', '.join(missing[:6])} "
                     "have no RoCE v2 GID with an IPv4 address (no IP on the port's netdev?)"),
            fix="Give each RoCE netdev its IPv4 address, then probe again.",
            severity=Severity.ERROR, evidence=evidence, hosts=tuple(missing))]
    distinct = {i for idx in indexes.values() for i in idx}
    if len(distinct) == 1:
        index = str(distinct.pop())
        return [Finding(
            message=(f"NCCL {low_text} (< 2.21) does not select the GID itself: use index "
                     f"{index}, the RoCE v2 IPv4 entry on every node's RoCE ports"),
            env={VAR: index}, evidence=evidence)]
    per_host = {h: sorted(i for i in idx if i is not None) for h, idx in indexes.items()}
    groups: dict[str, list[str]] = {}
    for host, idx in per_host.items():
        groups.setdefault(",".join(map(str, idx)), []).append(host)
    return [Finding(
        message=(f"NCCL {low_text} needs one {VAR}, but the RoCE v2 IPv4 entry is at index "
                 f"{value} on {', '.join(hosts[:6])} and elsewhere on the others (extra IPs or "
                 "VLANs shift the table); make the GID tables alike or upgrade NCCL to >= 2.21"),
        env={VAR: value} if "," not in value else {},
        severity=Severity.ERROR, evidence=evidence, hosts=tuple(hosts))
        for value, hosts in groups.items()]


RULE = Rule(
    id="ib-roce-gid-index",
    title="Set the RoCE v2 GID index below NCCL 2.21, leave it unset after",
    severity=Severity.WARNING,
    reads=("ib.devices", "ib.dev_infiniband?", "nccl.ibverbs", "nccl.versions",
           "network.default_route_interfaces?", "env.nccl?",
           "nccl.conf_env?", "nccl.torch_loads?", "nccl.system_loads?"),
    sets=(VAR,),
    why=("RoCE addresses peers by GID; before NCCL 2.21 the default index 0 is the RoCE v1 "
         "link-local entry, which gives 'ibv_modify_qp failed with error Invalid argument'. "
         "Since 2.21 NCCL picks the RoCE v2 IPv4 entry itself (NCCL_IB_ROCE_VERSION_NUM, "
         "NCCL_IB_ADDR_FAMILY) and the docs say NCCL_IB_GID_INDEX should normally not be set."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-gid-index",
    fix="NCCL < 2.21: export NCCL_IB_GID_INDEX=<RoCE v2 IPv4 index from show_gids>, identical "
        "on every node; NCCL >= 2.21: leave it unset.",
    check=check,
    scope="cluster",
)
