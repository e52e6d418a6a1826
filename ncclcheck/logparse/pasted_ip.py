r"""Pasted ``ip addr`` and ``ip -br addr`` output (and ``ifconfig``'s, through
:mod:`ncclcheck.logparse.pasted_ifconfig`), read into the ``network`` probe's interfaces.

The interfaces get the probe's shape (:class:`ncclcheck.probes.network.types.Interface`: name, kind,
operstate, master, IPv4/IPv6 addresses with prefix and subnet), so that the ``net-socket-ifname``
rule itself judges them. Recorded shapes::

    2: eth0@if23: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default
        link/ether 02:42:ac:11:00:02 brd ff:ff:ff:ff:ff:ff link-netnsid 0
        inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0
    3: eno1: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 1500 qdisc mq master bond0 state UP

    $ ip -br addr
    lo               UNKNOWN        127.0.0.1/8 ::1/128
    bond0            UP             10.20.0.21/24

The kind is guessed from what ``ip`` prints (LOOPBACK flag, ``link/infiniband``, ``@if`` veth
peers, ``master``) and from the name, as the probe does when sysfs is silent.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Optional

from ncclcheck.logparse.pasted_ifconfig import operstate, parse_ifconfig_line

MAX_IFACES = 512
#: lines of an ``ifconfig`` block read after its header (addresses, flags, counters: about ten).
IFCONFIG_BLOCK = 12
#: the byte strings the prefilter must look for, and how many lines after each it must keep.
KEYS_FOLLOW = {b"> mtu ": 8, b"ip -br": 64, b"# ip ": 0, b"$ ip ": 0}  # ip -br(ief), prompts

_HEAD = re.compile(r"^\d{1,6}:\s+(?P<name>[\w.\-:]{1,32}?)(?:@(?P<peer>[\w.\-]+))?:\s+<(?P<flags>[A-Z_,\-]*)>"
                   r"(?P<rest>.*)$")
_INET = re.compile(r"^inet(?P<v6>6)?\s+(?P<addr>[0-9a-fA-F:.]+)/(?P<prefix>\d{1,3})(?P<rest>.*)$")
_BRIEF = re.compile(r"^(?P<name>[\w.\-]{1,32}?)(?:@(?P<peer>[\w.\-]+))?\s+(?P<state>UP|DOWN|UNKNOWN|DORMANT|"
                    r"LOWERLAYERDOWN|NOTPRESENT)\s*(?P<addrs>(?:\s+[0-9a-fA-F:.]+/\d{1,3})*)\s*$")
_PROMPT_IP = re.compile(r"\bip\s+(?:-\w+\s+)*(?:-br(?:ief)?)\b")


def _kind(name: str, flags: set[str], link: Optional[str], master: Optional[str],
          peer: Optional[str]) -> str:
    """The probe's ``kind`` for what ``ip`` shows.

    >>> _kind("lo", {"LOOPBACK"}, None, None, None), _kind("eth0", set(), "ether", None, "if23")
    ('loopback', 'veth')
    >>> _kind("br-5f2a1c3d4e5f", set(), None, None, None), _kind("bond0", {"MASTER"}, None, None, None)
    ('docker', 'bond')
    """
    if "LOOPBACK" in flags or name == "lo":
        return "loopback"
    if link == "infiniband" or name.startswith("ib"):
        return "ipoib"
    if re.match(r"^(docker\d*|docker_gwbridge|br-[0-9a-f]{12})$", name):
        return "docker"
    if name.startswith(("bond", "team")) or "MASTER" in flags:
        return "bond"
    if name.startswith(("virbr", "br", "cni", "lxcbr")):
        return "bridge"
    if name.startswith("veth") or (peer or "").startswith("if"):
        return "veth"
    if "." in name:
        return "vlan"
    return "physical"


def _address(text: str, prefix: int, v6: bool, scope: Optional[str]) -> Optional[dict[str, Any]]:
    try:
        net = ipaddress.ip_interface(f"{text}/{prefix}")
    except ValueError:
        return None
    out: dict[str, Any] = {"address": str(net.ip), "prefix": prefix, "subnet": str(net.network)}
    if v6:
        out["scope"] = scope or ("link" if net.ip.is_link_local else "global")
    return out


class PastedIp:
    """Interfaces read from pasted ``ip addr`` / ``ip -br addr``, per host (prompt), in order."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict[str, dict[str, Any]]] = {}
        self.kinds: dict[str, dict[str, Any]] = {}
        self._host = "pasted"
        self._iface: Optional[dict[str, Any]] = None
        self._brief = False
        self._ifconfig = 0          # lines left to read of an ``ifconfig`` block (pasted_ifconfig)

    def set_host(self, host: str) -> None:
        """A shell prompt named the host the next output comes from."""
        self._host, self._iface, self._brief, self._ifconfig = host, None, False, 0

    def _new(self, name: str, kind: str, state: Optional[str], master: Optional[str],
             mtu: Optional[int]) -> Optional[dict[str, Any]]:
        ifaces = self.hosts.setdefault(self._host, {})
        if name not in ifaces and sum(len(v) for v in self.hosts.values()) >= MAX_IFACES:
            return None
        ifaces[name] = {"name": name, "kind": kind, "link_kind": None, "operstate": state,
                        "carrier": True if state == "up" else None, "mtu": mtu,
                        "speed_mbps": None, "mac": None, "pci_address": None, "numa_node": None,
                        "driver": None, "master": master, "ipv4": [], "ipv6": [],
                        "default_route": False}
        return ifaces[name]

    def feed(self, text: str, ev: dict[str, Any]) -> bool:
        """Take one cleaned line; True when it was ``ip`` output."""
        if _PROMPT_IP.search(text):
            self._brief = True
            self.kinds.setdefault("ip -br addr", ev)
            return True
        m = _HEAD.match(text)
        if m:
            self._brief, self._ifconfig = False, 0
            flags = set(m.group("flags").split(","))
            rest = m.group("rest")
            state = re.search(r"\bstate (\w+)", rest)
            master = re.search(r"\bmaster (\S+)", rest)
            mtu = re.search(r"\bmtu (\d{1,6})", rest)
            name = m.group("name")
            self._iface = self._new(
                name, _kind(name, flags, None, master.group(1) if master else None, m.group("peer")),
                state.group(1).lower() if state else ("up" if "UP" in flags else None),
                master.group(1) if master else None, int(mtu.group(1)) if mtu else None)
            self.kinds.setdefault("ip addr", ev)
            return True
        if self._ifconfig_line(text, ev):
            return True
        if self._iface is not None:
            if text.startswith("link/"):
                link = text.split()[0][5:]
                if link == "infiniband":
                    self._iface["kind"] = "ipoib"
                return True
            m = _INET.match(text)
            if m:
                scope = re.search(r"\bscope (\w+)", m.group("rest"))
                addr = _address(m.group("addr"), int(m.group("prefix")), bool(m.group("v6")),
                                scope.group(1) if scope else None)
                key = "ipv6" if m.group("v6") else "ipv4"
                if addr and len(self._iface[key]) < 16:
                    self._iface[key].append(addr)
                return True
            if text.startswith(("valid_lft", "altname")):
                return True
        if self._brief:
            m = _BRIEF.match(text)
            if m:
                name = m.group("name")
                iface = self._new(name, _kind(name, set(), None, None, m.group("peer")),
                                  m.group("state").lower(), None, None)
                for item in m.group("addrs").split():
                    a, _, p = item.partition("/")
                    v6 = ":" in a
                    addr = _address(a, int(p), v6, None)
                    if iface is not None and addr:
                        iface["ipv6" if v6 else "ipv4"].append(addr)
                return True
        return False

    def _ifconfig_line(self, text: str, ev: dict[str, Any]) -> bool:
        """An ``ifconfig`` line (either net-tools format) into the same interface records. Only
        a header line, or one of the lines just after a header, is parsed (a block is about ten
        lines): the rest of the log is not tried against the regexes."""
        if not self._ifconfig and ": flags=" not in text and "Link encap:" not in text:
            return False
        item = parse_ifconfig_line(text)
        if item is None:
            self._ifconfig = max(self._ifconfig - 1, 0)
            return False
        what, v = item
        if what == "iface":
            flags = set(v["flags"]) if v["flags"] is not None else (
                {"LOOPBACK"} if v["link"] == "Local Loopback" else set())
            self._brief, self._ifconfig = False, IFCONFIG_BLOCK
            self._iface = self._new(v["name"], _kind(v["name"], flags, (v["link"] or "").lower(),
                                                     None, None),
                                    operstate(flags) if v["flags"] is not None else None, None,
                                    v["mtu"])
            self.kinds.setdefault("ifconfig", ev)
            return True
        if not self._ifconfig or self._iface is None:
            return False
        if what == "flags":
            self._iface["operstate"] = operstate(v["flags"])
            self._iface["carrier"] = True if self._iface["operstate"] == "up" else None
            self._iface["mtu"] = v["mtu"]
        else:
            addr = _address(v["address"], v["prefix"], v["v6"], v["scope"])
            key = "ipv6" if v["v6"] else "ipv4"
            if addr and len(self._iface[key]) < 16:
                self._iface[key].append(addr)
        return True

    def facts(self) -> list[dict[str, Any]]:
        """One minimal facts document per host: the ``network`` section, with ``nccl`` and ``ib``
        marked unavailable (a paste says nothing of them, so the rule's optional reads of them
        are skipped, as on a node without RDMA)."""
        absent = {"status": "unavailable", "errors": ["not in the pasted output"]}
        return [{"hostname": host, "sections": {
            "network": {"status": "ok", "data": {
                "interfaces": list(ifaces.values()), "default_routes": [],
                "default_route_interfaces": [], "address_source": "pasted ip output"}},
            "nccl": dict(absent), "ib": dict(absent)}}
            for host, ifaces in self.hosts.items() if ifaces]
