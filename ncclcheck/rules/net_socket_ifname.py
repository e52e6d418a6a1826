"""net-socket-ifname: an exact ``NCCL_SOCKET_IFNAME`` list of interfaces every node can use.

NCCL's default (src/misc/socket.cc ``ncclFindInterfaces``) takes ``ib*`` interfaces first, else
everything but ``docker*``, ``lo`` and (since 2.28) ``virbr*``: it happily picks a ``br-*`` or
``veth*`` interface, a management NIC on a subnet of its own, or a bridge whose address is the
same on every node (docker0's 172.17.0.1), and then hangs at init (NVIDIA/nccl#697, #913, #1581).

This rule keeps, on every node, interfaces that are up, have an address, are not loopback,
``docker*``, ``virbr*``, ``veth*``, ``br-*`` or a bridge (except a host bridge such as ``br0``
that carries the default route or the node's only address), and whose address no other node
also has; then the subnets that *every* node has on such an interface; then the fastest of those
(the slowest node's speed counts). The value is an exact ``=`` list (since NCCL 2.5: ``eth1``
would also match ``eth10``). When the names differ between nodes, the union of names is used if
it selects nothing unwanted on any node; otherwise each node needs its own value (per-node
``/etc/nccl.conf``, NVIDIA/nccl#286) and the nodes' values conflict. When several subnets are
equally fast, or their speed is unknown, all of them are listed and, when sockets carry the data
(no IB or net plugin on every node), the tie is reported with each candidate alone
(``evidence["candidates"]``), so that ``ncclcheck bench --compare`` can decide; a run of the
whole list, when one is given, is weighed too.

When a node has two or more interfaces in a chosen subnet (a duplicate NIC in the peers'
subnet), only one of them is kept: the name that every node has in that subnet (``eth0`` on
all nodes, not node2's extra ``eth9``), else the interface of the node's first route to the
subnet (the one the kernel sends by). Left unset, NCCL binds to either and the kernel may send
and answer by the other (net-same-subnet-nics); the interface every node uses is never dropped.

The rule stays quiet when NCCL's default already picks exactly these interfaces on every node
(one NIC per node, say): pinning would only make the file fragile. No shared subnet: the default
route's interfaces: a WARNING, or INFO on routed /32 (/128) hosts (rules/hostroute.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import natural, per_cluster
from ncclcheck.rules.hostroute import judge, layout
from ncclcheck.rules.net_transport import ib_ready, net_plugin

VAR = "NCCL_SOCKET_IFNAME"
#: Name prefixes never used: container and VM bridges and veth ends (the host side of a pod).
EXCLUDED_PREFIXES = ("docker", "virbr", "veth", "br-")
#: Interface kinds (network probe) never used, with the words that say why.
EXCLUDED_KINDS = {"loopback": "loopback", "docker": "a container bridge", "bridge": "a bridge"}


@dataclass
class Selection:
    """What the facts say about socket interfaces, cluster-wide."""

    hosts: list[str]
    usable: dict[str, dict[str, list[tuple[str, str]]]]   #: host -> ifname -> [(addr, subnet)]
    rejected: dict[str, dict[str, str]]                    #: host -> ifname -> why not
    speeds: dict[str, int | None]                          #: shared subnet -> slowest Mb/s
    chosen: list[str] = field(default_factory=list)        #: chosen subnets
    names: dict[str, list[str]] = field(default_factory=dict)  #: host -> chosen ifnames
    value: str | None = None                               #: one value for every node
    per_host: dict[str, str] = field(default_factory=dict)  #: when names force per-node values
    tie: list[str] = field(default_factory=list)           #: candidate values when tied
    data_path: bool = True                                 #: sockets carry the data (no IB/plugin)
    fallback: bool = False                                 #: default-route interfaces, no shared subnet
    defaults: dict[str, list[str]] = field(default_factory=dict)  #: NCCL's own pick per host
    duplicates: dict[str, list[str]] = field(default_factory=dict)  #: host -> same-subnet extras
    host_routes: bool = False                              #: fallback on /32 (/128) addresses only
    unrouted: dict[str, list[str]] = field(default_factory=dict)  #: host -> peers' addrs, no route


def is_up(iface: dict[str, Any]) -> bool:
    """Up, or ``unknown`` with a carrier (tun and some virtual drivers never say ``up``).

    >>> is_up({"operstate": "up"}), is_up({"operstate": "unknown", "carrier": True}), is_up({"operstate": "down"})
    (True, True, False)
    """
    state = iface.get("operstate")
    return state == "up" or (state == "unknown" and iface.get("carrier") is True)


def exclusion(iface: dict[str, Any]) -> str | None:
    """Why an interface is never recommended, whatever the other nodes have; None if it may be.

    >>> exclusion({"name": "docker0", "kind": "docker"}), exclusion({"name": "veth1a2b", "kind": "veth"})
    ('docker0 is a container bridge', 'veth1a2b is a veth end (its name starts with veth)')
    >>> exclusion({"name": "eth0", "kind": "veth", "operstate": "up", "ipv4": [{"address": "10.0.0.2"}]}) is None
    True
    """
    name = str(iface.get("name"))
    kind = iface.get("kind")
    if kind in EXCLUDED_KINDS:
        return f"{name} is {EXCLUDED_KINDS[kind]}"
    if name == "lo":
        return "lo is loopback"
    for prefix in EXCLUDED_PREFIXES:
        if name.startswith(prefix):
            what = "a veth end" if prefix == "veth" else "a bridge"
            return f"{name} is {what} (its name starts with {prefix})"
    if iface.get("master"):
        return f"{name} is enslaved to {iface['master']}"
    if not is_up(iface):
        return f"{name} is {iface.get('operstate') or 'not up'}"
    return None


def host_bridge(iface: dict[str, Any], interfaces: list[dict[str, Any]]) -> bool:
    """A host bridge (``br0``: the node's own NIC enslaved to a bridge for VMs or containers)
    that carries the node's default route, or that holds the node's only usable address: the
    node's real network, so it is used like a NIC. Container and VM bridges (``docker*``,
    ``br-*``, ``virbr*``) never qualify.

    >>> br0 = {"name": "br0", "kind": "bridge", "operstate": "up", "default_route": True,
    ...        "ipv4": [{"address": "198.18.1.11", "subnet": "198.18.1.0/24"}]}
    >>> host_bridge(br0, [br0]), host_bridge({**br0, "name": "br-3f2a"}, [br0])
    (True, False)
    """
    name = str(iface.get("name"))
    if iface.get("kind") != "bridge" or name.startswith(EXCLUDED_PREFIXES):
        return False
    if not is_up(iface) or iface.get("master") or not addresses(iface):
        return False
    if iface.get("default_route"):
        return True
    return not any(exclusion(i) is None and addresses(i) for i in interfaces)


def addresses(iface: dict[str, Any]) -> list[tuple[str, str]]:
    """(address, subnet) pairs NCCL could bootstrap on: IPv4 except loopback and link-local
    169.254/16, and global IPv6.

    >>> addresses({"ipv4": [{"address": "198.18.1.11", "subnet": "198.18.1.0/24"},
    ...                     {"address": "169.254.3.1", "subnet": "169.254.0.0/16"}],
    ...            "ipv6": [{"address": "fe80::1", "subnet": "fe80::/64", "scope": "link"}]})
    [('198.18.1.11', '198.18.1.0/24')]
    """
    out: list[tuple[str, str]] = []
    for addr in iface.get("ipv4") or []:
        ip = str(addr.get("address", ""))
        if ip and not ip.startswith(("127.", "169.254.")) and addr.get("subnet"):
            out.append((ip, str(addr["subnet"])))
    for addr in iface.get("ipv6") or []:
        if addr.get("scope", "global") == "global" and addr.get("subnet"):
            out.append((str(addr.get("address")), str(addr["subnet"])))
    return out


def nccl_default(interfaces: list[dict[str, Any]]) -> list[str]:
    """The interfaces NCCL picks with NCCL_SOCKET_IFNAME unset (``ib*`` first, else all but
    ``docker*`` and ``lo``; ``virbr*`` only from 2.28 on, so it counts here), among those up
    and addressed.

    >>> nccl_default([{"name": "eth0", "operstate": "up", "ipv4": [{"address": "10.0.0.2", "subnet": "10.0.0.0/24"}]},
    ...               {"name": "br-3f2a", "operstate": "up", "ipv4": [{"address": "172.19.0.1", "subnet": "172.19.0.0/16"}]}])
    ['eth0', 'br-3f2a']
    """
    live = [i for i in interfaces if is_up(i) and (i.get("ipv4") or any(
        a.get("scope") == "global" for a in i.get("ipv6") or []))]
    ib = [i["name"] for i in live if str(i.get("name")).startswith("ib")]
    if ib:
        return ib
    return [i["name"] for i in live
            if not str(i.get("name")).startswith(("docker", "lo"))]


def _value(names: list[str]) -> str:
    return "=" + ",".join(sorted(names, key=natural))


def _names_for(sel: Selection, subnets: list[str]) -> dict[str, list[str]]:
    wanted = set(subnets)
    return {h: sorted(n for n, addrs in sel.usable[h].items() if any(s in wanted for _, s in addrs))
            for h in sel.hosts}


def one_per_subnet(names: dict[str, dict[str, list[str]]],
                   routes: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """``{host: [extra interface, ...]}`` to drop where a host has several in one subnet.

    ``names`` is ``{subnet: {host: [ifname, ...]}}``. Kept: the names every host has in that
    subnet; failing that, the interface of the host's first route to the subnet (the kernel's
    choice); failing that, nothing is dropped (no way to tell).

    >>> names = {"198.18.0.0/24": {"node1": ["eth0"], "node2": ["eth0", "eth9"]}}
    >>> one_per_subnet(names, {})
    {'node2': ['eth9']}
    >>> names = {"198.18.0.0/24": {"node1": ["ens1"], "node2": ["ens2", "ens3"]}}
    >>> one_per_subnet(names, {"node2": [{"destination": "198.18.0.0/24", "interface": "ens3"}]})
    {'node2': ['ens2']}
    >>> one_per_subnet(names, {})
    {}
    """
    drop: dict[str, list[str]] = defaultdict(list)
    for subnet, where in names.items():
        common = set.intersection(*(set(v) for v in where.values())) if where else set()
        for host, mine in where.items():
            if len(mine) < 2:
                continue
            keep = [n for n in mine if n in common]
            if not keep:
                first = next((r.get("interface") for r in routes.get(host) or []
                              if r.get("destination") == subnet and r.get("interface") in mine),
                             None)
                keep = [first] if first else list(mine)
            drop[host].extend(n for n in mine if n not in keep and n not in drop[host])
    return {h: v for h, v in drop.items() if v}


def _one_value(names: dict[str, list[str]], all_names: dict[str, set[str]]) -> str | None:
    """One value for every node, or None when the union would catch an unwanted interface."""
    distinct = {tuple(v) for v in names.values()}
    if len(distinct) == 1:
        return _value(list(next(iter(distinct))))
    union = sorted(set().union(*names.values()))
    for host, mine in names.items():
        if (set(union) & all_names[host]) - set(mine):
            return None
    return _value(union)


@per_cluster
def select(nodes: list[dict[str, Any]]) -> Selection:
    """Work out the socket interfaces for ``nodes`` (see the module docstring).

    net-socket-threads, cluster-mtu-mismatch and the cluster differences ask for the same
    selection: inside :func:`ncclcheck.rules.common.facts_frozen` it is worked out once.
    """
    return _select(nodes)


def _select(nodes: list[dict[str, Any]]) -> Selection:
    hosts = [hostname(n) for n in nodes]
    sel = Selection(hosts=hosts, usable={}, rejected={}, speeds={})
    ifaces: dict[str, dict[str, dict[str, Any]]] = {}
    owners: dict[str, set[str]] = defaultdict(set)
    for node, host in zip(nodes, hosts):
        interfaces = fact(node, "network.interfaces", [])
        ifaces[host] = {str(i.get("name")): i for i in interfaces}
        sel.defaults[host] = nccl_default(interfaces)
        sel.usable[host], sel.rejected[host] = {}, {}
        for iface in interfaces:
            why = None if host_bridge(iface, interfaces) else exclusion(iface)
            addrs = addresses(iface) if why is None else []
            if why is None and not addrs:
                why = f"{iface.get('name')} has no usable address"
            if why:
                sel.rejected[host][str(iface.get("name"))] = why
                continue
            sel.usable[host][str(iface["name"])] = addrs
            for addr, _ in addrs:
                owners[addr].add(host)
    for host in hosts:
        for name, addrs in list(sel.usable[host].items()):
            kept = [(a, s) for a, s in addrs if len(owners[a]) == 1]
            if not kept:
                others = sorted(owners[addrs[0][0]] - {host})
                sel.rejected[host][name] = (f"{name} has {addrs[0][0]}, the same address as on "
                                            f"{', '.join(others[:3])}")
                del sel.usable[host][name]
            else:
                sel.usable[host][name] = kept
    by_subnet: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for host in hosts:
        for name, addrs in sel.usable[host].items():
            for _, subnet in addrs:
                by_subnet[subnet].setdefault(host, []).append(name)
    shared = sorted(s for s, where in by_subnet.items() if len(where) == len(hosts))
    for subnet in shared:
        speeds = []
        for host in hosts:
            known = [ifaces[host][n].get("speed_mbps") for n in by_subnet[subnet][host]]
            speeds.append(max((s for s in known if isinstance(s, int)), default=None))
        sel.speeds[subnet] = None if None in speeds else min(speeds)  # type: ignore[type-var]
    all_names = {h: set(ifaces[h]) for h in hosts}
    if not shared:
        routed = {h: sorted(n for n in sel.usable[h]
                            if ifaces[h][n].get("default_route")) for h in hosts}
        if hosts and all(routed.values()):
            sel.fallback = True
            sel.names = routed
            sel.host_routes, sel.unrouted = layout(
                nodes, {h: [a for n in routed[h] for a in sel.usable[h][n]] for h in hosts})
            sel.value = _one_value(routed, all_names)
            if sel.value is None:
                sel.per_host = {h: _value(v) for h, v in routed.items()}
        return sel
    known = {s: v for s, v in sel.speeds.items() if v is not None}
    best = max(known.values(), default=None)
    top = [s for s in shared if sel.speeds[s] is None or sel.speeds[s] == best]
    sel.chosen = top
    sel.duplicates = one_per_subnet(
        {s: {h: sorted(v, key=natural) for h, v in by_subnet[s].items()} for s in top},
        {h: fact(n, "netpath.routes", []) for n, h in zip(nodes, hosts)})
    for host, extra in sel.duplicates.items():
        for name in extra:
            sel.rejected[host][name] = (f"{name} shares a subnet with an interface every node "
                                        "uses: NCCL could bind either")
            sel.usable[host].pop(name, None)
    sel.names = _names_for(sel, top)
    sel.value = _one_value(sel.names, all_names)
    if sel.value is None:
        sel.per_host = {h: _value(v) for h, v in sel.names.items()}
    if len(top) > 1:
        for subnet in top:
            one = _one_value(_names_for(sel, [subnet]), all_names)
            if one and one not in sel.tie:
                sel.tie.append(one)
    sel.data_path = not all(ib_ready(n)[0] or net_plugin(n) for n in nodes)
    if len(sel.tie) < 2 or not sel.data_path or sel.value is None:
        sel.tie = []  # the same interfaces, IB carries the data, or no one value: nothing to measure
    return sel


def _speed(mbps: int | None) -> str:
    return "unknown speed" if mbps is None else f"{mbps / 1000:g} Gb/s"


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Recommend the exact interface list, or say why there is none."""
    sel = select(nodes)
    evidence: dict[str, Any] = {
        "network.interfaces": {h: {"usable": sorted(sel.usable[h]), "rejected": sel.rejected[h]}
                               for h in sel.hosts},
        "shared_subnets": sel.speeds,
    }
    if not sel.names:
        detail = "; ".join(f"{h}: {', '.join(f'{n} {s}' for n, s in sorted(sel.usable[h].items())) or 'none'}"
                           for h in sel.hosts[:8])
        return [Finding(
            message=("no interface is usable on every node with a subnet they all share "
                     f"(usable per node: {detail})"),
            fix="Put every node on one common subnet, on a NIC that is up, and probe again.",
            severity=Severity.ERROR, evidence=evidence)]
    chosen = ", ".join(f"{s} ({_speed(sel.speeds.get(s))})" for s in sel.chosen)
    where = (f"on {chosen}" if sel.chosen else
             "carrying the default route (no subnet is shared by every node: they must route "
             "to each other)")
    routed_ok, where = judge(nodes, sel.host_routes, sel.unrouted, where)
    unwanted = {h: sorted(set(sel.defaults.get(h, [])) - set(sel.names[h])) for h in sel.hosts}
    unwanted = {h: v for h, v in unwanted.items() if v}
    default_note = ""
    if unwanted:
        sample = "; ".join(f"{h}: {', '.join(v)}" for h, v in list(unwanted.items())[:4])
        default_note = f"; left unset, NCCL would also use {sample}"
    dup = ", ".join(f"{h}'s {', '.join(v)}" for h, v in list(sel.duplicates.items())[:4])
    if dup:
        default_note += (f"; {dup} shares a subnet with the interface every node uses (NCCL "
                         "could bind either): the exact '=' list leaves it out")
    others = {h: [n for n in v if n not in sel.duplicates.get(h, [])] for h, v in unwanted.items()}
    # a same-subnet duplicate alone is net-same-subnet-nics' warning, on its node: INFO here
    severity = Severity.WARNING if (any(others.values()) or (sel.fallback and not routed_ok)
                                    or sel.per_host) else None
    if sel.tie:
        evidence["candidates"] = {VAR: list(sel.tie)}
    tie_note = ""
    if sel.tie:
        tie_note = (f"; {' and '.join(v[1:] for v in sel.tie)} qualify equally: all are "
                    "listed, and NCCL spreads socket traffic over them; measure each alone "
                    "with ncclcheck bench --compare to keep the fastest")
    if sel.value is not None and not (unwanted or sel.tie or sel.fallback) and all(
            set(sel.defaults.get(h, [])) == set(sel.names[h]) for h in sel.hosts):
        return []  # NCCL's own choice is already exactly this on every node
    if sel.value is not None:
        differ = len({tuple(v) for v in sel.names.values()}) > 1
        names_note = "; interface names differ between nodes, the list holds each" if differ else ""
        if not sel.data_path:
            names_note += " (IB carries the data: these carry bootstrap and IB's out-of-band setup)"
        return [Finding(
            message=f"use {sel.value[1:]} {where}{names_note}{default_note}{tie_note}",
            env={VAR: sel.value}, evidence=evidence, severity=severity, hosts=tuple(sel.hosts))]
    groups: dict[str, list[str]] = defaultdict(list)
    for host, value in sel.per_host.items():
        groups[value].append(host)
    return [Finding(
        message=(f"use {value[1:]} {where} on {', '.join(hosts[:6])}"
                 f"{' and more' if len(hosts) > 6 else ''}: interface names differ between "
                 "nodes and one list would also catch an unwanted interface, so each node "
                 "needs its own value (per-node /etc/nccl.conf)"),
        env={VAR: value}, evidence=evidence, severity=Severity.WARNING, hosts=tuple(hosts))
        for value, hosts in groups.items()]


RULE = Rule(
    id="net-socket-ifname",
    title="Pin NCCL_SOCKET_IFNAME to interfaces every node shares",
    severity=Severity.INFO,
    reads=("network.interfaces", "nccl.ibverbs?", "nccl.net_plugin?", "ib.devices?",
           "ib.dev_infiniband?"),
    sets=(VAR,),
    why=("NCCL bootstraps on the first interface its filter admits and spreads Socket traffic "
         "over all of them; unset, the filter admits bridges (br-*), veth ends and per-node "
         "management NICs, and bootstrap over an address that is the same on every node "
         "(docker0) or not routable between them hangs at init (NVIDIA/nccl#697, #913). An '=' "
         "list matches names exactly (matchIfList in src/misc/utils.cc, since v2.5.6-1); without "
         "it eth1 also matches eth10."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname",
    fix="Export the recommended NCCL_SOCKET_IFNAME on every node (or per node in /etc/nccl.conf "
        "when names differ).",
    check=check,
    scope="cluster",
)
