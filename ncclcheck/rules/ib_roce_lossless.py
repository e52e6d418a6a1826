"""ib-roce-lossless: NCCL's RoCE traffic must go out on the priority the port makes lossless.

A lossless RoCE fabric turns PFC on for one priority (3 by NVIDIA's and most switch vendors'
convention) on hosts and switches alike. Which priority a RoCE packet gets depends on the port's
trust state (``mlnx_qos``): in DSCP trust the DSCP of the packet's traffic class (``tclass >> 2``,
then the port's DSCP -> priority table), in PCP trust the QP's service level, which the NIC writes
as the 802.1p priority of the VLAN tag. NCCL sets both on every QP it connects: ``NCCL_IB_TC``
into ``ah_attr.grh.traffic_class`` and ``NCCL_IB_SL`` into ``ah_attr.sl``, each 0 unless set
(``ncclIbSenderQpsCreate`` / ``ncclIbRtrQp``: src/transport/net_ib/connect.cc@v2.30.7-1, which
also takes a communicator's ``trafficClass`` config before its default). So with the variables
unset NCCL sends DSCP 0, priority 0: lossy, and under congestion the switch drops instead of
pausing; RoCE recovers by retransmission (slow), and a drop burst ends in 'Got completion with
error 12' (retry exceeded). Sites that set the port's default class in MLNX_OFED's sysfs
(``/sys/class/infiniband/DEV/tc/PORT/traffic_class``) move every QP there; a port whose default
class lands on the lossless priority counts as right.

Quiet when nothing is known (no ``mlnx_qos``, no RoCE port, IB link layer), on ports with PFC on
no priority (lossy RoCE is a design choice: ECN/DCQCN congestion control; INFO only when ECN is
known to be off too), and when NCCL does not use its IB transport (a net plugin, IB disabled).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import configured
from ncclcheck.rules.ib_roce_gid_index import roce_ports
from ncclcheck.rules.net_transport import downgraded, net_plugin

VAR_TC, VAR_SL = "NCCL_IB_TC", "NCCL_IB_SL"
#: DSCP 26 (AF31) with ECT(0): 106 = 26 << 2 | 2, the class NVIDIA's lossless RoCE examples set
#: (``cma_roce_tos -t 106``, ``tc/1/traffic_class``) for priority 3.
PREFERRED_DSCP, ECT0 = 26, 2


def _int(text: str | None) -> int | None:
    """An NCCL integer parameter as NCCL reads it (strtoll, base 0), else None."""
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return int(text.strip()) if text.strip().isdigit() else None


def priority_of(entry: dict[str, Any], tc: int, sl: int) -> tuple[int | None, str]:
    """The priority a RoCE packet with traffic class ``tc`` and service level ``sl`` gets on the
    port of ``entry``, with how it got there.

    >>> priority_of({"trust": "dscp", "dscp2prio": None}, 106, 0)
    (3, 'traffic class 106 = DSCP 26 -> priority 3')
    >>> priority_of({"trust": "pcp"}, 106, 0)
    (0, 'service level 0 = 802.1p priority 0')
    """
    if entry.get("trust") == "dscp":
        dscp = tc >> 2
        table = entry.get("dscp2prio")
        prio = (next((p for p, codes in enumerate(table) if dscp in codes), None) if table
                else dscp >> 3)  # mlx5's default table: 8 DSCPs per priority
        return prio, f"traffic class {tc} = DSCP {dscp} -> priority {prio}"
    if entry.get("trust") == "pcp":
        return sl, f"service level {sl} = 802.1p priority {sl}"
    return None, ""


def wanted(entry: dict[str, Any]) -> tuple[str, str] | None:
    """The variable and value that put NCCL on the port's lossless priority (3 when it is one).

    >>> wanted({"trust": "dscp", "pfc_enabled": [3], "dscp2prio": None})
    ('NCCL_IB_TC', '106')
    >>> wanted({"trust": "pcp", "pfc_enabled": [4]})
    ('NCCL_IB_SL', '4')
    """
    lossless = entry.get("pfc_enabled") or []
    if not lossless:
        return None
    prio = 3 if 3 in lossless else lossless[0]
    if entry.get("trust") == "pcp":
        return VAR_SL, str(prio)
    if entry.get("trust") != "dscp":
        return None
    table = entry.get("dscp2prio")
    codes = table[prio] if table else list(range(prio * 8, prio * 8 + 8))
    if not codes:
        return None
    dscp = PREFERRED_DSCP if PREFERRED_DSCP in codes else min(codes)
    return VAR_TC, str(dscp << 2 | ECT0)


def check(facts: dict[str, Any]) -> list[Finding]:
    """Warn when NCCL's traffic class / service level misses every PFC priority of its ports."""
    if downgraded(facts) or net_plugin(facts):
        return []
    used = {f"{p['device']}:{p['port']}" for p in roce_ports(facts)}
    entries = [e for e in fact(facts, "ib.qos", []) or []
               if e.get("port") in used and e.get("pfc_enabled") is not None]
    tc_env, sl_env = _int(configured(facts, VAR_TC)), _int(configured(facts, VAR_SL))
    misses, fixes, lossy = [], set(), []
    for e in entries:
        if not e["pfc_enabled"]:
            lossy.append(e)
            continue
        classes = [c for c in (tc_env, e.get("port_traffic_class")) if c is not None] or [0]
        seen = [priority_of(e, tc, sl_env or 0) for tc in classes]
        if any(prio is None for prio, _ in seen) or any(p in e["pfc_enabled"] for p, _ in seen):
            continue
        misses.append(f"{e['port']} {e['netdev']}: {seen[0][1]}, PFC on priority "
                      f"{','.join(map(str, e['pfc_enabled']))} ({e.get('trust')} trust)")
        fixes.add(wanted(e))
    if misses:
        how = ", ".join(f"{var}={value}" if value is not None else f"{var} unset (0)"
                        for var, value in ((VAR_TC, tc_env), (VAR_SL, sl_env)))
        env = dict([next(iter(fixes))]) if len(fixes) == 1 and None not in fixes else {}
        return [Finding(
            message=(f"NCCL's RoCE traffic ({how}) misses the lossless priority of its ports: "
                     f"{'; '.join(misses[:4])}{' ...' if len(misses) > 4 else ''}. Under "
                     "congestion the switch drops it instead of pausing it: retransmissions cost "
                     "bandwidth, bursts end in 'Got completion with error 12' (retry exceeded)"),
            fix=(("Set " + ", ".join(f"{k}={v}" for k, v in env.items()) + " on every node "
                  "(the class the switch treats as lossless too; PCP trust also needs a VLAN "
                  "tag on the RoCE netdev)") if env else
                 "Set NCCL_IB_TC (DSCP trust: DSCP << 2) or NCCL_IB_SL (PCP trust) to the "
                 "lossless priority, the same on every node and as the switch's lossless class"),
            env=env, evidence={"ib.qos": [{k: e.get(k) for k in ("port", "netdev", "trust",
                                                                  "pfc_enabled")}
                                          for e in entries], VAR_TC: tc_env, VAR_SL: sl_env})]
    off = [e for e in lossy if e.get("ecn_rp") == [] and e.get("ecn_np") == []]
    if lossy and len(off) == len(entries):
        return [Finding(
            message=(f"RoCE ports {', '.join(sorted({e['netdev'] for e in off}))} run lossy (PFC "
                     "on no priority) with ECN (DCQCN) off on every priority: nothing slows a "
                     "sender before the switch drops, and drops cost RoCE retransmissions"),
            fix=("Make one priority lossless on hosts and switches (mlnx_qos --pfc, then "
                 "NCCL_IB_TC/NCCL_IB_SL to it) or enable ECN on the RoCE priority "
                 "(/sys/class/net/IFACE/ecn/roce_rp|roce_np/enable/PRIO)"),
            severity=Severity.INFO,
            evidence={"ib.qos": [{k: e.get(k) for k in ("port", "netdev", "ecn_rp", "ecn_np")}
                                 for e in off]})]
    return []


RULE = Rule(
    id="ib-roce-lossless",
    title="Send NCCL's RoCE traffic on the port's lossless (PFC) priority",
    severity=Severity.WARNING,
    reads=("ib.devices?", "ib.qos?", "network.default_route_interfaces?", "env.nccl?",
           "nccl.conf_env?", "nccl.net_plugin?", "nccl.net_plugins?", "nccl.torch_loads?"),
    sets=(VAR_TC, VAR_SL),
    why=("NCCL_IB_TC 'defines the InfiniBand traffic class field' and NCCL_IB_SL 'the InfiniBand "
         "Service Level', both default 0 (env.rst@v2.30.7-1); NCCL writes them into every QP's "
         "address vector (ah_attr.grh.traffic_class, ah_attr.sl in "
         "src/transport/net_ib/connect.cc@v2.30.7-1). On RoCE the traffic class carries the "
         "DSCP (tclass >> 2) and the SL the 802.1p priority, which the port maps to a priority "
         "by its trust state (MLNX_OFED 'Quality of Service': RoCE QoS mapping, mlnx_qos). PFC "
         "pauses only the priorities it is enabled on; NCCL's default class 0 lands on priority "
         "0, lossy on a fabric configured lossless on priority 3."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-tc",
    fix=("DSCP trust: NCCL_IB_TC=<lossless DSCP << 2, with ECT(0) +2> (106 for DSCP 26, priority "
         "3); PCP trust: NCCL_IB_SL=<lossless priority>; identical on every node."),
    check=check,
    peers=True,
)
