"""cluster-rail-cross-nic: rail-only RoCE fabrics (one subnet per rail, no routes between rails)
need NCCL_CROSS_NIC=0, or rings that cross rails time out."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import configured


def rails(node: dict[str, Any]) -> dict[str, list[str]] | None:
    """``{netdev: [subnet, ...]}`` when the node's active RoCE ports sit one per subnet with no
    gateway route out of any of them in any routing table; else None. Without the policy
    routing facts (``ip rule`` and every table) "no route" is not asserted: None.

    >>> doc = {"sections": {"ib": {"status": "ok", "data": {"devices": [
    ...     {"name": f"mlx5_{i}", "ports": [{"state": "ACTIVE", "link_layer": "Ethernet",
    ...                                      "netdev": f"eth{i}"}]} for i in (0, 1)]}},
    ...     "network": {"status": "ok", "data": {"interfaces": [
    ...     {"name": f"eth{i}", "ipv4": [{"subnet": f"10.{i}.0.0/24"}]} for i in (0, 1)]}},
    ...     "netpath": {"status": "ok", "data": {"routes": [], "policy": {
    ...         "readable": True, "rules": [], "routes": []}}}}}
    >>> rails(doc)
    {'eth0': ['10.0.0.0/24'], 'eth1': ['10.1.0.0/24']}

    Routed L3 (a table per rail with a gateway, chosen by ``ip rule``): not rail-only.

    >>> doc["sections"]["netpath"]["data"]["policy"].update(
    ...     rules=["from 10.0.0.1 lookup rail0"], routes=[{"destination": "0.0.0.0/0",
    ...     "gateway": "10.0.0.254", "interface": "eth0", "table": "rail0"}])
    >>> rails(doc) is None
    True
    """
    ports = [p for d in fact(node, "ib.devices", []) for p in d.get("ports") or []]
    netdevs = sorted({p["netdev"] for p in ports
                      if p.get("state") == "ACTIVE" and p.get("link_layer") == "Ethernet"
                      and p.get("netdev")})
    if len(netdevs) < 2:
        return None
    ifaces = {i.get("name"): i for i in fact(node, "network.interfaces", [])}
    subnets = {n: sorted({a["subnet"] for a in (ifaces.get(n) or {}).get("ipv4") or []
                          if a.get("subnet")}) for n in netdevs}
    flat = [s for v in subnets.values() for s in v]
    if any(not v for v in subnets.values()) or len(flat) != len(set(flat)):
        return None
    policy = fact(node, "netpath.policy") or {}
    if not policy.get("readable"):
        return None  # only the main table is known: "no route" cannot be asserted
    routes = list(fact(node, "netpath.routes", [])) + list(policy.get("routes") or [])
    if any(r.get("gateway") and r.get("interface") in subnets for r in routes):
        return None  # routed between rails (main table, or a per-rail policy table)
    return subnets


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire when every RoCE node looks rail-only and NCCL_CROSS_NIC is not 0 on some of them."""
    found = {hostname(n): r for n in nodes if (r := rails(n))}
    if not found or len(found) < len([n for n in nodes if fact(n, "ib.devices", [])]):
        return []
    unset = sorted(h for n in nodes if (h := hostname(n)) in found
                   and configured(n, "NCCL_CROSS_NIC") != "0")
    if not unset:
        return []
    sample = next(iter(found.values()))
    return [Finding(
        message=(f"the RoCE ports form separate rails, one subnet each with no route between "
                 f"them in any routing table ({', '.join(f'{k} {v[0]}' for k, v in sample.items())} on "
                 f"{next(iter(found))}), and NCCL_CROSS_NIC is not 0 on {', '.join(unset[:6])}: "
                 "a ring that connects NIC 0 of one node to NIC 1 of another cannot connect"),
        env={"NCCL_CROSS_NIC": "0"},
        evidence={"rails": found}, hosts=tuple(unset))]


RULE = Rule(
    id="cluster-rail-cross-nic",
    title="Keep rings on their rail on rail-only fabrics",
    severity=Severity.WARNING,
    reads=("ib.devices", "network.interfaces", "netpath.routes", "netpath.policy?", "env.nccl?",
           "nccl.conf_env?"),
    sets=("NCCL_CROSS_NIC",),
    why=("NCCL_CROSS_NIC (default 2, src/graph/search.cc) lets NCCL's rings and trees use a "
         "different NIC on each node when that looks faster. On a rail-only fabric (each NIC "
         "index on its own switch and subnet, nothing routed between rails) those queue pairs "
         "can never connect and time out (NVIDIA/nccl#2013); NCCL_CROSS_NIC=0 keeps every "
         "channel on the same NIC index across nodes."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-cross-nic",
    fix="Set NCCL_CROSS_NIC=0 on every node (or route between the rails).",
    check=check,
    scope="cluster",
)
