"""net-transport: IB (verbs, also RoCE) only when every node can use it, else Socket everywhere.

NCCL tries an external net plugin, then its internal IB transport, then Socket
(src/plugin/net.cc). IB fails *silently* into Socket when libibverbs does not load, no port is
ACTIVE, or /dev/infiniband is missing (src/transport/net_ib/init.cc). When some nodes end up on
IB and others on Socket the job cannot connect. So:

* every node has an ACTIVE InfiniBand/Ethernet port, libibverbs loads and /dev/infiniband is
  visible: ``NCCL_NET=IB``, which turns a silent fallback into an error at init; unless some
  nodes would run IB and others RoCE, which cannot reach each other (Socket, as below);
* otherwise, when some node has RDMA hardware, ``NCCL_NET=Socket`` and ``NCCL_IB_DISABLE=1``,
  naming each node and what it lacks (with no RDMA anywhere NCCL's default is Socket already);
* an external net plugin (aws-ofi-nccl, a SHARP/UCX plugin, gIB) owns the choice: nothing is set.

Other rules use :func:`ib_ready`, :func:`active_ports` and :func:`net_plugin`.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, absent, fact, hostname
from ncclcheck.rules.common import per_node

LINK_LAYERS = ("InfiniBand", "Ethernet")


@per_node
def active_ports(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """ACTIVE ports with an InfiniBand or Ethernet (RoCE) link layer, as NCCL counts them.

    >>> doc = {"sections": {"ib": {"status": "ok", "data": {"devices": [{"name": "mlx5_0", "ports": [
    ...     {"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"}]}]}}}}
    >>> [(p["device"], p["port"]) for p in active_ports(doc)]
    [('mlx5_0', 1)]
    """
    out = []
    for dev in fact(facts, "ib.devices", []):
        for port in dev.get("ports") or []:
            if port.get("state") == "ACTIVE" and port.get("link_layer") in LINK_LAYERS:
                out.append({**port, "device": dev.get("name"), "hca_type": dev.get("hca_type")})
    return out


def net_plugin(facts: dict[str, Any]) -> str | None:
    """The external net plugin NCCL would open on this node, or None."""
    choice = fact(facts, "nccl.net_plugin") or {}
    return choice.get("path") if isinstance(choice, dict) else None


@per_node
def ib_ready(facts: dict[str, Any]) -> tuple[bool, str]:
    """Whether NCCL's IB transport can work on this node, and what is missing if not."""
    if absent(facts, "ib") or not fact(facts, "ib.devices", []):
        return False, "no RDMA device"
    ports = active_ports(facts)
    if not ports:
        states = ", ".join(f"{d.get('name')}:{p.get('port')} {p.get('state') or '?'}"
                           for d in fact(facts, "ib.devices", []) for p in d.get("ports") or [])
        return False, f"no ACTIVE IB/RoCE port ({states[:160] or 'no ports'})"
    verbs = fact(facts, "nccl.ibverbs") or {}
    if verbs.get("loaded") is False:
        return False, f"libibverbs does not load ({(verbs.get('error') or 'not found')[:120]})"
    if verbs.get("loaded") is None:
        return False, "whether libibverbs loads is unknown (the probe could not try)"
    dev_ib = fact(facts, "ib.dev_infiniband") or {}
    if dev_ib.get("visible") is False:
        return False, "/dev/infiniband is not visible (container without --device=/dev/infiniband)"
    return True, f"{len(ports)} ACTIVE port(s), libibverbs loads"


def link_layer(facts: dict[str, Any]) -> str:
    """The link layer NCCL's IB transport uses on this node: InfiniBand when an ACTIVE IB port
    exists (ib-hca-select then leaves RoCE ports out), else Ethernet (RoCE)."""
    layers = {p.get("link_layer") for p in active_ports(facts)}
    return "InfiniBand" if "InfiniBand" in layers else "Ethernet"


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Choose IB or Socket for the whole cluster."""
    plugins = {hostname(n): net_plugin(n) for n in nodes}
    with_plugin = sorted(h for h, p in plugins.items() if p)
    if with_plugin:
        if len(with_plugin) == len(nodes):
            names = sorted({str(p).rsplit("/", 1)[-1] for p in plugins.values()})
            return [Finding(
                message=(f"every node loads the external net plugin {', '.join(names)}: it "
                         "chooses the network, so NCCL_NET and NCCL_IB_DISABLE are left alone"),
                severity=Severity.INFO, evidence={"nccl.net_plugin": plugins})]
        missing = sorted(set(plugins) - set(with_plugin))
        return [Finding(
            message=(f"an external net plugin loads on {', '.join(with_plugin[:6])} but not on "
                     f"{', '.join(missing[:6])}: the nodes would pick different networks"),
            fix="Install the same net plugin on every node, or set NCCL_NET_PLUGIN=none "
                "everywhere to use NCCL's internal transports.",
            severity=Severity.ERROR, evidence={"nccl.net_plugin": plugins},
            hosts=tuple(missing))]
    status = {hostname(n): ib_ready(n) for n in nodes}
    ready = sorted(h for h, (ok, _) in status.items() if ok)
    evidence = {"ib": {h: why for h, (_, why) in status.items()}}
    if len(ready) == len(nodes):
        layers = {hostname(n): link_layer(n) for n in nodes}
        if len(set(layers.values())) > 1:
            by_layer: dict[str, list[str]] = {}
            for host, layer in layers.items():
                by_layer.setdefault(layer, []).append(host)
            listing = "; ".join(f"{'RoCE' if layer == 'Ethernet' else layer} on "
                                f"{', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}"
                                for layer, hosts in sorted(by_layer.items()))
            return [Finding(
                message=(f"every node can use the IB transport, but over different link layers "
                         f"({listing}): InfiniBand and RoCE ports cannot reach each other, so "
                         "every node must use Socket until the fabrics match"),
                env={"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}, severity=Severity.ERROR,
                evidence={"ib.link_layer": layers},
                hosts=tuple(sorted(h for h, layer in layers.items()
                                   if layer != max(by_layer, key=lambda k: len(by_layer[k])))))]
        return [Finding(
            message=(f"every node can use IB/RoCE ({status[ready[0]][1]} on {ready[0]}); "
                     "NCCL_NET=IB makes a silent fallback to Socket an error at init"),
            env={"NCCL_NET": "IB"}, severity=Severity.INFO, evidence=evidence)]
    lacking = {h: why for h, (ok, why) in status.items() if not ok}
    hardware = [hostname(n) for n in nodes if fact(n, "ib.devices", [])]
    sample = "; ".join(f"{h}: {why}" for h, why in list(lacking.items())[:6])
    more = f" and {len(lacking) - 6} more" if len(lacking) > 6 else ""
    if not hardware:
        return []  # no RDMA anywhere: NCCL's default is Socket, nothing to force
    env = {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}
    if ready:
        return [Finding(
            message=(f"IB/RoCE works on {len(ready)} node(s) but not on {sample}{more}: nodes "
                     "would choose different transports, so every node must use Socket until "
                     "those are fixed"),
            env=env, severity=Severity.ERROR, evidence=evidence, hosts=tuple(sorted(lacking)))]
    return [Finding(
        message=(f"RDMA hardware is present but NCCL cannot use it: {sample}{more}; NCCL falls "
                 "back to Socket silently, so say it"),
        env=env, severity=Severity.WARNING, evidence=evidence, hosts=tuple(sorted(lacking)))]


RULE = Rule(
    id="net-transport",
    title="Use IB only when every node can, else Socket everywhere",
    severity=Severity.WARNING,
    reads=("nccl.ibverbs", "nccl.net_plugin", "ib.devices?", "ib.dev_infiniband?"),
    sets=("NCCL_NET", "NCCL_IB_DISABLE"),
    why=("NCCL picks the first network that initialises: an external plugin, then IB, then "
         "Socket (src/plugin/net.cc). IB drops out without a warning when libibverbs does not "
         "load or no port is ACTIVE (src/transport/net_ib/init.cc, src/misc/ibvsymbols.cc), so "
         "one node on Socket and the rest on IB fail to connect. NCCL_NET forces the choice "
         "and makes a failed IB an error ('Failed to initialize any NET plugin'). "
         "NCCL_IB_DISABLE=1 is a workaround (the docs list it under Debugging, and NCCL_NET "
         "exists only since 2.10): drop it once every node has working IB."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net",
    fix="Fix IB on the nodes that lack it (ports, rdma-core, /dev/infiniband), or run every "
        "node on Socket.",
    check=check,
    scope="cluster",
)
