"""network: every interface, its kind, link state, addresses, and whether it has the default route.

NCCL picks its bootstrap and Socket-transport interfaces by name (``NCCL_SOCKET_IFNAME``) and skips
``docker*`` and ``lo`` by default, so the probe reports, per interface:

* its **kind**, from sysfs (no netlink needed): ``loopback`` (ARPHRD 772), ``ipoib`` (ARPHRD 32),
  ``bridge``, ``docker`` (a bridge named ``docker*`` or ``br-<12 hex>``), ``bond``, ``vlan``,
  ``veth``, ``physical`` (it has a ``device`` behind it), or ``virtual`` (anything else
  software-made: dummy, ifb, tun, vxlan...). When ``ip -d -j addr show`` answers, its
  ``linkinfo.info_kind`` (``veth``, ``dummy``, ``bridge``...) confirms the guess and is kept as
  ``link_kind``;
* operstate, carrier, MTU, speed (Mb/s; null when the kernel does not know it) and MAC;
* IPv4 and IPv6 addresses with prefix and subnet, from the ``net_addrs`` query (psutil), else from
  ``ip -j``, else (IPv6 only) from ``/proc/net/if_inet6``;
* for interfaces backed by a device: PCI address, NUMA node and driver;
* the bond or bridge it is enslaved to (``master``), and whether it carries a default route
  (``/proc/net/route``, ``/proc/net/ipv6_route``).

Shell equivalent: ``ip -d addr show; ip route show default; ls -l /sys/class/net``.

The work is split by job; this module holds :func:`collect`, and each name lives in one module:
:mod:`~ncclcheck.probes.network.types` (the section's shapes),
:mod:`~ncclcheck.probes.network.links` (one interface from sysfs),
:mod:`~ncclcheck.probes.network.addrs` (addresses) and
:mod:`~ncclcheck.probes.network.routes` (default routes).
"""

from __future__ import annotations

from ncclcheck.host.protocol import Host, Unavailable
from ncclcheck.probes.network.addrs import _addresses, parse_ip_json
from ncclcheck.probes.network.links import _interface, natural_key
from ncclcheck.probes.network.routes import parse_ipv6_route, parse_proc_route
from ncclcheck.probes.network.types import NetworkData


def collect(host: Host, errors: list[str]) -> NetworkData:
    """Probe every interface of ``host`` (see the module docstring)."""
    names = sorted((n for n in host.listdir("sys/class/net") if n != "bonding_masters"),
                   key=natural_key)
    if not names:
        raise Unavailable("no /sys/class/net: sysfs is not mounted or has no interfaces")
    ip = host.run(["ip", "-d", "-j", "addr", "show"])
    link_kinds, ip_addrs = parse_ip_json(ip.stdout) if ip.ok else ({}, {})
    if not ip.ok and ip.returncode is not None:
        errors.append(ip.why_failed())
    addrs, source = _addresses(host, set(names), errors, ip_addrs)
    routes = (parse_proc_route(host.read("proc/net/route"))
              + parse_ipv6_route(host.read("proc/net/ipv6_route")))
    on_default = {r["interface"] for r in routes}
    found = [_interface(host, n, link_kinds.get(n), addrs.get(n, {}), n in on_default)
             for n in names]
    # `ip link` order: by ifindex; interfaces whose index is unknown go last, by name.
    interfaces = [i for _, i in sorted(found, key=lambda f: (f[0] is None, f[0] or 0))]
    unknown = sorted(set(addrs) - set(names))
    if unknown:
        errors.append(f"addresses of interfaces missing from /sys/class/net: {', '.join(unknown)}")
    return {"interfaces": interfaces, "default_routes": routes,
            "default_route_interfaces": sorted(on_default), "address_source": source}
