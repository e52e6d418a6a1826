r"""Pasted ``ifconfig`` output (net-tools), both formats, line by line.

Most interface pastes in NCCL threads are ``ifconfig``, not ``ip addr``. Each line is read into
one item (an interface header, an address, the old format's flags line), which
:class:`ncclcheck.logparse.pasted_ip.PastedIp` turns into the ``network`` probe's interface
records, so that the ``net-socket-ifname`` rule judges them as it judges ``ip addr``.

Recorded samples (leading blanks, which the paste reader strips, kept here as pasted). net-tools
2.10, from pytorch/pytorch#52916::

    docker0: flags=4099<UP,BROADCAST,MULTICAST>  mtu 1500
            inet 172.17.0.1  netmask 255.255.0.0  broadcast 172.17.255.255
    enp0s31f6: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500
            inet 148.251.86.243  netmask 255.255.255.255  broadcast 0.0.0.0
            inet6 fe80::921b:eff:fef7:15a1  prefixlen 64  scopeid 0x20<link>

net-tools 1.60, from horovod/horovod#310::

    docker0   Link encap:Ethernet  HWaddr 02:42:a9:9e:3d:33
              inet addr:172.17.0.1  Bcast:0.0.0.0  Mask:255.255.0.0
              inet6 addr: fe80::42:a9ff:fe9e:3d33/64 Scope:Link
              UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1

>>> parse_ifconfig_line("docker0: flags=4099<UP,BROADCAST,MULTICAST>  mtu 1500")
('iface', {'name': 'docker0', 'flags': ('UP', 'BROADCAST', 'MULTICAST'), 'mtu': 1500, 'link': None})
>>> parse_ifconfig_line("inet 148.251.86.243  netmask 255.255.255.255  broadcast 0.0.0.0")
('inet', {'address': '148.251.86.243', 'prefix': 32, 'v6': False, 'scope': None})
>>> parse_ifconfig_line("inet6 fe80::921b:eff:fef7:15a1  prefixlen 64  scopeid 0x20<link>")
('inet', {'address': 'fe80::921b:eff:fef7:15a1', 'prefix': 64, 'v6': True, 'scope': 'link'})
>>> parse_ifconfig_line("enp159s0  Link encap:Ethernet  HWaddr ec:0d:9a:e8:ba:a0")
('iface', {'name': 'enp159s0', 'flags': None, 'mtu': None, 'link': 'Ethernet'})
>>> parse_ifconfig_line("inet addr:172.30.160.6  Bcast:172.30.175.255  Mask:255.255.240.0")
('inet', {'address': '172.30.160.6', 'prefix': 20, 'v6': False, 'scope': None})
>>> parse_ifconfig_line("inet6 addr: fe80::ee0d:9aff:fee8:baa0/64 Scope:Link")
('inet', {'address': 'fe80::ee0d:9aff:fee8:baa0', 'prefix': 64, 'v6': True, 'scope': 'link'})
>>> parse_ifconfig_line("UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1")
('flags', {'flags': ('UP', 'BROADCAST', 'RUNNING', 'MULTICAST'), 'mtu': 1500})
>>> parse_ifconfig_line("RX packets 0  bytes 0 (0.0 B)"), parse_ifconfig_line("inet 1.2.3.4/24 scope global")
(None, None)
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Iterable, Optional

#: the byte strings the prefilter must look for, and how many lines after each it must keep
#: (an interface's block: addresses, flags and counters, about nine lines).
KEYS_FOLLOW = {b": flags=": 10, b"Link encap:": 10, b"$ ifconfig": 0, b"# ifconfig": 0}

_HEAD_NEW = re.compile(r"^(?P<name>[\w.\-:@]{1,32}?): flags=\d{1,8}<(?P<flags>[A-Z_,\-]*)>\s+"
                       r"mtu (?P<mtu>\d{1,6})\s*$")
_HEAD_OLD = re.compile(r"^(?P<name>[\w.\-:]{1,32})\s+Link encap:(?P<link>[A-Za-z0-9]+(?: Loopback)?)")
_INET_NEW = re.compile(r"^inet (?P<addr>[\d.]{7,15})\s+netmask (?P<mask>[\d.]{7,15})\b")
_INET6_NEW = re.compile(r"^inet6 (?P<addr>[0-9a-fA-F:]{2,39})\s+prefixlen (?P<prefix>\d{1,3})"
                        r"(?:\s+scopeid 0x[0-9a-f]{1,4}<(?P<scope>\w{1,16})>?)?")
_INET_OLD = re.compile(r"^inet addr:(?P<addr>[\d.]{7,15})\s.*?\bMask:(?P<mask>[\d.]{7,15})\s*$")
_INET6_OLD = re.compile(r"^inet6 addr: ?(?P<addr>[0-9a-fA-F:]{2,39})/(?P<prefix>\d{1,3})\s+"
                        r"Scope:(?P<scope>\w{1,16})")
_FLAGS_OLD = re.compile(r"^(?P<flags>(?:[A-Z]{2,12} )+)\s*MTU:(?P<mtu>\d{1,6})\b")


def _prefix(mask: str) -> Optional[int]:
    try:
        return ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen
    except ValueError:
        return None


def parse_ifconfig_line(text: str) -> Optional[tuple[str, dict[str, Any]]]:
    """One stripped line of ``ifconfig`` output: ``('iface', ...)``, ``('inet', ...)``,
    ``('flags', ...)`` (the old format's flags line), or None for anything else."""
    if (m := _HEAD_NEW.match(text)):
        return "iface", {"name": m.group("name"), "flags": tuple(f for f in m.group("flags").split(",") if f),
                         "mtu": int(m.group("mtu")), "link": None}
    if (m := _HEAD_OLD.match(text)):
        return "iface", {"name": m.group("name"), "flags": None, "mtu": None, "link": m.group("link")}
    if (m := _INET_NEW.match(text) or _INET_OLD.match(text)):
        prefix = _prefix(m.group("mask"))
        if prefix is None:
            return None
        return "inet", {"address": m.group("addr"), "prefix": prefix, "v6": False, "scope": None}
    if (m := _INET6_NEW.match(text) or _INET6_OLD.match(text)):
        scope = (m.group("scope") or "").lower() or None
        return "inet", {"address": m.group("addr"), "prefix": int(m.group("prefix")), "v6": True,
                        "scope": "global" if scope == "global" else scope}
    if (m := _FLAGS_OLD.match(text)):
        return "flags", {"flags": tuple(m.group("flags").split()), "mtu": int(m.group("mtu"))}
    return None


def operstate(flags: Iterable[str]) -> str:
    """``up`` for an interface that is UP and RUNNING (carrier), else ``down``: ``ifconfig``'s
    ``<UP,BROADCAST,MULTICAST>`` without RUNNING is what ``ip`` shows as NO-CARRIER, state DOWN.

    >>> operstate({"UP", "RUNNING"}), operstate({"UP", "BROADCAST"}), operstate({"LOOPBACK", "UP", "RUNNING"})
    ('up', 'down', 'up')
    """
    return "up" if {"UP", "RUNNING"} <= set(flags) else "down"
