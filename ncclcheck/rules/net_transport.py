"""net-transport: pin IB when every node can use it; never downgrade the fabric on its own.

NCCL tries an external net plugin, then its internal IB transport, then Socket
(src/plugin/net.cc). IB fails *silently* into Socket when libibverbs does not load, no port is
ACTIVE, or /dev/infiniband is missing (src/transport/net_ib/init.cc). When some nodes end up on
IB and others on Socket the job cannot connect. So:

* every node has an ACTIVE InfiniBand/Ethernet port, libibverbs loads and /dev/infiniband is
  visible: ``NCCL_NET=IB``, which turns a silent fallback into an error at init;
* some nodes cannot use IB while others can (or IB on some, RoCE on others): an ERROR naming
  the nodes and what each lacks, with the fix: repair them or leave them out of the job. Nothing
  is set: ``NCCL_NET=Socket`` would turn one bad node into a TCP-speed job for the whole cluster
  and would outlive the repair. Running on TCP is the user's call (the fix says how);
* a node whose probe could not try libibverbs is *inconclusive*: a WARNING naming it, and no
  setting (neither IB nor Socket);
* IB works everywhere but ``NCCL_IB_DISABLE=1`` or ``NCCL_NET=Socket`` is configured: a
  WARNING, and ``NCCL_NET=IB`` is not set (it would clash with the configured value at init);
* no node has a device NCCL's IB transport would open (none, or only EFA devices, whose link
  layer is neither InfiniBand nor Ethernet: aws-ofi-nccl drives them, see
  cloud-efa-plugin-owned): nothing to say;
* an external net plugin (aws-ofi-nccl, a SHARP/UCX plugin, gIB) owns the choice: nothing is set.

Other rules use :func:`ib_state`, :func:`ib_ready`, :func:`active_ports` and :func:`net_plugin`.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, absent, fact, hostname
from ncclcheck.rules.common import configured, per_node
from ncclcheck.rules.vendors import plugin_profiles

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
    """The external net plugin NCCL would open on this node, or a vendor plugin it carries (gIB
    on disk is loaded through the vendor's LD_LIBRARY_PATH), or None."""
    choice = fact(facts, "nccl.net_plugin") or {}
    path = choice.get("path") if isinstance(choice, dict) else None
    if path:
        return path
    vendors = plugin_profiles(facts)
    return vendors[0].name if vendors else None


READY, UNKNOWN, BROKEN, NONE = "ready", "unknown", "broken", "none"
#: What turns NCCL's IB transport off when configured (NCCL_NET is compared without case).
DOWNGRADES = {"NCCL_IB_DISABLE": lambda v: v.strip() not in ("", "0"),
              "NCCL_NET": lambda v: v.strip().lower() == "socket"}


def ib_devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """RDMA devices NCCL's IB transport would open: a port with an InfiniBand or Ethernet link
    layer, whatever its state (EFA devices report neither and are left to aws-ofi-nccl).

    >>> doc = {"sections": {"ib": {"status": "ok", "data": {"devices": [
    ...     {"name": "rdmap16s27", "ports": [{"port": 1, "link_layer": "Unspecified"}]},
    ...     {"name": "mlx5_0", "ports": [{"port": 1, "link_layer": "InfiniBand", "state": "DOWN"}]}]}}}}
    >>> [d["name"] for d in ib_devices(doc)]
    ['mlx5_0']
    """
    return [d for d in fact(facts, "ib.devices", [])
            if any(p.get("link_layer") in LINK_LAYERS for p in d.get("ports") or [])]


@per_node
def ib_state(facts: dict[str, Any]) -> tuple[str, str]:
    """Whether NCCL's IB transport works on this node: (:data:`READY` | :data:`UNKNOWN` (the
    probe could not tell) | :data:`BROKEN` (devices NCCL would use, but it cannot) |
    :data:`NONE` (no such device)), and why."""
    if absent(facts, "ib") or not ib_devices(facts):
        return NONE, "no InfiniBand or RoCE device"
    ports = active_ports(facts)
    if not ports:
        states = ", ".join(f"{d.get('name')}:{p.get('port')} {p.get('state') or '?'}"
                           for d in ib_devices(facts) for p in d.get("ports") or [])
        return BROKEN, f"no ACTIVE IB/RoCE port ({states[:160] or 'no ports'})"
    verbs = fact(facts, "nccl.ibverbs") or {}
    if verbs.get("loaded") is False:
        return BROKEN, f"libibverbs does not load ({(verbs.get('error') or 'not found')[:120]})"
    dev_ib = fact(facts, "ib.dev_infiniband") or {}
    if dev_ib.get("visible") is False:
        return BROKEN, "/dev/infiniband is not visible (container without --device=/dev/infiniband)"
    if verbs.get("loaded") is None:
        return UNKNOWN, ("whether libibverbs loads is unknown (the probe could not try: "
                         f"{(verbs.get('error') or 'no answer')[:100]})")
    return READY, f"{len(ports)} ACTIVE port(s), libibverbs loads"


def ib_ready(facts: dict[str, Any]) -> tuple[bool, str]:
    """Whether NCCL's IB transport is known to work on this node, and what is missing if not."""
    state, why = ib_state(facts)
    return state == READY, why


def link_layer(facts: dict[str, Any]) -> str:
    """The link layer NCCL's IB transport uses on this node: InfiniBand when an ACTIVE IB port
    exists (ib-hca-select then leaves RoCE ports out), else Ethernet (RoCE)."""
    layers = {p.get("link_layer") for p in active_ports(facts)}
    return "InfiniBand" if "InfiniBand" in layers else "Ethernet"


def downgraded(facts: dict[str, Any]) -> dict[str, str]:
    """The settings configured on this node that turn IB off (``NCCL_IB_DISABLE=1``,
    ``NCCL_NET=Socket``): the user's own choice, which this rule never makes for them."""
    return {name: value for name, test in DOWNGRADES.items()
            if (value := configured(facts, name)) is not None and test(value)}


def _listing(items: dict[str, str], limit: int = 6) -> str:
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(f"{h}: {why}" for h, why in list(items.items())[:limit]) + more


TCP_BY_CHOICE = ("To run every node on TCP instead (a fraction of IB's bandwidth), set "
                 "NCCL_NET=Socket yourself, and remove it once the nodes are fixed.")


def _plugin_findings(nodes: list[dict[str, Any]]) -> list[Finding] | None:
    plugins = {hostname(n): net_plugin(n) for n in nodes}
    with_plugin = sorted(h for h, p in plugins.items() if p)
    if not with_plugin:
        return None
    if len(with_plugin) == len(nodes):
        names = sorted({str(p).rsplit("/", 1)[-1] for p in plugins.values()})
        return [Finding(
            message=(f"every node loads the external net plugin {', '.join(names)}: it "
                     "chooses the network, so NCCL_NET and NCCL_IB_DISABLE are left alone"),
            severity=Severity.INFO, evidence={"nccl.net_plugin": plugins})]
    # on some nodes only: cluster-net-plugin-partial names it, once; nothing is set here
    return []


def _all_ready(nodes: list[dict[str, Any]], evidence: dict[str, Any]) -> list[Finding]:
    layers = {hostname(n): link_layer(n) for n in nodes}
    if len(set(layers.values())) > 1:
        by_layer: dict[str, list[str]] = {}
        for host, layer in layers.items():
            by_layer.setdefault(layer, []).append(host)
        listing = "; ".join(f"{'RoCE' if layer == 'Ethernet' else layer} on "
                            f"{', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}"
                            for layer, hosts in sorted(by_layer.items()))
        major = max(by_layer, key=lambda k: len(by_layer[k]))
        odd = tuple(sorted(h for h, layer in layers.items() if layer != major))
        return [Finding(
            message=(f"every node can use the IB transport, but over different link layers "
                     f"({listing}): InfiniBand and RoCE ports cannot reach each other, so this "
                     f"job cannot connect over IB; nothing is set"),
            fix=(f"Run the job on nodes of one fabric (leave out {', '.join(odd[:6])}), or "
                 f"give every node the same fabric. {TCP_BY_CHOICE}"),
            severity=Severity.ERROR, evidence={"ib.link_layer": layers}, hosts=odd)]
    off = {hostname(n): d for n in nodes if (d := downgraded(n))}
    if off:
        shown = {h: ", ".join(f"{k}={v}" for k, v in d.items()) for h, d in off.items()}
        return [Finding(
            message=(f"IB/RoCE works on every node, but {_listing(shown)} turns it off: the job "
                     "runs over TCP sockets; NCCL_NET is not set, to keep your choice"),
            fix="Remove NCCL_IB_DISABLE / NCCL_NET=Socket from the environment and NCCL config "
                "files unless TCP is what you want.",
            severity=Severity.WARNING, evidence={**evidence, "configured": off},
            hosts=tuple(sorted(off)))]
    first = next(iter(evidence["ib"]))
    return [Finding(
        message=(f"every node can use IB/RoCE ({evidence['ib'][first]} on {first}); "
                 "NCCL_NET=IB makes a silent fallback to Socket an error at init, and "
                 "bypasses any net plugin installed later (NCCL skips networks not named IB, "
                 "src/plugin/net.cc@v2.30.7-1)"),
        env={"NCCL_NET": "IB"}, severity=Severity.INFO, evidence=evidence)]


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Pin IB when every node can use it; otherwise name the nodes that cannot, and set nothing."""
    by_plugin = _plugin_findings(nodes)
    if by_plugin is not None:
        return by_plugin
    status = {hostname(n): ib_state(n) for n in nodes}
    evidence = {"ib": {h: why for h, (_, why) in status.items()}}
    groups: dict[str, dict[str, str]] = {READY: {}, UNKNOWN: {}, BROKEN: {}, NONE: {}}
    for host, (state, why) in status.items():
        groups[state][host] = why
    ready, unknown, broken, none = (groups[k] for k in (READY, UNKNOWN, BROKEN, NONE))
    if len(ready) == len(nodes):
        return _all_ready(nodes, evidence)
    if not ready and not unknown:
        if not broken:
            return []  # no IB device anywhere: Socket is NCCL's own choice
        return [Finding(
            message=(f"RDMA hardware is present but NCCL cannot use it on any node "
                     f"({_listing(broken)}): NCCL falls back to TCP sockets without an error"),
            fix=("Fix IB on these nodes (ports, rdma-core, /dev/infiniband), then probe again; "
                 "until then NCCL uses sockets by itself, so nothing is set."),
            severity=Severity.WARNING, evidence=evidence, hosts=tuple(sorted(broken)))]
    findings = []
    lacking = {**broken, **none}
    if lacking:
        works = sorted(ready) or sorted(unknown)
        verb = "works" if ready else "may work"
        findings.append(Finding(
            message=(f"IB/RoCE {verb} on {len(works)} node(s) ({', '.join(works[:4])}"
                     f"{' ...' if len(works) > 4 else ''}) but not on {_listing(lacking)}: NCCL "
                     "would pick IB on some nodes and sockets on the others, and the job cannot "
                     "connect; nothing is set"),
            fix=(f"Fix IB on {', '.join(sorted(lacking)[:6])} (ports, rdma-core, "
                 f"/dev/infiniband), or leave {'it' if len(lacking) == 1 else 'them'} out of the "
                 f"job. {TCP_BY_CHOICE}"),
            severity=Severity.ERROR, evidence=evidence, hosts=tuple(sorted(lacking))))
    if unknown:
        findings.append(Finding(
            message=(f"the probe could not tell whether IB works on {_listing(unknown)}; "
                     "NCCL_NET is left unset until it can"),
            fix=("Run ibv_devices there (it must list the RDMA devices), or probe that node "
                 "again with libibverbs available to the probe."),
            severity=Severity.WARNING, evidence=evidence, hosts=tuple(sorted(unknown))))
    return findings


RULE = Rule(
    id="net-transport",
    title="Pin IB when every node can use it, never downgrade on our own",
    severity=Severity.WARNING,
    reads=("nccl.ibverbs", "nccl.net_plugin", "ib.devices?", "ib.dev_infiniband?", "env.nccl?",
           "nccl.conf_env?", "nccl.net_plugins?", "env.other?"),
    sets=("NCCL_NET",),
    why=("NCCL picks the first network that initialises: an external plugin, then IB, then "
         "Socket, and NCCL_NET (compared without case) forces one (src/net.cc up to v2.25.1-1, "
         "src/plugin/net.cc from v2.26.2-1). IB drops out without a warning when libibverbs "
         "does not load or no port is ACTIVE (src/transport/net_ib.cc, net_ib/init.cc from v2.29.2-1, "
         "src/misc/ibvsymbols.cc), so one node on Socket and the rest on IB fail to connect; "
         "with NCCL_NET set a failed IB is an error at init ('Failed to initialize any NET "
         "plugin', v2.27.3-1 on). Forcing Socket everywhere because of one bad node would run "
         "the whole job at TCP speed and outlive the repair, so that choice is the user's."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net",
    fix="Fix IB on the nodes that lack it (ports, rdma-core, /dev/infiniband), or leave them out "
        "of the job.",
    check=check,
    scope="cluster",
)
