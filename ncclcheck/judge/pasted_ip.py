"""Findings from pasted ``ip addr`` output: the NCCL_SOCKET_IFNAME to set (issue 24).

* what the ``net-socket-ifname`` rule itself recommends over the pasted interfaces (a docker or
  ``br-*`` bridge NCCL would pick beside the real NIC, and the exact value to set); where the
  rule is quiet (NCCL's default already right), the value and why, as info (``ip addr`` or
  ``ifconfig``);
* a bond over two or more NICs listed beside a management NIC: the bond alone;
* a BGP-unnumbered host whose routable /32 is on ``lo`` while its NICs carry only IPv6
  link-local addresses: NCCL can use neither as it stands (NVIDIA/nccl#1053).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.judge.derived_base import _raise
from ncclcheck.logparse.pasted import Pasted
from ncclcheck.logparse.state import LogState


def _acc_hosts(acc: Any, hosts: list[str]) -> None:
    for h in hosts:
        if h != "pasted" and len(acc.hosts) < 256:
            acc.hosts.add(h)


def check_interfaces(state: LogState, pasted: Pasted) -> None:
    """``net-socket-ifname`` as the rule itself says it, over the interfaces ``ip`` showed."""
    nodes = pasted.ip.facts()
    if not nodes:
        return
    from ncclcheck.rules import net_socket_ifname   # the rules load on a paste only (start-up)
    from ncclcheck.rules.engine import evaluate

    what = "/".join(sorted(pasted.ip.kinds))
    ev = [pasted.ip.kinds[k] for k in sorted(pasted.ip.kinds)][:2]
    if _loopback_slash32(state, nodes, what, ev):
        return
    result = evaluate([net_socket_ifname.RULE], nodes)
    if not result["findings"]:
        _default_is_right(state, nodes, what, ev)
    for f in result["findings"]:
        hosts = [h for h in f["hosts"] if h != "pasted"]
        value = f["env"].get("NCCL_SOCKET_IFNAME")
        if not value:
            continue        # "no usable interface": a paste may simply be cut before it
        if _bond_over_nics(state, nodes, value, what, ev, hosts):
            continue
        acc = _raise(state, "net-socket-ifname", f"{what}: {f['message']}", [],
                     [pasted.ip.kinds[k] for k in sorted(pasted.ip.kinds)][:2],
                     severity=f["severity"] if f["severity"] in ("error", "warning") else "info",
                     title="the NCCL_SOCKET_IFNAME to set, read from the pasted interfaces",
                     cause=f["why"],
                     fix=(f"Set NCCL_SOCKET_IFNAME={value} on every node." if value else f["fix"]))
        _acc_hosts(acc, hosts)


def _default_is_right(state: LogState, nodes: list[dict[str, Any]], what: str,
                      ev: list[dict[str, Any]]) -> None:
    """The rule is quiet when NCCL's default already picks the right interfaces: say which, and
    why the others are left out (docker0 and lo by NCCL's own default ``^docker,lo``,
    src/misc/socket.cc ncclFindInterfaces), so the paste still gives the value and its reason.
    A docker bridge in sight gets one more line: tools beside NCCL that do not skip it (Open
    MPI's TCP transport uses every interface unless told, horovod/horovod#310) need their own
    exclusion."""
    from ncclcheck.rules.net_socket_ifname import select

    sel = select(nodes)
    if sel.value is None or not sel.names or any(not sel.names.get(h) for h in sel.hosts):
        return          # a cut paste (no usable interface): nothing to say
    hosts = [h for h in sel.hosts if h != "pasted"]
    left = sorted({why for h in sel.hosts for why in sel.rejected.get(h, {}).values()
                   if not why.endswith("has no usable address")})
    docker = sorted({i["name"] for n in nodes for i in _ifaces(n) if i["kind"] == "docker"})
    mpi = (f" Open MPI's TCP transport is not NCCL and uses {docker[0]} unless told: "
           f"`mpirun --mca btl_tcp_if_exclude lo,{docker[0]}` (or btl_tcp_if_include "
           f"{sel.value.lstrip('=').split(',')[0]})." if docker else "")
    acc = _raise(state, "net-socket-ifname",
                 f"{what}: NCCL_SOCKET_IFNAME={sel.value} is the value; left unset, NCCL's default "
                 f"already picks {sel.value.lstrip('=')}"
                 + (f" ({'; '.join(left[:4])})" if left else ""), [], ev, severity="info",
                 title="the NCCL_SOCKET_IFNAME to set, read from the pasted interfaces",
                 cause="Unset, NCCL_SOCKET_IFNAME means ^docker,lo: NCCL skips docker* and lo and "
                       "takes the other interfaces that are up (src/misc/socket.cc, "
                       "ncclFindInterfaces); here that is exactly the interface every node can "
                       "use.",
                 fix=f"Nothing to change for NCCL. To pin it against a bridge or NIC added later, "
                     f"set NCCL_SOCKET_IFNAME={sel.value} on every node." + mpi)
    _acc_hosts(acc, hosts)


def _ifaces(node: dict[str, Any]) -> list[dict[str, Any]]:
    return node["sections"]["network"]["data"]["interfaces"]


def _loopback_slash32(state: LogState, nodes: list[dict[str, Any]], what: str,
                      ev: list[dict[str, Any]]) -> bool:
    """BGP-unnumbered hosts: the routable address is a /32 on ``lo`` and the NICs carry only
    IPv6 link-local addresses. NCCL's default (``^docker,lo``) then takes a NIC's fe80:: address,
    which no other node can reach, and ``NCCL_SOCKET_IFNAME=lo`` gives 127.0.0.1, the first
    address of lo (NVIDIA/nccl#1053). The address must sit on an interface of its own."""
    raised = False
    for node in nodes:
        ifaces = _ifaces(node)
        lo = [a for i in ifaces if i["kind"] == "loopback" for a in i["ipv4"]
              if a["prefix"] == 32 and not a["address"].startswith("127.")]
        routable = [i for i in ifaces if i["kind"] not in ("loopback", "docker")
                    and (i["ipv4"] or any(a.get("scope") == "global" for a in i["ipv6"]))]
        if not lo or routable:
            continue
        nics = [i["name"] for i in ifaces if i["kind"] not in ("loopback", "docker")
                and i["operstate"] in ("up", "unknown") and i["ipv6"]]
        addr = lo[0]["address"]
        host = node["hostname"]
        acc = _raise(state, "net-socket-ifname",
                     f"{what}{'' if host == 'pasted' else ' on ' + host}: the routable address "
                     f"{addr}/32 is on lo and {', '.join(nics[:4]) or 'the NICs'} carry only IPv6 "
                     f"link-local addresses (BGP unnumbered). Left unset, NCCL uses "
                     f"{nics[0] if nics else 'a NIC'}'s fe80:: address, which other nodes cannot "
                     "reach; NCCL_SOCKET_IFNAME=lo gives 127.0.0.1, lo's first address. Put the "
                     "/32 on an interface of its own and name that one.", [], ev,
                     severity="warning",
                     title="the routable /32 is on lo: NCCL cannot use it as it stands",
                     cause="NCCL takes the first address of each interface NCCL_SOCKET_IFNAME "
                           "selects (src/misc/socket.cc, ncclFindInterfaces) and excludes lo by "
                           "default; on lo that is 127.0.0.1 (https://github.com/NVIDIA/nccl/issues/"
                           "1053), and an IPv6 link-local address is only reachable on its own "
                           "link.",
                     fix=f"On every node, move the host's /32 to a dummy interface: `ip link add "
                         f"nccl0 type dummy && ip link set nccl0 up && ip addr add {addr}/32 dev "
                         "nccl0` (each node its own address; keep announcing it over BGP), then "
                         "set NCCL_SOCKET_IFNAME==nccl0.")
        _acc_hosts(acc, [host])
        raised = True
    return raised


def _bond_over_nics(state: LogState, nodes: list[dict[str, Any]], value: str, what: str,
                    ev: list[dict[str, Any]], hosts: list[str]) -> bool:
    """A bond over two or more NICs listed beside another interface with an address (a
    management NIC): NCCL spreads its sockets over every interface it is given, so the list is
    paced by the slower one, and left unset NCCL takes the first in the kernel's order. The bond
    is the data path: name it alone."""
    names = [n for n in value.lstrip("=^").split(",") if n]
    if len(names) < 2:
        return False
    for node in nodes:
        ifaces = {i["name"]: i for i in _ifaces(node)}
        bonds = [n for n in names if ifaces.get(n, {}).get("kind") == "bond"]
        if len(bonds) != 1:
            continue
        bond = ifaces[bonds[0]]
        slaves = [i["name"] for i in ifaces.values() if i.get("master") == bond["name"]]
        others = [ifaces[n] for n in names if n != bond["name"] and n in ifaces]
        if len(slaves) < 2 or any((o.get("mtu") or 0) > (bond.get("mtu") or 0) for o in others):
            continue
        first = next((n for n in ifaces if n in names), names[0])
        acc = _raise(state, "net-socket-ifname",
                     f"{what}: use {bond['name']}, the bond over {', '.join(slaves[:4])}"
                     f" (MTU {bond.get('mtu') or '?'}), not "
                     f"{', '.join(o['name'] + ' (MTU ' + str(o.get('mtu') or '?') + ')' for o in others)}"
                     f" beside it: NCCL_SOCKET_IFNAME=={bond['name']}"
                     + (f"; left unset, NCCL would take {first} first" if first != bond["name"]
                        else ""), [], ev, severity="warning" if first != bond["name"] else "info",
                     title="the NCCL_SOCKET_IFNAME to set, read from the pasted interfaces",
                     cause="NCCL spreads its socket traffic over every interface NCCL_SOCKET_IFNAME "
                           "selects and bootstraps on the first (src/misc/socket.cc, "
                           "ncclFindInterfaces; default ^docker,lo in the kernel's order); a bond "
                           "of two NICs is one interface to NCCL, and a management NIC listed "
                           "beside it paces the rings at its speed.",
                     fix=f"Set NCCL_SOCKET_IFNAME=={bond['name']} on every node (`==` for the exact "
                         "name); if the other interface is also a data NIC, measure "
                         "both with `ncclcheck bench --compare`.")
        _acc_hosts(acc, hosts)
        return True
    return False
