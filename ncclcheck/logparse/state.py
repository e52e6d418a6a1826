"""Bounded state built from a stream of log lines: one :class:`Proc` per process, plus findings.

A process is keyed by ``host:pid`` from NCCL's line header; lines without one are attributed to
the launcher's rank (``[rank3]:``, ``[1,3]<stdout>:``), tag or host label, else to ``?``. Every
list kept here has a cap, so memory stays bounded however long the log is: the diagnosis of a
200 GB log is the same size as that of a 200 MB one.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Union

from ncclcheck.logparse.facts import Fact, parse_info, parse_version
from ncclcheck.logparse.nccl import NcclLine, parse_nccl_line
from ncclcheck.logparse.prefix import Prefix, parse_prefix
from ncclcheck.signatures import (
    INFO_SIGNATURES,
    INFO_STARTS,
    LINE_SIGNATURES,
    Detail,
    Signature,
)
from ncclcheck.signatures.rdma import (
    IB_NO_DEVICE,
    IBVERBS_MISSING,
    IPOIB_IFACE,
    RDMA_DEVICE,
)

MAX_PROCS = 8192            #: processes tracked individually
MAX_EVIDENCE = 5            #: example lines kept per finding
MAX_LIST = 64               #: per-process lists (devices, comms, env, ...)
MAX_SET = 256               #: hosts/ranks named per finding
MAX_WARN_KINDS = 50         #: distinct unrecognised WARN messages remembered
EVIDENCE_CHARS = 400        #: characters of a line kept as evidence
MAX_HEADS = 16384           #: remembered line headers (fast path); cleared when full
MAX_FACT_MEMO = 65536       #: memoised Channel/Ring/Trees messages; cleared when full
_MISSING = object()
_MARKER_STARTS = ("NET/IB", "Net/IB")
#: INFO messages that are only facts (no RDMA markers, no INFO-scope signature): Channel, Ring,
#: Trees lines, the bulk of every log; they skip straight to the fact memo.
_BULK_STARTS = (b"C", b"R", b"T")
_BULK_CHARS = ("C", "R", "T")

#: WARN messages that are not findings of their own (see LogState._benign_warn).
BENIGN_WARN_PREFIXES = ("[Proxy Service", "Socket recv failed", "[Service thread]",
                        "lib wrapper not initialized")
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
_DIGITS = re.compile(r"\d+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


Line = Union[str, bytes]     #: a log line, raw on the fast path (decoded only for evidence)


def evidence(file: str, lineno: int, text: Line) -> dict[str, Any]:
    """One example line for a finding, cut to :data:`EVIDENCE_CHARS` (raw bytes are decoded).

    >>> ev = evidence("a.log", 3, "x" * 500); len(ev["text"]), ev["text"][-1]
    (400, '…')
    >>> evidence("a.log", 1, b"caf\\xc3\\xa9 \\xff")["text"]
    'café �'
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    if len(text) > EVIDENCE_CHARS:
        text = text[:EVIDENCE_CHARS - 1] + "…"
    return {"file": file, "line": lineno, "text": text}


class Proc:
    """What one process (one rank, usually) said about itself."""

    __slots__ = ("key", "host", "pid", "rank", "launcher_rank", "tag", "node", "devs", "bus_id",
                 "nccl_version", "cuda_version", "cuda_driver", "torch_version", "bootstrap",
                 "oob", "socket_ifs", "network", "ib_devices", "plugins", "gdr", "dmabuf",
                 "channels", "coll_channels", "rings", "trees", "transports", "gdr_connections",
                 "env", "comms", "nnodes", "ibverbs_missing", "ib_no_device", "ib_open_failed",
                 "warns", "lines", "first", "evidence", "version_hint")

    def __init__(self, key: str) -> None:
        self.key = key
        self.host: Optional[str] = None
        self.pid: Optional[int] = None
        self.rank: Optional[int] = None
        self.launcher_rank: Optional[int] = None
        self.tag: Optional[str] = None
        self.node: Optional[str] = None          # the launcher's host label (pdsh/Slurm)
        self.devs: list[int] = []
        self.bus_id: Optional[str] = None
        self.nccl_version: Optional[str] = None
        self.cuda_version: Optional[str] = None
        self.cuda_driver: Optional[int] = None
        self.torch_version: Optional[str] = None  # the NCCL version torch's error message names
        self.bootstrap: list[tuple[str, str]] = []
        self.oob: Optional[tuple[str, str]] = None
        self.socket_ifs: list[tuple[str, str]] = []
        self.network: Optional[str] = None
        self.ib_devices: list[tuple[str, int, str]] = []
        self.plugins: list[str] = []
        self.gdr: dict[str, bool] = {}           # "0 'mlx5_0'" -> enabled
        self.dmabuf = False
        self.channels: Optional[int] = None      # from the ring listing "Channel 00/08"
        self.coll_channels: Optional[int] = None  # "16 coll channels, ..."
        self.rings: set[int] = set()
        self.trees: Optional[int] = None
        self.transports: dict[str, int] = {}     # "NET/IB" -> connections
        self.gdr_connections = 0
        self.env: dict[str, str] = {}
        self.comms: dict[str, dict[str, Any]] = {}  # comm pointer -> {rank, nranks, state}
        self.nnodes: Optional[int] = None
        self.ibverbs_missing = False
        self.ib_no_device = False
        self.ib_open_failed = False
        self.warns = 0
        self.lines = 0
        self.first: Optional[tuple[str, int]] = None
        self.evidence: dict[str, dict[str, Any]] = {}  # fact kind -> first evidence line
        self.version_hint: Optional[tuple[tuple[int, int], tuple[int, int]]] = None  # plugin loader

    @property
    def init_complete(self) -> bool:
        """Whether any communicator of this process printed Init COMPLETE."""
        return any(c["state"] == "COMPLETE" for c in self.comms.values())

    @property
    def init_started(self) -> bool:
        """Whether this process printed Init START for a communicator."""
        return any(c.get("started") for c in self.comms.values())

    def net_name(self) -> Optional[str]:
        """The network as NCCL names it: ``Using network X``, else the ``via NET/X`` transport.

        >>> p = Proc("h:1"); p.transports["NET/AWS Libfabric"] = 2; p.net_name()
        'AWS Libfabric'
        """
        if self.network:
            return self.network
        nets = [t[4:] for t in self.transports if t.startswith("NET/")]
        return nets[0] if nets else None

    def net_family(self) -> Optional[str]:
        """``ib``, ``socket`` or a plugin's name (lower case), from ``Using network`` or channels.

        >>> p = Proc("h:1"); p.network = "IBext_v8"; p.net_family()
        'ib'
        """
        name = self.net_name()
        if not name:
            return None
        low = name.lower()
        if low == "ib" or low.startswith("ibext") or low.startswith("ibp") or "rdma plugin" in low:
            return "ib"
        if low == "socket":
            return "socket"
        return low

    def display_rank(self) -> Optional[int]:
        """The rank to show: the launcher's, else the one in the largest communicator."""
        if self.launcher_rank is not None:
            return self.launcher_rank
        best = max(self.comms.values(), key=lambda c: c["nranks"], default=None)
        return best["rank"] if best else self.rank

    def largest_nranks(self) -> Optional[int]:
        """The size of the largest communicator this process joined."""
        return max((c["nranks"] for c in self.comms.values()), default=None)


class FindingAcc:
    """A finding being accumulated while the log streams by."""

    __slots__ = ("sig", "count", "evidence", "hosts", "ranks", "variants", "severity", "detail",
                 "message")

    def __init__(self, sig: Signature) -> None:
        self.sig = sig
        self.count = 0
        self.evidence: list[dict[str, Any]] = []
        self.hosts: set[str] = set()
        self.ranks: set[int] = set()
        self.variants: dict[str, int] = {}
        self.severity: Optional[str] = None      # the worst severity of the occurrences
        self.detail: Optional[Detail] = None
        self.message: Optional[str] = None       # set by whole-log checks

    def add(self, detail: Detail, ev: Optional[dict[str, Any]], host: Optional[str],
            rank: Optional[int]) -> None:
        """Count one more occurrence."""
        self.count += 1
        severity = detail.severity or self.sig.severity
        if self.detail is None or self._rank(severity) > self._rank(
                self.detail.severity or self.sig.severity):
            self.detail = detail          # the worst occurrence speaks for the finding
        if self.severity is None or self._rank(severity) > self._rank(self.severity):
            self.severity = severity
        if detail.variant and (detail.variant in self.variants or len(self.variants) < 10):
            self.variants[detail.variant] = self.variants.get(detail.variant, 0) + 1
        if ev is not None and len(self.evidence) < MAX_EVIDENCE:
            self.evidence.append(ev)
        if host and len(self.hosts) < MAX_SET:
            self.hosts.add(host)
        if rank is not None and len(self.ranks) < MAX_SET:
            self.ranks.add(rank)

    @staticmethod
    def _rank(severity: str) -> int:
        return _SEVERITY_RANK.get(severity, 0)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of the finding."""
        sig, detail = self.sig, self.detail or Detail()
        message = self.message or detail.message or sig.title
        if self.variants and len(self.variants) > 1:
            message += " (also: " + ", ".join(
                f"{v} x{n}" for v, n in self.variants.items() if v != detail.variant) + ")"
        return {
            "id": sig.id, "title": sig.title, "severity": self.severity or sig.severity,
            "message": message,
            "cause": detail.cause or sig.cause, "fix": detail.fix or sig.fix, "docs": sig.docs,
            "evidence": self.evidence, "hosts": sorted(self.hosts), "ranks": sorted(self.ranks),
            "count": self.count,
        }


class LogState:
    """Everything learned from the lines fed so far."""

    def __init__(self) -> None:
        self.procs: dict[str, Proc] = {}
        self.procs_dropped = 0
        self.findings: dict[str, FindingAcc] = {}
        self.bare_versions: dict[str, dict[str, Any]] = {}   # version -> first evidence
        self.unrecognized: dict[str, list[Any]] = {}        # normalised WARN -> [count, ev, host]
        self.rdma_evidence: dict[Optional[str], list[dict[str, Any]]] = {}  # host -> lines
        self.rdma_devices: dict[Optional[str], set[str]] = {}             # host -> names
        self.env_evidence: dict[str, dict[str, Any]] = {}   # "NAME=value" -> first line
        self.host_labels: set[str] = set()                  # launcher host labels seen on NCCL lines
        self.parse_errors = 0
        self.first_parse_error: Optional[str] = None
        self._last_proc: dict[str, Proc] = {}                # file -> last process seen
        self._by_rank: dict[tuple[Optional[str], int], Proc] = {}  # launcher (host, rank) -> proc
        self._heads: dict[bytes, Proc] = {}                 # bytes before " NCCL INFO " -> proc
        self._facts: dict[str, Any] = {}                    # memo of parse_info for Channel lines
        self._overflow = Proc("(more processes)")

    # -- attribution ---------------------------------------------------------------------------
    def proc_for(self, nl: Optional[NcclLine], prefix: Prefix, file: str) -> Proc:
        """The process a line belongs to (created on first sight)."""
        if nl is not None and nl.host and nl.pid is not None:
            key = f"{nl.host}:{nl.pid}"
        elif prefix.rank is not None and (prefix.host, prefix.rank) in self._by_rank:
            return self._by_rank[(prefix.host, prefix.rank)]
        elif prefix.rank is not None:
            key = f"rank{prefix.rank}" + (f"@{prefix.host}" if prefix.host else "")
        elif prefix.tag is not None:
            key = f"tag:{prefix.tag}" + (f"@{prefix.host}" if prefix.host else "")
        elif prefix.host is not None:
            key = f"{prefix.host}:?"
        else:
            key = "?"
        proc = self.procs.get(key)
        if proc is None:
            if len(self.procs) >= MAX_PROCS:
                self.procs_dropped += 1
                return self._overflow
            proc = self.procs[key] = Proc(key)
            if nl is not None:
                proc.host, proc.pid = nl.host, nl.pid
            proc.node = prefix.host
            proc.tag = prefix.tag
        if prefix.rank is not None and proc.launcher_rank is None:
            proc.launcher_rank = prefix.rank
            self._adopt(proc, (prefix.host, prefix.rank))
        if proc.node is None and prefix.host is not None:
            proc.node = prefix.host
        return proc

    def _adopt(self, proc: Proc, label: tuple[Optional[str], int]) -> None:
        """Make ``proc`` the process of a launcher rank, folding in a text-only stand-in."""
        stand_in = self._by_rank.get(label)
        self._by_rank[label] = proc
        if stand_in is None or stand_in is proc or proc.key == stand_in.key:
            return
        if not stand_in.lines and self.procs.get(stand_in.key) is stand_in:
            del self.procs[stand_in.key]
            proc.nccl_version = proc.nccl_version or stand_in.nccl_version
            proc.torch_version = proc.torch_version or stand_in.torch_version
            for file, last in list(self._last_proc.items()):
                if last is stand_in:
                    self._last_proc[file] = proc

    # -- findings ------------------------------------------------------------------------------
    def add_finding(self, sig: Signature, detail: Detail, ev: Optional[dict[str, Any]],
                    host: Optional[str], rank: Optional[int]) -> FindingAcc:
        """Record one occurrence of a signature."""
        acc = self.findings.get(sig.id)
        if acc is None:
            acc = self.findings[sig.id] = FindingAcc(sig)
        acc.add(detail, ev, host, rank)
        return acc

    def _match(self, sigs: tuple[Signature, ...], text: str, proc: Optional[Proc], file: str,
               lineno: int, line: Line) -> bool:
        matched = False
        for sig in sigs:
            detail = sig.match(text)
            if detail is None:
                continue
            matched = True
            rank = detail.rank if detail.rank is not None else (
                proc.display_rank() if proc is not None else None)
            host = (proc.host or proc.node) if proc is not None else None
            self.add_finding(sig, detail, evidence(file, lineno, line), host, rank)
        return matched

    # -- lines ---------------------------------------------------------------------------------
    def feed_bytes(self, raw: bytes, file: str, lineno: int) -> None:
        """Take in one raw line: the fast path for INFO lines whose header was seen before.

        Most lines of a big log are INFO lines from a few thousand processes; the bytes in front
        of `` NCCL INFO `` (launcher prefix, ``host:pid:tid [dev]``) then map straight to the
        process, skipping prefix and header parsing. Anything else goes through :meth:`feed`.
        """
        cut = raw.find(b" NCCL INFO ")
        if cut > 0:
            proc = self._heads.get(raw[:cut])
            if proc is not None and b"\r" not in raw:
                body = raw[cut + 11:]
                if body[:1] in _BULK_STARTS:  # Channel/Ring/Trees: memoised on the raw bytes
                    fact = self._facts.get(body, _MISSING)
                    if fact is _MISSING:
                        fact = self._remember(body, body.decode("utf-8", "replace"))
                    proc.lines += 1
                    self._last_proc[file] = proc
                    if fact is not None:
                        try:
                            self._apply(proc, fact, file, lineno, raw)
                        except Exception as exc:  # noqa: BLE001 - see feed()
                            self._parse_error(file, lineno, exc)
                    return
                try:                       # the whole line is decoded only if kept as evidence
                    self._info(proc, raw[cut + 11:].decode("utf-8", "replace"), file, lineno, raw)
                except Exception as exc:  # noqa: BLE001 - see feed()
                    self._parse_error(file, lineno, exc)
                return
        self.feed(raw.decode("utf-8", "replace"), file, lineno)

    def feed(self, line: str, file: str, lineno: int) -> None:
        """Take in one decoded log line. Never raises: a parser bug is counted, not propagated."""
        try:
            if "\r" in line:
                for seg in line.split("\r"):
                    if seg.strip():
                        self._feed(seg, file, lineno)
            else:
                self._feed(line, file, lineno)
        except Exception as exc:  # noqa: BLE001 - one bad line must not lose the diagnosis
            self._parse_error(file, lineno, exc)

    def _parse_error(self, file: str, lineno: int, exc: Exception) -> None:
        self.parse_errors += 1
        if self.first_parse_error is None:
            self.first_parse_error = f"{file}:{lineno}: {type(exc).__name__}: {exc}"

    def _feed(self, line: str, file: str, lineno: int) -> None:
        prefix, rest = parse_prefix(line, self.host_labels)
        nl = parse_nccl_line(rest)
        if nl is not None and prefix.host is not None and prefix.host not in self.host_labels \
                and len(self.host_labels) < MAX_PROCS:
            self.host_labels.add(prefix.host)
        if nl is None:
            self._text_line(prefix, rest, file, lineno, line)
            return
        proc = self.proc_for(nl, prefix, file)
        self._last_proc[file] = proc
        if proc.first is None:
            proc.first = (file, lineno)
        if nl.dev is not None and nl.dev not in proc.devs and len(proc.devs) < MAX_LIST:
            proc.devs.append(nl.dev)
        if nl.level in ("INFO", "TRACE"):
            cut = line.find(" NCCL INFO ")
            if cut > 0:                                   # next time: straight to this process
                if len(self._heads) >= MAX_HEADS:
                    self._heads.clear()
                self._heads[line[:cut].encode("utf-8", "replace")] = proc
            self._info(proc, nl.msg, file, lineno, line)
            return
        proc.lines += 1
        msg = nl.msg
        proc.warns += 1
        known = self._rdma_markers(proc, msg, file, lineno, line)
        if not self._match(LINE_SIGNATURES, rest, proc, file, lineno, line) \
                and not known and not self._benign_warn(msg):
            self._unrecognized(msg, file, lineno, line, proc.host)

    def _remember(self, key: Line, msg: str) -> Optional[Fact]:
        """Parse a bulk message once and memoise it (bounded: the memo is cleared when full)."""
        fact = parse_info(msg)
        if len(self._facts) >= MAX_FACT_MEMO:
            self._facts.clear()
        self._facts[key] = fact
        return fact

    def _info(self, proc: Proc, msg: str, file: str, lineno: int, line: Line) -> None:
        """One INFO message of a known process: facts, RDMA markers, INFO-scope signatures."""
        proc.lines += 1
        self._last_proc[file] = proc
        if msg[:1] in _BULK_CHARS:                       # Channel/Ring/Trees: the bulk, memoised
            fact = self._facts.get(msg, _MISSING)
            if fact is _MISSING:
                fact = self._remember(msg, msg)
        else:
            fact = parse_info(msg)
        if fact is not None:
            self._apply(proc, fact, file, lineno, line)  # type: ignore[arg-type]
        if msg.startswith(_MARKER_STARTS) or "ibverbs" in msg or "ibv_open" in msg:
            self._rdma_markers(proc, msg, file, lineno, line)
        if msg.startswith(INFO_STARTS):
            self._match(INFO_SIGNATURES, msg, proc, file, lineno, line)

    def _text_line(self, prefix: Prefix, text: str, file: str, lineno: int, line: str) -> None:
        """A line that is not an NCCL debug line (``text`` without launcher prefixes)."""
        proc: Optional[Proc] = None
        if prefix.rank is None and prefix.tag is None and prefix.host is not None:
            last = self._last_proc.get(file)         # a host label alone: that host's last process
            proc = last if last is not None and prefix.host in (last.node, last.host) else \
                self.proc_for(None, prefix, file)
        elif prefix.rank is not None or prefix.tag is not None:
            proc = self.proc_for(None, prefix, file)
        if "NCCL version" in text:
            fact = parse_version(text)
            if fact is not None:
                self._text_version(fact, proc or self._last_proc.get(file), file, lineno, text,
                                   line)
        if "mlx" in text or "infiniband" in text:
            m = RDMA_DEVICE.search(text)
            if m:
                host = (proc.host or proc.node) if proc is not None else prefix.host
                self._rdma_hint(m.group(0), host, file, lineno, line)
        self._match(LINE_SIGNATURES, text, proc, file, lineno, line)

    def _text_version(self, fact: Fact, proc: Optional[Proc], file: str, lineno: int,
                      text: str, line: str) -> None:
        version, cuda = fact.value
        if "NCCL error in" in text or "DistBackendError" in text or "RuntimeError" in text:
            if proc is not None and proc.torch_version is None:
                proc.torch_version = version          # what torch reports; not a rank's own line
            return
        self.bare_versions.setdefault(version, evidence(file, lineno, line))
        if proc is not None and proc.nccl_version is None:
            proc.nccl_version, proc.cuda_version = version, cuda
            proc.evidence.setdefault("version", evidence(file, lineno, line))

    # -- facts ---------------------------------------------------------------------------------
    def _apply(self, proc: Proc, fact: Fact, file: str, lineno: int, line: Line) -> None:
        kind, value = fact
        if kind == "connection":
            channel, transport, gdr = value
            if len(proc.rings) < MAX_LIST:
                proc.rings.add(channel)
            if transport in proc.transports or len(proc.transports) < 16:
                proc.transports[transport] = proc.transports.get(transport, 0) + 1
            if gdr:
                proc.gdr_connections += 1
        elif kind == "ring":
            channel, total = value
            if len(proc.rings) < MAX_LIST:
                proc.rings.add(channel)
            if total:
                proc.channels = max(proc.channels or 0, total)
        elif kind == "trees":
            proc.trees = max(proc.trees or 0, value)
        elif kind == "init":
            self._apply_init(proc, value)
            if value["state"] == "COMPLETE" and "init_complete" not in proc.evidence:
                proc.evidence["init_complete"] = evidence(file, lineno, line)
        elif kind == "topology":
            proc.nnodes = max(proc.nnodes or 0, value["nnodes"])
            comm = proc.comms.get(value["comm"])
            if comm is None and len(proc.comms) < MAX_LIST:
                proc.comms[value["comm"]] = {"rank": value["rank"], "nranks": value["nranks"],
                                             "state": "TOPOLOGY"}
        elif kind == "version":
            proc.nccl_version, proc.cuda_version = value
            proc.evidence.setdefault("version", evidence(file, lineno, line))
            self.bare_versions.setdefault(value[0], evidence(file, lineno, line))
        elif kind == "cuda_driver":
            proc.cuda_driver = value
            proc.evidence.setdefault("cuda_driver", evidence(file, lineno, line))
        elif kind == "bootstrap":
            proc.bootstrap = value
            proc.evidence.setdefault("bootstrap", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "net_ib":
            proc.ib_devices = value["devices"]
            proc.oob = value["oob"]
            proc.evidence.setdefault("net_ib", evidence(file, lineno, line))
            for name, _port, _ll in value["devices"][:4]:
                self._rdma_hint(name, proc.host or proc.node, file, lineno, line)
        elif kind == "net_socket":
            proc.socket_ifs = value
            proc.evidence.setdefault("net_socket", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "net_socket_add":              # NCCL 2.3/2.4: one interface per line
            for iface in value:
                if iface not in proc.socket_ifs and len(proc.socket_ifs) < 16:
                    proc.socket_ifs.append(iface)
            proc.evidence.setdefault("net_socket", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "network":
            proc.network = value
            proc.evidence.setdefault("network", evidence(file, lineno, line))
        elif kind == "env":
            name, val = value
            if name in proc.env or len(proc.env) < MAX_LIST:
                proc.env[name] = val
            setting = f"{name}={val}"
            if setting not in self.env_evidence and len(self.env_evidence) < MAX_LIST:
                self.env_evidence[setting] = evidence(file, lineno, line)
            if name.startswith("NCCL_IB_") and name not in ("NCCL_IB_DISABLE",) \
                    and not (name == "NCCL_IB_HCA" and val.startswith("^")):
                self._rdma_hint(f"{name}={val}", proc.host or proc.node, file, lineno, line)
        elif kind == "gdr":
            if len(proc.gdr) < MAX_LIST:
                proc.gdr[f"{value['net']}:{value['hca']}"] = value["enabled"] or (
                    proc.gdr.get(f"{value['net']}:{value['hca']}", False))
            if not value["enabled"] and "distance" not in (value["note"] or ""):
                proc.evidence.setdefault("gdr_disabled", evidence(file, lineno, line))
        elif kind == "plugin":
            if value not in proc.plugins and len(proc.plugins) < 8:
                proc.plugins.append(value)
        elif kind == "version_hint":
            proc.version_hint = value
            proc.evidence.setdefault("version_hint", evidence(file, lineno, line))
        elif kind == "dmabuf":
            proc.dmabuf = True
        elif kind == "coll_channels":
            proc.coll_channels = value

    def _apply_init(self, proc: Proc, value: dict[str, Any]) -> None:
        comm = proc.comms.get(value["comm"])
        if comm is None:
            if len(proc.comms) >= MAX_LIST:
                return
            comm = proc.comms[value["comm"]] = {"rank": value["rank"], "nranks": value["nranks"],
                                                "state": value["state"]}
        comm["rank"], comm["nranks"] = value["rank"], value["nranks"]
        if value["state"] == "START":
            comm["started"] = True
            if comm["state"] != "COMPLETE":
                comm["state"] = "START"
        else:
            comm["state"] = "COMPLETE"
        if value["bus_id"] and proc.bus_id is None:
            proc.bus_id = value["bus_id"]
        if value["cuda_dev"] not in proc.devs and len(proc.devs) < MAX_LIST:
            proc.devs.append(value["cuda_dev"])

    # -- RDMA hints ----------------------------------------------------------------------------
    def _rdma_markers(self, proc: Proc, msg: str, file: str, lineno: int, line: Line) -> bool:
        """Note libibverbs / IB device trouble; True when the message was one of these."""
        if "libibverbs" in msg:
            if any(p.search(msg) for p in IBVERBS_MISSING):
                proc.ibverbs_missing = True
                proc.evidence.setdefault("ibverbs", evidence(file, lineno, line))
                return True
        elif "NET/IB" in msg or "Net/IB" in msg:
            if IB_NO_DEVICE.search(msg):
                proc.ib_no_device = True
                proc.evidence.setdefault("ib_no_device", evidence(file, lineno, line))
                return True
            if "Unable to open device" in msg:
                proc.ib_open_failed = True
                m = RDMA_DEVICE.search(msg)
                self._rdma_hint(m.group(0) if m else "an RDMA device", proc.host or proc.node,
                                file, lineno, line)
                return True
        elif "ibv_open_device" in msg:
            proc.ib_open_failed = True
            return True
        return False

    def _iface_hints(self, ifaces: list[tuple[str, str]], host: Optional[str], file: str,
                     lineno: int, line: Line) -> None:
        for name, _addr in ifaces:
            if IPOIB_IFACE.match(name):
                self._rdma_hint(f"IPoIB interface {name}", host, file, lineno, line)
                break

    def _rdma_hint(self, what: str, host: Optional[str], file: str, lineno: int,
                   line: Line) -> None:
        """Remember that RDMA hardware shows on ``host`` (None: a line naming no host)."""
        seen = self.rdma_devices.setdefault(host, set())
        if what in seen or len(seen) >= MAX_LIST or len(self.rdma_devices) > MAX_SET:
            return
        seen.add(what)
        lines = self.rdma_evidence.setdefault(host, [])
        if len(lines) < MAX_EVIDENCE:
            lines.append(evidence(file, lineno, line))

    def rdma_seen(self, proc: Proc) -> tuple[list[str], list[dict[str, Any]]]:
        """RDMA device hints for ``proc``'s host; hints naming no host count when the log has
        only one host."""
        host = proc.host or proc.node
        names = sorted(self.rdma_devices.get(host, set()))
        lines = list(self.rdma_evidence.get(host, []))
        if None in self.rdma_devices and host is not None and not (names and lines):
            hosts = {p.host or p.node for p in self.procs.values() if p.host or p.node}
            if len(hosts) <= 1:
                names += sorted(self.rdma_devices[None])
                lines += self.rdma_evidence.get(None, [])
        elif host is None:
            names = sorted({n for ns in self.rdma_devices.values() for n in ns})
            lines = [e for es in self.rdma_evidence.values() for e in es]
        return names, lines

    # -- unrecognised WARN lines ---------------------------------------------------------------
    @staticmethod
    def _benign_warn(msg: str) -> bool:
        """WARN lines that are known not to be a problem of their own: NCCL's error-path
        breadcrumbs after a failure reported elsewhere, and the verbs-wrapper notice NCCL >= 2.28
        prints on machines without an RDMA library."""
        return msg.startswith(BENIGN_WARN_PREFIXES)

    def _unrecognized(self, msg: str, file: str, lineno: int, line: str,
                      host: Optional[str]) -> None:
        key = _DIGITS.sub("#", _HEX.sub("0x#", msg.strip()))[:160]
        entry = self.unrecognized.get(key)
        if entry is None:
            if len(self.unrecognized) >= MAX_WARN_KINDS:
                return
            entry = self.unrecognized[key] = [0, evidence(file, lineno, line), set()]
        entry[0] += 1
        if host and len(entry[2]) < MAX_SET:
            entry[2].add(host)
