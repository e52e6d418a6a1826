"""``ncclcheck record DIR``: capture what the probe reads on this node, to replay or attach to a bug.

It runs every probe through a :class:`~ncclcheck.host.RecordingHost`, then writes the files,
command outputs and native answers it touched in :class:`~ncclcheck.host.RecordedHost`'s layout,
plus ``facts.json`` (what the probe made of them) and a README. ``ncclcheck probe --replay DIR``
gives the same facts on any machine.

With scrubbing (the default), identifiers are replaced consistently, so that relations survive
(two files naming the same address still name the same one, and a /24 subnet stays shared):
hostnames, IPv4 and IPv6 addresses (IPv4-mapped RoCE GIDs included), MAC addresses, IB GUIDs,
GPU UUIDs and serial numbers. Loopback, netmasks and addresses in 198.18.0.0/15 are kept.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from ncclcheck import schema
from ncclcheck.errors import BadInput

IPV4 = re.compile(r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d.])")
MAC = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:])")
GID = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9a-fA-F]{4}:){7}[0-9a-fA-F]{4}(?![0-9A-Fa-f:])")
GUID = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9a-fA-F]{4}:){3}[0-9a-fA-F]{4}(?![0-9A-Fa-f:])")
GPU_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                      r"[0-9a-fA-F]{12}\b")
V6_SHORT = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f:]*::[0-9A-Fa-f:]*(?![0-9A-Fa-f:])")
SERIAL = re.compile(r'("serial(?:_number)?"\s*:\s*")([^"]+)(")', re.I)
KEEP_V4 = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("198.18.0.0/15"),
           ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("255.0.0.0/8"),
           ipaddress.ip_network("224.0.0.0/4"))


class Scrubber:
    """Consistent replacement of identifiers in text (``scrub(text) -> text``).

    >>> s = Scrubber(["gpu-node-17"])
    >>> s("gpu-node-17 10.1.2.3/24 10.1.2.4 0c:42:a1:65:b8:f8 127.0.0.1")
    'host-1 198.19.128.3/24 198.19.128.4 02:00:00:00:00:01 127.0.0.1'
    >>> s("0000:0000:0000:0000:0000:ffff:0a01:0203")
    '0000:0000:0000:0000:0000:ffff:c613:8003'
    """

    def __init__(self, hostnames: list[str] = ()) -> None:  # type: ignore[assignment]
        names = sorted({h for h in hostnames if h and h not in ("localhost", "unknown")},
                       key=len, reverse=True)
        self.hostnames = {h: f"host-{i + 1}" for i, h in enumerate(names)}
        self.nets: dict[tuple[int, int, int], int] = {}
        self.macs: dict[str, str] = {}
        self.guids: dict[str, str] = {}
        self.uuids: dict[str, str] = {}

    def v4(self, addr: str) -> str:
        """Map an IPv4 address: its /24 goes to a block of 198.19.128.0/17, the host part stays."""
        try:
            ip = ipaddress.IPv4Address(addr)
        except ValueError:
            return addr
        if any(ip in net for net in KEEP_V4):
            return addr
        a, b, c, d = (int(x) for x in addr.split("."))
        block = self.nets.setdefault((a, b, c), len(self.nets) % 32768)
        return f"198.19.{128 + block // 256}.{d}" if block >= 256 else f"198.19.{128 + block}.{d}"

    def _mac(self, m: re.Match[str]) -> str:
        mac = m.group(0).lower()
        if mac in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"):
            return mac
        n = self.macs.setdefault(mac, f"{len(self.macs) + 1:06x}")
        return f"02:00:00:{n[0:2]}:{n[2:4]}:{n[4:6]}"

    def _guid(self, text: str) -> str:
        n = self.guids.setdefault(text.lower(), f"{len(self.guids) + 1:016x}")
        return ":".join(n[i:i + 4] for i in range(0, 16, 4))

    def _gid(self, m: re.Match[str]) -> str:
        groups = m.group(0).lower().split(":")
        if groups[:6] == ["0000"] * 5 + ["ffff"]:
            v4 = ".".join(str(int(groups[6 + i // 2][2 * (i % 2):2 * (i % 2) + 2], 16))
                          for i in range(4))
            a, b, c, d = (int(x) for x in self.v4(v4).split("."))
            return ":".join(groups[:6] + [f"{a:02x}{b:02x}", f"{c:02x}{d:02x}"])
        if all(g == "0000" for g in groups[4:]):
            return m.group(0)
        return ":".join(groups[:4]) + ":" + self._guid(":".join(groups[4:]))

    def _v6_short(self, m: re.Match[str]) -> str:
        try:
            ip = ipaddress.IPv6Address(m.group(0))
        except ValueError:
            return m.group(0)
        if ip.is_loopback or ip.is_unspecified:
            return m.group(0)
        full = GID.fullmatch(ip.exploded)
        return str(ipaddress.IPv6Address(self._gid(full))) if full else m.group(0)

    def __call__(self, text: str) -> str:
        """Scrub one text.

        >>> Scrubber()("fe80::c42:a1ff:fe65:b8f8/64 ::1")
        'fe80::1/64 ::1'
        """
        for name, alias in self.hostnames.items():
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", alias, text)
        text = GPU_UUID.sub(lambda m: self.uuids.setdefault(
            m.group(0), f"{m.group(1)}-00000000-0000-0000-0000-{len(self.uuids) + 1:012x}"), text)
        text = GID.sub(self._gid, text)
        text = V6_SHORT.sub(self._v6_short, text)
        text = GUID.sub(lambda m: self._guid(m.group(0)), text)
        text = MAC.sub(self._mac, text)
        text = IPV4.sub(lambda m: self.v4(m.group(0)), text)
        text = SERIAL.sub(lambda m: m.group(1) + "scrubbed" + m.group(3), text)
        return text


def record_host(folder: str, root: str = "/", scrub: bool = True) -> Path:
    """Probe this node through a recording host and write the recording into ``folder``."""
    from ncclcheck.host import RecordedHost, RecordingHost
    from ncclcheck.probe import collect_facts

    out = Path(folder)
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{folder}: exists and is not empty")
    host = RecordingHost(root)
    facts = collect_facts(host)
    names = [facts.get("hostname", "")]
    fqdn = (host.files.get("proc/sys/kernel/hostname") or "").strip()
    names.append(fqdn.split(".")[0])
    scrubber: Any = Scrubber(names) if scrub else None
    host.save(out, scrubber)
    replayed = collect_facts(RecordedHost(out))
    schema.dump(normalise(replayed), out / "facts.json")
    (out / "README.md").write_text(
        f"# Recorded host\n\nRecorded by `ncclcheck record` {facts['ncclcheck_version']} "
        f"at {facts['collected_at']}.\nScrubbed: {'yes' if scrub else 'no'}.\n"
        "Replay: `ncclcheck probe --replay <this folder>`.\n")
    return out


def normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """A facts document with run-dependent values (times, durations) fixed, for golden files."""
    doc = dict(doc)
    doc["collected_at"] = "1970-01-01T00:00:00Z"
    doc["root"] = "<recorded>"
    doc["ncclcheck_version"] = "<version>"
    doc["sections"] = {name: {**sec, "duration_s": 0.0}
                       for name, sec in (doc.get("sections") or {}).items()}
    return doc
