"""ib-roce-gid-index: ``NCCL_IB_GID_INDEX`` for RoCE, by NCCL version.

Before 2.21 NCCL uses GID index 0 unless told otherwise: on RoCE that is the link-local RoCE v1
entry, and connections fail with 'Call to ibv_modify_qp failed with error Invalid argument' or
never route. The index to set is the RoCE v2 entry of the port's IPv4 address
(``roce_v2_ipv4_gid_index``, what ``show_gids`` shows as v2 with an IPv4), and it must be the
same on every node, because one value is exported everywhere. From 2.21 on NCCL selects that
entry itself when the variable is unset (``ncclIbGetGidIndex``: src/transport/net_ib.cc in
v2.21.5-1, net_ib/connect.cc later), per port, so a value set by hand only pins what NCCL would
choose, or overrides it for every port at once. (NCCL's docs give no "do not set" advice.)
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, hostname
from ncclcheck.rules.cluster_nccl_version_mismatch import oldest, versions
from ncclcheck.rules.common import configured, natural
from ncclcheck.rules.ib_hca_select import wanted_ports
from ncclcheck.rules.net_transport import active_ports, ib_ready

VAR = "NCCL_IB_GID_INDEX"
AUTO_SINCE = (2, 21)


def roce_ports(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The RoCE ports NCCL will use on this node (after ib-hca-select's choice)."""
    keep = set(wanted_ports(facts)[1])
    return sorted((p for p in active_ports(facts)
                   if p.get("link_layer") == "Ethernet" and f"{p['device']}:{p['port']}" in keep),
                  key=lambda p: natural(f"{p['device']}:{p['port']}"))


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
                     "NCCL_IB_GID_INDEX must be set, from 2.21 on NCCL picks the entry itself"),
            severity=Severity.INFO, evidence={"nccl.version": known})]
    if low >= AUTO_SINCE:
        set_now = {hostname(n): configured(n, VAR) for n in nodes if configured(n, VAR)}
        if not set_now:
            return []
        return [Finding(
            message=(f"NCCL {low_text} picks the RoCE v2 GID itself, but {VAR} is set "
                     f"({', '.join(f'{h}={v}' for h, v in list(set_now.items())[:6])}); "
                     "one fixed index applies to every port, where NCCL would pick per port"),
            fix=(f"Keep {VAR} only if the fabric needs that fixed index on every port; otherwise "
                 "remove it from the environment and NCCL config files."),
            severity=Severity.INFO, evidence={VAR: set_now, "nccl.version": known},
            hosts=tuple(set_now))]
    by_port = {h: {f"{p['device']}:{p['port']}": p.get("roce_v2_ipv4_gid_index") for p in plist}
               for h, plist in ports.items()}
    evidence = {"ib.roce_v2_ipv4_gid_index": by_port, "nccl.version": known}
    missing = sorted(h for h, idx in by_port.items() if None in idx.values())
    if missing:
        return [Finding(
            message=(f"NCCL {low_text} needs {VAR}, but RoCE ports on {', '.join(missing[:6])} "
                     "have no RoCE v2 GID with an IPv4 address (no IP on the port's netdev?)"),
            fix="Give each RoCE netdev its IPv4 address, then probe again.",
            severity=Severity.ERROR, evidence=evidence, hosts=tuple(missing))]
    upgrade = "or upgrade NCCL to >= 2.21, which picks the entry per port"
    # NCCL_IB_GID_INDEX is one value for every port of a process: ports of one node must agree.
    split = {h: idx for h, idx in by_port.items() if len(set(idx.values())) > 1}
    if split:
        listing = "; ".join(f"{h}: {', '.join(f'{p}={i}' for p, i in idx.items())}"
                            for h, idx in list(split.items())[:4])
        return [Finding(
            message=(f"NCCL {low_text} applies one {VAR} to every RoCE port, but the RoCE v2 "
                     f"IPv4 entry sits at different indexes on the ports of one node ({listing}); "
                     f"no value fits, so none is set: make the GID tables alike, list only ports "
                     f"that agree in NCCL_IB_HCA, {upgrade}"),
            severity=Severity.ERROR, evidence=evidence, hosts=tuple(split))]
    per_host = {h: str(next(iter(idx.values()))) for h, idx in by_port.items() if idx}
    wrong = {hostname(n): v for n in nodes if (v := configured(n, VAR)) is not None
             and hostname(n) in per_host and v.strip() != per_host[hostname(n)]}
    stale = ("; the value configured now points elsewhere on "
             + ", ".join(f"{h} ({VAR}={v}, its entry is {per_host[h]})"
                         for h, v in list(wrong.items())[:4])) if wrong else ""
    if len(set(per_host.values())) == 1:
        index = next(iter(per_host.values()))
        return [Finding(
            message=(f"NCCL {low_text} (< 2.21) does not select the GID itself: use index "
                     f"{index}, the RoCE v2 IPv4 entry on every node's RoCE ports{stale} (a "
                     "wrong one fails with 'ibv_modify_qp failed' or 'Got completion with "
                     "error 12' / retry exceeded, NVIDIA/nccl#426)"),
            env={VAR: index}, evidence=evidence,
            severity=Severity.ERROR if wrong else None)]
    groups: dict[str, list[str]] = {}
    for host, index in per_host.items():
        groups.setdefault(index, []).append(host)

    def stale_on(hosts: list[str]) -> str:
        mine = [h for h in hosts if h in wrong]
        return (f"; {', '.join(mine[:4])} configure{'s' if len(mine) == 1 else ''} "
                f"{VAR}={wrong[mine[0]]} now") if mine else ""

    return [Finding(
        message=(f"NCCL {low_text} needs {VAR}: the RoCE v2 IPv4 entry is at index {index} on "
                 f"{', '.join(hosts[:6])}{' and more' if len(hosts) > 6 else ''}, elsewhere on "
                 f"the other nodes (extra IPs or VLANs shift the table){stale_on(hosts)}"),
        fix=("Make the GID tables alike (the same addresses and VLANs on every RoCE netdev), set "
             f"{VAR} per node in /etc/nccl.conf, {upgrade}."),
        env={VAR: index}, severity=Severity.ERROR, evidence=evidence, hosts=tuple(hosts))
        for index, hosts in groups.items()]


RULE = Rule(
    id="ib-roce-gid-index",
    title="Set the RoCE v2 GID index below NCCL 2.21, where NCCL cannot pick it",
    severity=Severity.WARNING,
    reads=("ib.devices", "ib.dev_infiniband?", "nccl.ibverbs", "nccl.versions",
           "network.default_route_interfaces?", "env.nccl?",
           "nccl.conf_env?", "nccl.torch_loads?", "nccl.system_loads?"),
    sets=(VAR,),
    why=("RoCE addresses peers by GID; before NCCL 2.21 the default index 0 is the RoCE v1 "
         "link-local entry, which gives 'ibv_modify_qp failed with error Invalid argument', or "
         "a connection that never completes: 'NET/IB : Got completion with error 12, opcode 0' "
         "(IBV_WC_RETRY_EXC_ERR, retry exceeded: NVIDIA/nccl#426) once traffic starts. "
         "Since 2.21 NCCL picks the RoCE v2 IPv4 entry per port itself when NCCL_IB_GID_INDEX is "
         "unset (NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY; ncclIbGetGidIndex in "
         "src/transport/net_ib.cc, v2.21.5-1)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-gid-index",
    fix="NCCL < 2.21: export NCCL_IB_GID_INDEX=<RoCE v2 IPv4 index from show_gids>, identical "
        "on every node; NCCL >= 2.21: NCCL picks it, set it only to pin one index.",
    check=check,
    scope="cluster",
)
