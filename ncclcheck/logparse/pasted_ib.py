r"""Pasted ``ibstat``, ``ibstatus``, ``ibv_devinfo [-v]`` and ``show_gids`` output, read into the probe's facts.

Users paste command output into bug reports beside (or instead of) NCCL logs: with shell prompts,
indentation, tabs turned into spaces, ``...`` elisions, cut anywhere. :class:`PastedIb` takes such
lines one at a time and builds what the ``ib`` probe records from sysfs
(:mod:`ncclcheck.probes.ib`): devices with ports (``state``, ``phys_state``, ``rate_gbps``,
``link_layer``) and GID tables (``index``, ``gid``, ``type``, ``ipv4``, ``netdev``), using the
probe's own parsers for GIDs. Recorded shapes (public issue threads):

ibstat (Mellanox/libvma#990)::

    CA 'mlx5_0'
    	Port 1:
    		State: Active
    		Physical state: LinkUp
    		Rate: 200
    		Link layer: InfiniBand

ibstatus (NVIDIA/nccl#1935)::

    Infiniband device 'mlx5_11' port 1 status:
    	state:		 1: DOWN
    	phys state:	 3: Disabled
    	rate:		 10 Gb/sec (4X SDR)

ibv_devinfo (deepseek-ai/DeepEP#38), ``-v`` GID lines (NVIDIA/nccl#769)::

    hca_id: mlx5_0
            port:   1
                    state:                  PORT_DOWN (1)
                    link_layer:             InfiniBand
                    GID[  3]:               ::ffff:200.0.209.6, RoCE v2

show_gids (NVIDIA/nccl-tests#192, NVIDIA/nccl#1573)::

    mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:0b00:0048 11.0.0.72       v2      ens3np0

A shell prompt (``root@gpunodev1:/x# show_gids``) names the host the following output is from.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Optional


def _probe() -> Any:
    """:mod:`ncclcheck.probes.ib`, imported when a paste is first read: the probe package loads
    every probe (~40 ms), which a log without pastes never needs (diagnose's start-up)."""
    from ncclcheck.probes import ib

    return ib


MAX_DEVICES = 256          #: devices remembered (a paste is small; a hostile file is not)
MAX_GIDS = 64              #: GID entries remembered per port

#: the byte strings the prefilter must look for, and how many lines after each it must keep.
KEYS_FOLLOW = {b"CA '": 40, b"hca_id:": 160, b"Infiniband device '": 9, b"0000:ffff:": 0,
               b"ibstat": 0, b"ibv_devinfo": 160, b"show_gids": 300}  # commands, with prompts

#: ``user@host:cwd$ cmd``, or ``host:~$ cmd`` / ``host:/dir# cmd`` (no user; the cwd after the colon)
_PROMPT = re.compile(r"^(?:[\w.\-]{1,64}@(?P<host>[\w.\-]{1,253})[:\s][^#$]{0,200}"
                     r"|(?P<bare>[\w.\-]{1,253}):[~/][^#$\s]{0,200})[#$]\s*(?P<cmd>.*)$")
_IBSTAT_CA = re.compile(r"^CA '(?P<dev>[\w.\-]{1,64})'")
_IBSTAT_PORT = re.compile(r"^Port (?P<port>\d{1,3}):$")
_KV = re.compile(r"^(?P<key>[A-Za-z_ ]{2,24}?):\s*(?P<value>.*?)\s*$")
_DEVINFO_CMD = re.compile(r"(?<![A-Za-z])ibv_devinfo\b[^|;&]*?\s-d\s*(?P<dev>[\w.\-]{1,64})")
_PROMPT_ONLY = re.compile(r"^(?:ibstat|ibstatus|ibv_devinfo|show_gids)\b")
_IBSTATUS = re.compile(r"^Infiniband device '(?P<dev>[\w.\-]{1,64})' port (?P<port>\d{1,3}) status:")
_NUMBERED = re.compile(r"^\d{1,2}:\s*\S")
_HCA = re.compile(r"^hca_id:\s*(?P<dev>[\w.\-]{1,64})")
_GID = re.compile(r"^GID\[\s*(?P<index>\d{1,5})\]:\s*(?P<gid>[0-9a-fA-F:.]+)(?:,\s*(?P<type>RoCE v[12]|IB))?")
_SHOW_GIDS = re.compile(r"^(?P<dev>[\w.\-]{1,64})\s+(?P<port>\d{1,3})\s+(?P<index>\d{1,5})\s+"
                        r"(?P<gid>[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7})\s+"
                        r"(?:(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3})\s+)?(?P<ver>v[12])\s*(?P<netdev>\S*)")
_DEVINFO_STATE = {"PORT_ACTIVE": "ACTIVE", "PORT_DOWN": "DOWN", "PORT_INIT": "INIT",
                  "PORT_ARMED": "ARMED", "PORT_ACTIVE_DEFER": "ACTIVE_DEFER"}
_DEVINFO_PHYS = {"LINK_UP": "LinkUp", "DISABLED": "Disabled", "POLLING": "Polling",
                 "SLEEP": "Sleep", "LINK_ERROR_RECOVERY": "LinkErrorRecovery"}


def clean(line: str) -> str:
    """A pasted line without its indentation, markdown emphasis and trailing blanks.

    >>> clean("                        **GID[ 14]:   ::ffff:192.168.6.6**")
    'GID[ 14]:   ::ffff:192.168.6.6'
    """
    return line.strip().strip("*`>").strip()


def full_gid(text: str) -> Optional[str]:
    """A GID as sysfs prints it (eight groups of four), from any IPv6 spelling.

    >>> full_gid("::ffff:200.0.209.6"), full_gid("fe80::ac0:ebff:feda:1cfb")[:20]
    ('0000:0000:0000:0000:0000:ffff:c800:d106', 'fe80:0000:0000:0000:')
    """
    try:
        return _probe().parse_gid(ipaddress.IPv6Address(text).exploded)
    except ValueError:
        return None


class PastedIb:
    """Devices and ports read from pasted output, per host (``pasted`` where no prompt says)."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict[str, dict[str, Any]]] = {}   # host -> device name -> device
        self.kinds: dict[str, dict[str, Any]] = {}              # command -> first evidence
        self.evidence: dict[str, dict[str, Any]] = {}           # "host dev:port" -> state line
        self.gid_rows: dict[str, dict[str, Any]] = {}           # "host dev:port index" -> its row
        self._host = "pasted"
        self._dev: Optional[dict[str, Any]] = None
        self._port: Optional[dict[str, Any]] = None
        self._kind: Optional[str] = None

    @property
    def host(self) -> str:
        """The host the last shell prompt named (``pasted`` before any)."""
        return self._host

    # -- structure -------------------------------------------------------------------------
    def _device(self, name: str) -> Optional[dict[str, Any]]:
        devs = self.hosts.setdefault(self._host, {})
        if name not in devs:
            if sum(len(d) for d in self.hosts.values()) >= MAX_DEVICES:
                return None
            devs[name] = {"name": name, "ports": []}
        return devs[name]

    @staticmethod
    def _port_of(dev: dict[str, Any], number: int) -> dict[str, Any]:
        for port in dev["ports"]:
            if port["port"] == number:
                return port
        port = {"port": number, "state": None, "phys_state": None, "rate_gbps": None,
                "link_layer": None, "gids": [], "roce_v2_ipv4_gid_index": None}
        if len(dev["ports"]) < 8:
            dev["ports"].append(port)
        return port

    def _gid(self, port: dict[str, Any], index: int, gid: Optional[str], typ: Optional[str],
             netdev: Optional[str]) -> None:
        if gid is None or len(port["gids"]) >= MAX_GIDS or any(g["index"] == index
                                                               for g in port["gids"]):
            return
        ipv4 = _probe().gid_ipv4(gid)
        port["gids"].append({"index": index, "gid": gid, "type": typ, "ipv4": ipv4,
                             "netdev": netdev})
        v2 = sorted(g["index"] for g in port["gids"] if g["type"] == "RoCE v2" and g["ipv4"])
        port["roce_v2_ipv4_gid_index"] = v2[0] if v2 else None

    def _gid_row(self, dev: dict[str, Any], port: dict[str, Any], index: int,
                 ev: dict[str, Any]) -> None:
        if len(self.gid_rows) < 4 * MAX_GIDS:
            self.gid_rows.setdefault(f"{self._host} {dev['name']}:{port['port']} {index}", ev)

    def _seen(self, kind: str, ev: dict[str, Any]) -> None:
        self._kind = kind
        self.kinds.setdefault(kind, ev)

    # -- lines -----------------------------------------------------------------------------
    def feed(self, line: str, ev: dict[str, Any]) -> bool:
        """Take one line (launcher prefixes already stripped); True when it was pasted output."""
        text = clean(line)
        if not text or text == "...":
            return False
        m = _PROMPT.match(text)
        if m:
            self._host, self._dev, self._port, self._kind = (m.group("host") or m.group("bare"),
                                                             None, None, None)
            text = m.group("cmd")
        m = _DEVINFO_CMD.search(text)                   # "ibv_devinfo -d mlx5_bond_0 -v"
        if m:
            self._dev, self._port = self._device(m.group("dev")), None
            self._seen("ibv_devinfo", ev)
            return True
        if not text or _PROMPT_ONLY.match(text):
            return False
        m = _IBSTAT_CA.match(text)
        if m:
            self._dev, self._port = self._device(m.group("dev")), None
            self._seen("ibstat", ev)
            return True
        m = _IBSTATUS.match(text)
        if m:
            self._dev = self._device(m.group("dev"))
            self._port = self._port_of(self._dev, int(m.group("port"))) if self._dev else None
            self._seen("ibstatus", ev)
            return True
        m = _HCA.match(text)
        if m:
            self._dev, self._port = self._device(m.group("dev")), None
            self._seen("ibv_devinfo", ev)
            return True
        m = _SHOW_GIDS.match(text)
        if m:
            dev = self._device(m.group("dev"))
            if dev is not None:
                port = self._port_of(dev, int(m.group("port")))
                port["link_layer"] = port["link_layer"] or "Ethernet"
                self._gid(port, int(m.group("index")), _probe().parse_gid(m.group("gid").lower()),
                          "RoCE v2" if m.group("ver") == "v2" else "RoCE v1", m.group("netdev") or None)
                self._gid_row(dev, port, int(m.group("index")), ev)
            self._seen("show_gids", ev)
            return True
        if self._dev is None:
            return False
        return self._in_device(text, ev)

    def _in_device(self, text: str, ev: dict[str, Any]) -> bool:
        dev = self._dev
        assert dev is not None
        m = _IBSTAT_PORT.match(text)
        if m and self._kind == "ibstat":
            self._port = self._port_of(dev, int(m.group("port")))
            return True
        m = _GID.match(text)
        if m and self._port is None and self._kind == "ibv_devinfo":
            self._port = self._port_of(dev, 1)             # "-v" GID lines quoted without "port:"
        if m and self._port is not None:
            self._gid(self._port, int(m.group("index")), full_gid(m.group("gid")),
                      m.group("type") or None, None)
            self._gid_row(dev, self._port, int(m.group("index")), ev)
            return True
        m = _KV.match(text)
        if not m:
            return False
        key, value = m.group("key").strip().lower(), m.group("value")
        word = value.split(" ")[0] if value else ""
        if key == "port" and self._kind == "ibv_devinfo" and word.isdigit():
            self._port = self._port_of(dev, int(word))
            return True
        port = self._port
        if port is None:
            return key in ("ca type", "transport", "fw_ver", "number of ports")
        if _NUMBERED.match(value):                       # ibstatus: "4: ACTIVE", "3: Disabled"
            word = _probe().parse_state(value) or ""
        if key == "state":
            port["state"] = _DEVINFO_STATE.get(word, word.upper() if word else None)
            if port["state"] == "INITIALIZING":
                port["state"] = "INIT"
            self.evidence.setdefault(f"{self._host} {dev['name']}:{port['port']}", ev)
        elif key in ("physical state", "phys_state", "phys state"):
            port["phys_state"] = _DEVINFO_PHYS.get(word, word or None)
        elif key == "rate" and _number(word) is not None:
            port["rate_gbps"] = _number(word)
        elif key in ("link layer", "link_layer"):
            port["link_layer"] = word or None
        elif key == "active_speed" and _number(word) is not None:
            port["_speed"] = _number(word)
        elif key == "active_width" and word[:-1].isdigit():
            port["_width"] = int(word[:-1])
        else:
            return True
        if "_speed" in port and "_width" in port and port["rate_gbps"] is None:
            port["rate_gbps"] = port["_speed"] * port["_width"]
        return True

    def devices(self) -> dict[str, list[dict[str, Any]]]:
        """host -> the probe-shaped device list (``ib.devices``)."""
        out = {}
        for host, devs in self.hosts.items():
            out[host] = [{"name": d["name"], "ports": [{k: v for k, v in p.items()
                                                        if not k.startswith("_")}
                                                       for p in d["ports"]]}
                         for d in devs.values()]
        return out


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")) or not 0 < value < 1e5:
        return None
    return int(value) if value.is_integer() else value
