"""Which interface gloo should use: ``NCCL_SOCKET_IFNAME`` made concrete, or the route.

gloo takes one concrete name in ``GLOO_SOCKET_IFNAME``; NCCL takes a pattern. NCCL's syntax
(src/misc/socket.cc ``ncclFindInterfaces``, src/misc/utils.cc ``matchIfList``): a comma list of
name **prefixes**; a leading ``^`` excludes the listed ones instead; then a leading ``=`` makes
the names exact; a value of one character or less is ignored. :func:`match_interfaces` applies
it to this node's interfaces, in kernel order, as NCCL does, and :func:`gloo_ifname` keeps the
first one that has an IPv4 address.

When nothing names an interface, :func:`route_interface` gives the interface the kernel routes
to the rendezvous address through, so the CPU path works in network namespaces and on hosts
whose hostname does not resolve to a usable address.
"""

from __future__ import annotations

import fcntl
import socket
import struct

SIOCGIFADDR = 0x8915


def parse_ifname_spec(spec: str) -> tuple[bool, bool, list[str]]:
    """Split an ``NCCL_SOCKET_IFNAME`` value into (exclude, exact, names).

    >>> parse_ifname_spec("^=docker0,lo")
    (True, True, ['docker0', 'lo'])
    >>> parse_ifname_spec("eth,ib")
    (False, False, ['eth', 'ib'])
    """
    exclude = spec.startswith("^")
    rest = spec[1:] if exclude else spec
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    names = [item.split(":", 1)[0] for item in rest.split(",") if item]
    return exclude, exact, names


def match_interfaces(spec: str | None, names: list[str]) -> list[str]:
    """The interfaces of ``names`` (kernel order) that ``NCCL_SOCKET_IFNAME=spec`` selects.

    >>> match_interfaces("eth", ["lo", "eth0", "eth1", "ens5"])
    ['eth0', 'eth1']
    >>> match_interfaces("=eth0", ["eth0", "eth01"]), match_interfaces("^docker,lo", ["lo", "docker0", "ens5"])
    (['eth0'], ['ens5'])
    >>> match_interfaces("e", ["eth0"])  # one character: NCCL ignores it
    ['eth0']
    """
    if not spec or len(spec) <= 1:
        return list(names)
    exclude, exact, wanted = parse_ifname_spec(spec)

    def listed(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if listed(n) != exclude]


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of interface ``name`` on this node, or None (``SIOCGIFADDR``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def local_interfaces() -> list[tuple[str, str | None]]:
    """This node's interfaces in kernel (index) order, with their IPv4 address or None."""
    return [(name, interface_ipv4(name)) for _, name in socket.if_nameindex()]


def gloo_ifname(spec: str, interfaces: list[tuple[str, str | None]]) -> str | None:
    """The concrete interface gloo should use for ``NCCL_SOCKET_IFNAME=spec``, or None.

    >>> nics = [("lo", "127.0.0.1"), ("docker0", "172.17.0.1"), ("ens5", None), ("ens6", "10.0.0.2")]
    >>> gloo_ifname("^docker,lo", nics), gloo_ifname("=docker0", nics), gloo_ifname("ib", nics)
    ('ens6', 'docker0', None)
    """
    addresses = dict(interfaces)
    for name in match_interfaces(spec, [n for n, _ in interfaces]):
        if addresses.get(name):
            return name
    return None


def source_address(dest: str, port: int = 9) -> str | None:
    """The local IPv4 address the kernel would use to reach ``dest`` (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((dest, port))
            return sock.getsockname()[0]
    except OSError:
        return None


def route_interface(dest: str, interfaces: list[tuple[str, str | None]] | None = None) -> str | None:
    """The interface that owns the address this node reaches ``dest`` from, or None."""
    addr = source_address(dest)
    if addr is None:
        return None
    if addr.startswith("127."):
        return "lo"
    for name, ipv4 in interfaces if interfaces is not None else local_interfaces():
        if ipv4 == addr:
            return name
    return None
