"""The ``network`` section's shapes, and every kind an interface can be."""

from __future__ import annotations

from typing import Optional, TypedDict



class Address(TypedDict, total=False):
    """One IP address of an interface."""

    address: str          #: "198.18.0.1" / "fe80::1" (no "%zone")
    prefix: int           #: 24
    subnet: str           #: "198.18.0.0/24"
    scope: str            #: IPv6 only: "global", "link", "host", "site"


class Interface(TypedDict):
    """One network interface."""

    name: str
    kind: str                    #: see :data:`KINDS`
    link_kind: Optional[str]     #: netlink's kind ("veth", "dummy", "bond"...) when ``ip`` told us
    operstate: Optional[str]     #: "up", "down", "unknown", "dormant", "lowerlayerdown"...
    carrier: Optional[bool]      #: null when the kernel refuses to say (interface down)
    mtu: Optional[int]
    speed_mbps: Optional[int]    #: null when unknown (-1, or EINVAL on virtual/down links)
    mac: Optional[str]
    pci_address: Optional[str]   #: "0000:19:00.0" for PCI-backed interfaces
    numa_node: Optional[int]     #: null when unknown or -1
    driver: Optional[str]        #: "mlx5_core", "virtio_net"...
    master: Optional[str]        #: bond or bridge this interface is enslaved to
    ipv4: list[Address]
    ipv6: list[Address]
    default_route: bool


class DefaultRoute(TypedDict):
    """A default route of the main table."""

    family: str                  #: "inet" or "inet6"
    interface: str
    gateway: Optional[str]
    metric: int


class NetworkData(TypedDict):
    """The ``network`` section's data."""

    interfaces: list[Interface]
    default_routes: list[DefaultRoute]
    default_route_interfaces: list[str]
    address_source: Optional[str]   #: "net_addrs query (psutil 7.2.2)", "ip -d -j addr show"...


#: ``{ifname: {"ipv4": [...], "ipv6": [...]}}``
AddressMap = dict[str, dict[str, list[Address]]]
#: Every value ``kind`` takes.
KINDS = ("physical", "bond", "vlan", "bridge", "veth", "docker", "virtual", "ipoib", "loopback")
