"""``ncclcheck record DIR``: capture what the probe reads on this node, to replay or attach to a bug.

It runs every probe through a :class:`~ncclcheck.host.recording.RecordingHost`, then writes the
files, command outputs and native answers it touched in
:class:`~ncclcheck.host.recorded.RecordedHost`'s layout, plus ``facts.json`` (what the probe made
of them) and a README. ``ncclcheck probe --replay DIR`` gives the same facts on any machine.

With scrubbing (the default), identifiers are replaced consistently, so that relations survive
(two files naming the same address still name the same one, and a /24 subnet stays shared):

* hostnames: this node's, and the other nodes named in ``MASTER_ADDR``, ``NCCL_COMM_ID``,
  ``NCCL_HOSTID`` and ``SLURM_JOB_NODELIST``, and file servers in ``/proc/mounts``;
* IPv4 addresses (a /24 goes to a /24 of 198.19.128.0/17, the host part stays), also where the
  kernel writes them in hex (``/proc/net/route``) and inside IPv4-mapped RoCE GIDs;
* IPv6 addresses and GIDs: a routable /64 prefix goes to one of 2001:db8::/32 and the interface
  id to a counter, also in hex (``/proc/net/ipv6_route``, ``/proc/net/if_inet6``);
* MAC addresses, IB GUIDs, GPU and other UUIDs (Kubernetes pod ids), 64-hex container ids,
  serial numbers, and the user name in ``/home/<user>``.

Loopback, link-local and multicast addresses, netmasks, and addresses in 198.18.0.0/15 and
2001:db8::/32 (test and documentation ranges) are kept.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
from pathlib import Path
from typing import Any

from ncclcheck import schema
from ncclcheck.errors import BadInput, NcclcheckError

IPV4 = re.compile(r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d.])")
MAC = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:])")
GID = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9a-fA-F]{4}:){7}[0-9a-fA-F]{4}(?![0-9A-Fa-f:])")
GUID = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9a-fA-F]{4}:){3}[0-9a-fA-F]{4}(?![0-9A-Fa-f:])")
#: GPU and MIG UUIDs, and any other UUID (systemd writes Kubernetes pod ids with underscores).
UUID = re.compile(r"((?:GPU|MIG)-)?([0-9a-fA-F]{8})([-_])([0-9a-fA-F]{4})\3"
                  r"([0-9a-fA-F]{4})\3([0-9a-fA-F]{4})\3([0-9a-fA-F]{12})(?![0-9A-Fa-f])")
#: Container ids (Docker, containerd, CRI-O) in cgroup paths and mount options.
CONTAINER_ID = re.compile(r"(?<![0-9A-Fa-f])[0-9a-f]{64}(?![0-9A-Fa-f])")
#: IPv6 addresses, full (``2600:1f18:4a3:6b00:9a1:5e2:c3d4:7b8f``, a sysfs GID) or with ``::``.
#: Not followed by ``.``: ``::ffff:10.1.2.3`` leaves its IPv4 part to :data:`IPV4`.
#: Not inside a word either: ``std::string`` holds no address.
V6 = re.compile(r"(?<![\w:.])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
                r"|[0-9A-Fa-f:]*::[0-9A-Fa-f:]*)(?![\w:.])")
SERIAL = re.compile(r'("serial(?:_number)?"\s*:\s*")([^"]+)(")', re.I)
#: Serial numbers as ``nvidia-smi -q`` prints them (``    Serial Number   : 1653425085064``, found
#: by scripts/device-check in a recording of an H200), and as ``nvidia-smi -q -x`` writes them
#: (``<serial>1653425085064</serial>``). ``N/A`` stays.
SERIAL_LINE = re.compile(r"(?im)^([ \t]*[\w ]*Serial Number[ \t]*:[ \t]*)(?!N/A\b)(\S[^\r\n]*?)()[ \t]*$")
SERIAL_XML = re.compile(r"(?i)(<\w*serial(?:_number)?>)(?!N/A<)([^<]+)(</)")
#: The server of a network filesystem in the first field of a /proc/mounts line
#: (``server:/export``, ``mgs@tcp:/lustre``, ``//server/share``).
MOUNT_SERVER = re.compile(r"^(//)?([A-Za-z][\w.-]*)(?=(?:@\w+)?:/|/)", re.M)
KEEP_V4 = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("198.18.0.0/15"),
           ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("255.0.0.0/8"),
           ipaddress.ip_network("224.0.0.0/4"))
#: IPv6 prefixes kept as they are: they name no site (link-local, site-local, multicast,
#: documentation, and the all-zero prefix of ::1 and IPv4-compatible forms).
KEEP_V6 = (ipaddress.ip_network("fe80::/9"), ipaddress.ip_network("ff00::/8"),
           ipaddress.ip_network("2001:db8::/32"), ipaddress.ip_network("::/64"))
#: What a scrubbed recording's README says about itself.
SCRUBBED_NOTE = (
    "\nReplaced consistently: hostnames (this node's and those in MASTER_ADDR, NCCL_COMM_ID,\n"
    "NCCL_HOSTID, SLURM_JOB_NODELIST), file servers, IPv4 and IPv6 addresses (also the hex of\n"
    "/proc/net), MAC addresses, IB GUIDs and GIDs, UUIDs, container ids, serial numbers and the\n"
    "user name of /home/<user>. Kept: interface and device names, PCI addresses, kernel, driver\n"
    "and library versions, paths outside /home, and the NCCL_* variables' other values.\n")
#: Environment variables whose values name other nodes.
HOST_VARS = ("MASTER_ADDR", "NCCL_COMM_ID", "NCCL_HOSTID")


class Scrubber:
    """Consistent replacement of identifiers in text (``scrub(text) -> text``).

    >>> s = Scrubber(["gpu-node-17"])
    >>> s("gpu-node-17 10.1.2.3/24 10.1.2.4 0c:42:a1:65:b8:f8 127.0.0.1")
    'host-1 198.19.128.3/24 198.19.128.4 02:00:00:00:00:01 127.0.0.1'
    >>> s("0000:0000:0000:0000:0000:ffff:0a01:0203")
    '0000:0000:0000:0000:0000:ffff:c613:8003'

    Files whose format hides addresses in hex are scrubbed by :meth:`file`:

    >>> s.file("proc/net/route", "Iface\\tDestination\\tGateway\\n"
    ...                          "eth0\\t00000000\\t0102010A\\t0003\\t0\\t0\\t0\\t00000000\\n")
    'Iface\\tDestination\\tGateway\\neth0\\t00000000\\t018013C6\\t0003\\t0\\t0\\t0\\t00000000\\n'
    """

    def __init__(self, hostnames: list[str] = ()) -> None:  # type: ignore[assignment]
        names = sorted({h for h in hostnames if h and h not in ("localhost", "unknown")},
                       key=len, reverse=True)
        self.hostnames = {h: f"host-{i + 1}" for i, h in enumerate(names)}
        self.nets: dict[tuple[int, int, int], int] = {}
        self.prefixes: dict[str, str] = {}
        self.macs: dict[str, str] = {}
        self.guids: dict[str, str] = {}
        self.uuids: dict[str, str] = {}
        self.containers: dict[str, str] = {}
        self.servers: dict[str, str] = {}
        self.user: str | None = None

    # -- what to replace -------------------------------------------------------------------------
    def add_hostname(self, name: str) -> None:
        """Scrub ``name`` too (another node, a file server)."""
        if name and name not in ("localhost", "unknown") and name not in self.hostnames:
            self.hostnames[name] = f"host-{len(self.hostnames) + 1}"
            self.hostnames = dict(sorted(self.hostnames.items(), key=lambda kv: -len(kv[0])))

    def add_home(self, home: str) -> None:
        """Scrub the user name of a home directory ``/home/<user>``."""
        parts = home.rstrip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["", "home"] and parts[2]:
            self.user = parts[2]

    def add_environ(self, env: dict[str, str]) -> None:
        """Register the other nodes an environment names (see :data:`HOST_VARS`).

        >>> s = Scrubber(["n-01"])
        >>> s.add_environ({"MASTER_ADDR": "n-00", "NCCL_COMM_ID": "10.1.2.3:1234",
        ...                "SLURM_JOB_NODELIST": "n-[00-01],login3"})
        >>> s("n-00 n-01 n-[00-01],login3 10.1.2.3:1234")
        'host-2 host-1 host-3[00-01],host-4 198.19.128.3:1234'
        """
        for var in HOST_VARS:
            value = env.get(var) or ""
            host = value.rsplit(":", 1)[0] if var == "NCCL_COMM_ID" else value
            host = host.strip("[]")
            if host and not _is_ip(host):
                self.add_hostname(host)
        for element in _split_top(env.get("SLURM_JOB_NODELIST") or ""):
            prefix = element.split("[", 1)[0]
            if prefix and not _is_ip(prefix):
                self.add_hostname(prefix)

    # -- how -------------------------------------------------------------------------------------
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

    def _prefix(self, groups: list[str]) -> list[str]:
        """A /64 prefix (four groups): kept when it names no site, else one of 2001:db8::/32."""
        text = ":".join(groups)
        net = ipaddress.IPv6Address(text + ":0000:0000:0000:0000")
        if any(net in keep for keep in KEEP_V6):
            return groups
        n = self.prefixes.setdefault(text, f"{len(self.prefixes) + 1:08x}")
        return ["2001", "0db8", n[:4], n[4:]]

    def gid(self, exploded: str) -> str:
        """Map a fully written IPv6 address or GID (eight groups of four hex digits)."""
        groups = exploded.lower().split(":")
        if groups[:6] == ["0000"] * 5 + ["ffff"]:
            v4 = ".".join(str(int(groups[6 + i // 2][2 * (i % 2):2 * (i % 2) + 2], 16))
                          for i in range(4))
            a, b, c, d = (int(x) for x in self.v4(v4).split("."))
            return ":".join(groups[:6] + [f"{a:02x}{b:02x}", f"{c:02x}{d:02x}"])
        ip = ipaddress.IPv6Address(exploded)
        if ip.is_loopback or ip.is_unspecified or ip in KEEP_V6[2]:  # 2001:db8::/32: kept whole
            return exploded
        prefix = self._prefix(groups[:4])
        if all(g == "0000" for g in groups[4:]) or groups[0].startswith("ff"):
            return ":".join(prefix + groups[4:])
        return ":".join(prefix) + ":" + self._guid(":".join(groups[4:]))

    def _v6(self, m: re.Match[str]) -> str:
        """An IPv6 address or GID in the text, written back in the form it had."""
        text = m.group(0)
        try:
            ip = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        if ip.is_loopback or ip.is_unspecified:
            return text
        mapped = self.gid(ip.exploded)
        if GID.fullmatch(text):  # sysfs spelling: eight groups of four digits
            return mapped.upper() if text.isupper() else mapped
        return str(ipaddress.IPv6Address(mapped))

    def _hex_v6(self, text: str) -> str:
        """A 32-digit hex IPv6 address as /proc/net writes it."""
        exploded = ipaddress.IPv6Address(int(text, 16)).exploded
        return f"{int(ipaddress.IPv6Address(self.gid(exploded))):032x}"

    def _hex_v4(self, text: str) -> str:
        """An 8-digit little-endian hex IPv4 address as /proc/net/route writes it."""
        value = int(text, 16)
        addr = ".".join(str(value >> shift & 0xFF) for shift in (0, 8, 16, 24))
        a, b, c, d = (int(x) for x in self.v4(addr).split("."))
        return f"{d << 24 | c << 16 | b << 8 | a:08X}"

    def _uuid(self, m: re.Match[str]) -> str:
        kind, sep = m.group(1) or "", m.group(3)
        key = "-".join(m.group(i) for i in (2, 4, 5, 6, 7)).lower()
        n = self.uuids.setdefault(key, f"{len(self.uuids) + 1:012x}")
        return kind + sep.join(["00000000", "0000", "0000", "0000", n])

    def _server(self, m: re.Match[str]) -> str:
        name = m.group(2)
        if _is_ip(name) or name in self.hostnames:
            return m.group(0)
        alias = self.servers.setdefault(name, f"fileserver-{len(self.servers) + 1}")
        return (m.group(1) or "") + alias

    def __call__(self, text: str) -> str:
        """Scrub one text.

        >>> s = Scrubber()
        >>> s("fe80::c42:a1ff:fe65:b8f8/64 ::1 2600:1f18:4a3:6b00:9a1:5e2:c3d4:7b8f")
        'fe80::1/64 ::1 2001:db8:0:1::2'
        >>> s("0::/kubepods-besteffort-pod3f1b7c9e_5a2d_4e8f_9b61_0c7d2e4a8f13.slice")
        '0::/kubepods-besteffort-pod00000000_0000_0000_0000_000000000001.slice'
        >>> s("    Serial Number            : 1653425085064\\n    Chassis Serial Number : N/A\\n"
        ...   "<serial>1653425085064</serial><chassis_serial_number>N/A</chassis_serial_number>")
        '    Serial Number            : scrubbed\\n    Chassis Serial Number : N/A\\n<serial>scrubbed</serial><chassis_serial_number>N/A</chassis_serial_number>'
        """
        for name, alias in self.hostnames.items():
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", alias, text)
        if self.user:
            text = re.sub(rf"(?<=home/){re.escape(self.user)}(?![\w.-])", "user", text)
        text = UUID.sub(self._uuid, text)
        text = CONTAINER_ID.sub(lambda m: self.containers.setdefault(
            m.group(0), f"{len(self.containers) + 1:064x}"), text)
        text = V6.sub(self._v6, text)
        text = GUID.sub(lambda m: self._guid(m.group(0)), text)
        text = MAC.sub(self._mac, text)
        text = IPV4.sub(lambda m: self.v4(m.group(0)), text)
        for pattern in (SERIAL, SERIAL_LINE, SERIAL_XML):
            text = pattern.sub(lambda m: m.group(1) + "scrubbed" + m.group(3), text)
        return text

    def file(self, path: str, text: str) -> str:
        """Scrub a recorded file, decoding the hex addresses of the /proc/net tables first.

        ``path`` is root-relative (``proc/net/route``).

        >>> Scrubber().file("proc/net/if_inet6",
        ...                 "fe8000000000000000fc00fffe000001 02 40 20 80     eth0\\n")
        'fe800000000000000000000000000001 02 40 20 80     eth0\\n'
        """
        try:
            if path in ("proc/net/route", "proc/self/net/route"):
                text = _fields(text, (1, 2), r"[0-9A-Fa-f]{8}", self._hex_v4, skip_first=True)
            elif path in ("proc/net/ipv6_route", "proc/self/net/ipv6_route"):
                text = _fields(text, (0, 2, 4), r"[0-9a-fA-F]{32}", self._hex_v6)
            elif path in ("proc/net/if_inet6", "proc/self/net/if_inet6"):
                text = _fields(text, (0,), r"[0-9a-fA-F]{32}", self._hex_v6)
            elif path in ("proc/mounts", "proc/self/mounts", "etc/mtab"):
                text = MOUNT_SERVER.sub(self._server, text)
        except ValueError:
            pass  # not the format we know: the generic pass below still runs
        return self(text)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _split_top(text: str) -> list[str]:
    """Split a Slurm hostlist at the commas outside brackets.

    >>> _split_top("gpu[01-04,07],login1")
    ['gpu[01-04,07]', 'login1']
    """
    out, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            out.append(current)
            current = ""
        else:
            current += ch
    return [e for e in out + [current] if e]


def _fields(text: str, columns: tuple[int, ...], pattern: str, fn: Any,
            skip_first: bool = False) -> str:
    """Apply ``fn`` to the whitespace-separated ``columns`` of each line that match ``pattern``,
    keeping the line's spacing."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if skip_first and i == 0:
            continue
        parts = re.split(r"(\s+)", line)
        fields = parts[0::2] if parts and parts[0] else parts[2::2]
        offset = 0 if parts and parts[0] else 2
        for column in columns:
            at = offset + 2 * column
            if column < len(fields) and at < len(parts) and re.fullmatch(pattern, parts[at]):
                parts[at] = fn(parts[at])
        lines[i] = "".join(parts)
    return "\n".join(lines)


def record_host(folder: str, root: str = "/", scrub: bool = True) -> Path:
    """Probe this node through a recording host and write the recording into ``folder``.

    Raises:
        BadInput: ``root`` is not a directory, or ``folder`` is a file or a non-empty directory.
        NcclcheckError: ``folder`` cannot be written.
    """
    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.host.recording import RecordingHost
    from ncclcheck.probe import collect_facts

    out = Path(folder)
    if not os.path.isdir(root):
        raise BadInput(f"--root {root}: not a directory")
    try:
        os.stat(out)
    except FileNotFoundError:
        pass
    except OSError as exc:  # a name too long, a file in the way, no permission
        raise BadInput(f"{folder}: cannot write ({exc.strerror or exc})") from None
    if out.exists() and not out.is_dir():
        raise BadInput(f"{folder}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise BadInput(f"{folder}: exists and is not empty")
    host = RecordingHost(root)
    facts = collect_facts(host)
    scrubber: Any = None
    if scrub:
        fqdn = (host.files.get("proc/sys/kernel/hostname") or "").strip()
        scrubber = Scrubber([facts.get("hostname", ""), fqdn, fqdn.split(".")[0]])
        scrubber.add_environ(host.env_seen)
        python = host.queries.get("python_paths")
        if isinstance(python, dict) and isinstance(python.get("home"), str):
            scrubber.add_home(python["home"])
    try:
        host.save(out, scrubber)
    except OSError as exc:
        error = BadInput if exc.errno in (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS,
                                          errno.ENOTDIR, errno.ENOENT) else NcclcheckError
        raise error(f"{folder}: cannot write the recording ({exc.strerror or exc})") from None
    replayed = collect_facts(RecordedHost(out))
    schema.dump(normalise(replayed), out / "facts.json")
    (out / "README.md").write_text(
        f"# Recorded host\n\nRecorded by `ncclcheck record` {facts['ncclcheck_version']} "
        f"at {facts['collected_at']}.\nScrubbed: {'yes' if scrub else 'no'}.\n"
        "Replay: `ncclcheck probe --replay <this folder>`.\n"
        + (SCRUBBED_NOTE if scrub else "\nNot scrubbed: it names this machine, its addresses "
           "and its user.\n"))
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
