"""cluster-ib-ports-down: RDMA ports that are up on some nodes are down on others."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import natural


def port_states(facts: dict[str, Any]) -> dict[str, str]:
    """``dev:port`` -> state (``ACTIVE``, ``DOWN``, ``INIT``...) with the physical state.

    >>> doc = {"sections": {"ib": {"status": "ok", "data": {"devices": [{"name": "mlx5_0", "ports": [
    ...     {"port": 1, "state": "INIT", "phys_state": "LinkUp"}]}]}}}}
    >>> port_states(doc)
    {'mlx5_0:1': 'INIT (LinkUp)'}
    """
    out = {}
    for dev in fact(facts, "ib.devices", []):
        for port in dev.get("ports") or []:
            state = port.get("state") or "?"
            if state != "ACTIVE" and port.get("phys_state"):
                state = f"{state} ({port['phys_state']})"
            out[f"{dev.get('name')}:{port.get('port')}"] = state
    return out


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Fire for ports that are ACTIVE on at least one node and not ACTIVE (or absent) on others."""
    states = {hostname(n): port_states(n) for n in nodes}
    if not any(states.values()):
        return []
    active_anywhere = {p for s in states.values() for p, st in s.items() if st == "ACTIVE"}
    down: dict[str, list[str]] = {}
    for host, ports in states.items():
        bad = [f"{p} {ports.get(p, 'missing')}" for p in sorted(active_anywhere, key=natural)
               if ports.get(p) != "ACTIVE"]
        if bad:
            down[host] = bad
    if not down:
        return []
    sample = "; ".join(f"{h}: {', '.join(v[:4])}{' ...' if len(v) > 4 else ''}"
                       for h, v in list(down.items())[:6])
    hint = (" (INIT with LinkUp: no subnet manager has configured the port)"
            if any("INIT" in x for v in down.values() for x in v) else "")
    return [Finding(
        message=(f"{len(down)} node(s) have fewer ACTIVE RDMA ports than the others: "
                 f"{sample}{hint}; NCCL runs at the speed of the node with the fewest rails, or "
                 "picks a different set of NICs there"),
        evidence={"ib.ports": {h: states[h] for h in down}}, hosts=tuple(sorted(down)))]


RULE = Rule(
    id="cluster-ib-ports-down",
    title="Bring up the RDMA ports that are down on some nodes",
    severity=Severity.WARNING,
    reads=("ib.devices",),
    sets=(),
    why=("NCCL uses only ACTIVE ports (src/transport/net_ib.cc up to 2.28, net_ib/init.cc "
         "from v2.29.2-1); a node with a port down has fewer "
         "rails, and every ring and tree crossing it slows to its bandwidth. 'INIT' with "
         "'LinkUp' means the link trained but no subnet manager configured it."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html#infiniband",
    fix="Check cables and switch ports (ibstat, mlxlink), and the subnet manager (sminfo).",
    check=check,
    scope="cluster",
)
