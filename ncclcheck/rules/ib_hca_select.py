"""ib-hca-select: an exact ``NCCL_IB_HCA`` list where NCCL's default would take unwanted ports.

Unset, NCCL uses every ACTIVE port whose link layer is InfiniBand or Ethernet
(src/transport/net_ib/init.cc). That is wrong when a node has:

* **mixed link layers**: IB compute ports beside a RoCE/Ethernet port; NCCL then warns
  "Attempted to merge incompatible devices" (when it merges ports into a virtual NIC) or
  "Attempted to connect incompatible devices" (when an IB and a RoCE port meet), or spreads
  rings over both. The IB ports are kept;
* **a front-end NIC**: an RDMA port whose netdev carries the default route, or that is slower
  than the node's other ports (the storage/management NIC of DGX and OCI shapes). It is left out
  when other ports remain, unless the same port runs faster on another node: then the link
  negotiated down (200 of 400 Gb/s), which is reported as a degraded link and kept;
* **the prefix trap**: an ``NCCL_IB_HCA`` already set without ``=`` (``mlx5_1`` also matches
  ``mlx5_10`` ... ``mlx5_19``).

The value lists ``device:port`` entries after ``=`` (exact match). Nodes must agree; the union of
lists is used when it selects exactly the wanted ports on every node, otherwise each node's value
is reported and they conflict.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import configured, natural, per_node
from ncclcheck.rules.net_transport import active_ports, ib_ready

VAR = "NCCL_IB_HCA"


def prefix_trap(value: str | None, devices: list[str]) -> list[str]:
    """Devices a prefix-style ``NCCL_IB_HCA`` catches that its entries do not name exactly.

    >>> prefix_trap("mlx5_1,mlx5_2", ["mlx5_1", "mlx5_2", "mlx5_10", "mlx5_11"])
    ['mlx5_10', 'mlx5_11']
    >>> prefix_trap("=mlx5_1", ["mlx5_1", "mlx5_10"]), prefix_trap(None, ["mlx5_1"])
    ([], [])
    """
    if not value:
        return []
    body = value.lstrip("^")
    if body.startswith("="):
        return []
    names = [e.split(":", 1)[0] for e in body.split(",") if e]
    return sorted({d for d in devices for n in names if d.startswith(n) and d not in names},
                  key=natural)


@per_node
def wanted_ports(facts: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(all active ``dev:port``, the wanted ones, reasons for leaving the others out); shared
    between rules, so callers copy before changing them."""
    ports = active_ports(facts)
    entries = {f"{p['device']}:{p['port']}": p for p in ports}
    keep = dict(entries)
    reasons: list[str] = []
    layers = {p.get("link_layer") for p in ports}
    if len(layers) > 1:
        eth = sorted((e for e, p in keep.items() if p.get("link_layer") == "Ethernet"), key=natural)
        for e in eth:
            keep.pop(e)
        reasons.append(f"mixed link layers: {', '.join(eth)} (Ethernet) beside InfiniBand ports")
    routed = set(fact(facts, "network.default_route_interfaces", []) or [])
    front = sorted((e for e, p in keep.items() if p.get("netdev") in routed), key=natural)
    if front and len(front) < len(keep):
        for e in front:
            keep.pop(e)
        reasons.append(f"front-end NIC: {', '.join(front)} carries the default route")
    rates = [p.get("rate_gbps") for p in keep.values() if isinstance(p.get("rate_gbps"), (int, float))]
    if rates and len(keep) > 1:
        slow = sorted((e for e, p in keep.items()
                       if isinstance(p.get("rate_gbps"), (int, float)) and p["rate_gbps"] < max(rates)),
                      key=natural)
        if slow and len(slow) < len(keep):
            for e in slow:
                keep.pop(e)
            reasons.append(f"front-end NIC: {', '.join(slow)} slower than the "
                           f"{max(rates):g} Gb/s ports")
    return (sorted(entries, key=natural), sorted(keep, key=natural), reasons)


def degraded_ports(nodes: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float]]]:
    """host -> {``dev:port``: (its rate, the rate the same port runs at elsewhere)} for ACTIVE
    ports slower than the same port on another node: a link that negotiated down (200 of 400
    Gb/s), not a front-end NIC.

    >>> def n(h, rate):
    ...     return {"hostname": h, "sections": {"ib": {"status": "ok", "data": {"devices": [
    ...         {"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE", "link_layer":
    ...         "InfiniBand", "rate_gbps": rate}]}]}}}}
    >>> degraded_ports([n("a", 400), n("b", 200), n("c", 400)])
    {'b': {'mlx5_0:1': (200, 400)}}
    """
    rates = {hostname(n): {f"{p['device']}:{p['port']}": p.get("rate_gbps")
                           for p in active_ports(n)} for n in nodes}
    best: dict[str, float] = {}
    for ports in rates.values():
        for entry, rate in ports.items():
            if isinstance(rate, (int, float)):
                best[entry] = max(best.get(entry, rate), rate)
    out = {}
    for host, ports in rates.items():
        slow = {e: (r, best[e]) for e, r in ports.items()
                if isinstance(r, (int, float)) and r < best[e]}
        if slow:
            out[host] = slow
    return out


def _keep_degraded(keep: list[str], reasons: list[str], slow: dict[str, tuple[float, float]]
                   ) -> tuple[list[str], list[str]]:
    """Put degraded ports back into the list, and drop them from the 'slower' reason."""
    keep = sorted(set(keep) | set(slow), key=natural)
    out = []
    for reason in reasons:
        if reason.startswith("front-end NIC: ") and " slower than the " in reason:
            listed, _, rest = reason[len("front-end NIC: "):].partition(" slower than the ")
            left = [e for e in listed.split(", ") if e not in slow]
            if not left:
                continue
            reason = f"front-end NIC: {', '.join(left)} slower than the {rest}"
        out.append(reason)
    return keep, out


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Recommend an exact list when some node's default would pick unwanted ports; report
    ports that negotiated down, and keep them in the list."""
    per: dict[str, tuple[list[str], list[str], list[str]]] = {}
    if not all(ib_ready(n)[0] for n in nodes):
        return []  # IB is not known to work everywhere: net-transport says why
    degraded = degraded_ports(nodes)
    findings = []
    if degraded:
        listing = "; ".join(f"{h}: " + ", ".join(f"{e} at {r:g} Gb/s (elsewhere {b:g})"
                                                   for e, (r, b) in ports.items())
                            for h, ports in list(degraded.items())[:6])
        findings.append(Finding(
            message=(f"RDMA ports run slower than the same port on other nodes ({listing}): a "
                     "link that negotiated down; every ring through it slows to its speed, and "
                     "it stays in NCCL_IB_HCA"),
            fix=("Check the link (ibstat, mlxlink -d <dev> -p <port> -m: width and speed), "
                 "reseat or replace the cable or transceiver, or check the switch port."),
            severity=Severity.WARNING, hosts=tuple(sorted(degraded)),
            evidence={"ib.degraded": {h: {e: list(v) for e, v in p.items()}
                                      for h, p in degraded.items()}}))
    for node in nodes:
        host = hostname(node)
        active, keep, reasons = wanted_ports(node)
        keep, reasons = _keep_degraded(list(keep), list(reasons), degraded.get(host, {}))
        devices = [d.get("name") for d in fact(node, "ib.devices", [])]
        current = configured(node, VAR)
        trap = prefix_trap(current, devices)
        if trap:
            reasons.append(f"{VAR}={current} also matches {', '.join(trap)} (prefix match)")
        per[host] = (active, keep, reasons)
    return findings + _select(per)


def _select(per: dict[str, tuple[list[str], list[str], list[str]]]) -> list[Finding]:
    if not any(reasons for _, _, reasons in per.values()):
        return []
    values = {h: "=" + ",".join(keep) for h, (_, keep, _) in per.items()}
    by_reason: dict[str, list[str]] = {}
    for host, (_, _, reasons) in per.items():
        for reason in reasons:
            by_reason.setdefault(reason, []).append(host)
    why = "; ".join(reason + ("" if len(hosts) == len(per) else
                              f" (on {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''})")
                    for reason, hosts in by_reason.items())
    evidence = {"ib.active_ports": {h: a for h, (a, _, _) in per.items()},
                "wanted": {h: k for h, (_, k, _) in per.items()}}
    union = sorted({e for _, keep, _ in per.values() for e in keep}, key=natural)
    if all(set(union) & set(active) == set(keep) for active, keep, _ in per.values()):
        value = "=" + ",".join(union)
        return [Finding(message=f"use {value[1:]}; left unset, NCCL would also take {why}",
                        env={VAR: value}, evidence=evidence)]
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return [Finding(message=(f"use {value[1:]} on {', '.join(hosts[:6])}: the nodes' RDMA ports "
                             f"differ, so one list does not fit all ({why})"),
                    env={VAR: value}, evidence=evidence, hosts=tuple(hosts))
            for value, hosts in groups.items()]


RULE = Rule(
    id="ib-hca-select",
    title="List NCCL_IB_HCA exactly where the default takes unwanted ports",
    severity=Severity.WARNING,
    reads=("ib.devices", "ib.dev_infiniband?", "nccl.ibverbs", "network.default_route_interfaces?",
           "env.nccl?", "nccl.conf_env?"),
    sets=(VAR,),
    why=("Without NCCL_IB_HCA NCCL uses every ACTIVE IB or RoCE port (src/transport/net_ib.cc, "
         "net_ib/init.cc from v2.29.2-1), so a "
         "front-end or storage NIC joins the rings, and mixing link layers fails with "
         "'Attempted to merge incompatible devices' (src/transport/net_ib/init.cc@v2.30.7-1) or "
         "'Attempted to connect incompatible devices' (net_ib/connect.cc@v2.30.7-1). Entries without '=' are prefixes: mlx5_1 "
         "also selects mlx5_10 to mlx5_19; NCCL's docs advise the '=' form. Vendor profiles "
         "(OCI) list exact ports for this reason. A port slower than the same port on other "
         "nodes negotiated down: it is reported and kept, never dropped in silence."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-hca",
    fix="Export the exact NCCL_IB_HCA list (='dev:port,...') on every node.",
    check=check,
    scope="cluster",
)
