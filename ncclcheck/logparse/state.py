"""Bounded state built from a stream of log lines: one :class:`Proc` per process, plus findings.

A process is keyed by ``host:pid`` from NCCL's line header; lines without one are attributed to
the launcher's rank (``[rank3]:``, ``[1,3]<stdout>:``), tag or host label, else to ``?``. Every
list kept here has a cap, so memory stays bounded however long the log is: the diagnosis of a
200 GB log is the same size as that of a 200 MB one.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Optional

from ncclcheck.logparse.apply import FactsMixin
from ncclcheck.logparse.block import (
    DEFERRED,
    MAX_AGG,
    NOFACT,
    BlockMixin,
    first_net_line,
    is_net_without_gdr,
)
from ncclcheck.logparse.facts import Fact, parse_info, parse_version
from ncclcheck.logparse.memokeys import STAMP_FIRST, frozen, head_key, shape
from ncclcheck.logparse.nccl import NcclLine, parse_nccl_line
from ncclcheck.logparse.prefix import Prefix, parse_prefix
from ncclcheck.logparse.proc import (
    MAX_LIST,
    MAX_SET,
    FindingAcc,
    Line,
    Proc,
    evidence,
)
from ncclcheck.signatures import (INFO_DISPATCH, INFO_SIGNATURES, INFO_STARTS, LINE_DISPATCH,
                                  LINE_SIGNATURES)
from ncclcheck.signatures.base import Detail, Signature
from ncclcheck.signatures.rdma import RDMA_DEVICE

MAX_PROCS = 8192            #: processes tracked individually
MAX_WARN_KINDS = 50         #: distinct unrecognised WARN messages remembered
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
_DIGITS = re.compile(r"\d+")
#: a shell assignment of an NCCL variable: ``export NCCL_IB_GID_INDEX=4``, ``NCCL_DEBUG=INFO torchrun``.
_EXPORT = re.compile(r"(?<![\w$])(NCCL_[A-Z0-9_]{1,48})=[\"']?([^\s\"';]{1,128})")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


class LogState(FactsMixin, BlockMixin):
    """Everything learned from the lines fed so far.

    ``fast`` (the default) takes the shortcuts: the header cache of :meth:`feed_bytes` and the
    signature dispatch of :mod:`ncclcheck.signatures.dispatch`. ``LogState.fast = False`` feeds
    every line through the full parse and tries every signature on it: the reference the tests
    hold the shortcuts to (same document, byte for byte). :meth:`feed_block` feeds many lines
    at once; call :meth:`flush` after it, before reading the state.
    """

    fast = True

    def __init__(self) -> None:
        self.procs: dict[str, Proc] = {}
        self.procs_dropped = 0
        self.findings: dict[str, FindingAcc] = {}
        self.bare_versions: dict[str, dict[str, Any]] = {}   # version -> first evidence
        self.unrecognized: dict[str, list[Any]] = {}        # normalised WARN -> [count, ev, host]
        self.rdma_evidence: dict[Optional[str], list[dict[str, Any]]] = {}  # host -> lines
        self.rdma_devices: dict[Optional[str], set[str]] = {}             # host -> names
        self.env_evidence: dict[str, dict[str, Any]] = {}   # "NAME=value" -> first line
        self.exported: dict[str, tuple[str, dict[str, Any]]] = {}  # shell "NCCL_X=v" -> value, line
        self.gpu_models: dict[str, set[str]] = {}   # host -> GPU names (nccl-tests device lines)
        self.host_labels: set[str] = set()                  # launcher host labels seen on NCCL lines
        self.parse_errors = 0
        self.first_parse_error: Optional[str] = None
        self._last_proc: dict[str, Proc] = {}                # file -> last process seen
        self._by_rank: dict[tuple[Optional[str], int], Proc] = {}  # launcher (host, rank) -> proc
        self._heads: dict[bytes, Proc] = {}                 # bytes before " NCCL INFO " -> proc
        self._facts: dict[Any, Any] = {}                    # memo of parse_info for Channel lines
        self._plain: dict[bytes, Any] = {}                  # INFO message -> its fact, see _info
        self._agg: dict[bytes, Any] = {}                    # message that only counts -> fact
        self._pending: Counter = Counter()                  # (proc, fact) -> lines, see block.py
        self._deferring = False
        self._nogdr = False      # a NET connection without GDR was parsed (block.first_net_line)
        self._heads_gen = 0                                 # headers taken again, or cleared
        self._block: Any = None                             # the block feed_block is at
        self._upto = self._at = 0
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
        if self.fast:                        # only the signatures whose keywords are in the text
            sigs = (LINE_DISPATCH if sigs is LINE_SIGNATURES else INFO_DISPATCH)(text)
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
        cut = raw.find(b" NCCL INFO ") if self.fast else -1
        if cut > 0:
            proc = self._heads.get(raw[:cut])
            if proc is None and raw[0] in STAMP_FIRST:
                proc = self._heads.get(head_key(raw, cut))
            if proc is not None and b"\r" not in raw:
                body = raw[cut + 11:]
                if body[:1] in _BULK_STARTS:  # Channel/Ring/Trees: memoised on bytes, shape
                    fact = self._facts.get(body, _MISSING)
                    if fact is _MISSING:
                        fact = self._shaped(body)
                else:                      # "Connected all rings", "24 coll channels", ...
                    fact = self._plain.get(body, _MISSING)
                    if fact is _MISSING:
                        try:               # the whole line is decoded only if kept as evidence
                            fact = self._info(proc, body.decode("utf-8", "replace"), file,
                                              lineno, raw)
                            if fact is not _MISSING and frozen(fact):
                                if len(self._plain) >= MAX_FACT_MEMO:
                                    self._plain.clear()
                                self._plain[body] = fact
                        except Exception as exc:  # noqa: BLE001 - see feed()
                            self._parse_error(file, lineno, exc)
                        return
                if fact is None or fact[0] in DEFERRED:      # it only counts: see block.py
                    if body not in self._agg:
                        if len(self._agg) >= MAX_AGG:
                            self._agg.clear()
                        self._agg[body] = NOFACT if fact is None else fact
                    if self._deferring and not (self._nogdr and first_net_line(proc, fact)):
                        self._count_block()             # the block's lines before this one
                        self._pending[(proc, NOFACT if fact is None else fact)] += 1
                        self._last_proc[file] = proc
                        return
                proc.lines += 1
                self._last_proc[file] = proc
                if fact is not None:
                    try:
                        self._apply(proc, fact, file, lineno, raw)
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
                    self._heads_gen += 1
                raw_head = line[:cut].encode("utf-8", "replace")
                key = head_key(raw_head, cut if len(raw_head) == cut else len(raw_head))
                if self._heads.get(key, proc) is not proc:   # feed_block looks again
                    self._heads_gen += 1
                self._heads[key] = proc
            self._info(proc, nl.msg, file, lineno, line)
            return
        proc.lines += 1
        msg = nl.msg
        proc.warns += 1
        known = self._rdma_markers(proc, msg, file, lineno, line)
        if not self._match(LINE_SIGNATURES, rest, proc, file, lineno, line) \
                and not known and not self._benign_warn(msg):
            self._unrecognized(msg, file, lineno, line, proc.host)

    def _shaped(self, body: bytes) -> Optional[Fact]:
        """The fact of a bulk message not seen as such: its shape's, parsed once per shape."""
        key = shape(body)
        fact = self._facts.get(key, _MISSING)
        if fact is _MISSING:
            fact = parse_info(body.decode("utf-8", "replace"))
            self._nogdr = self._nogdr or is_net_without_gdr(fact)
        if len(self._facts) >= MAX_FACT_MEMO - 1:
            self._facts.clear()
        self._facts[key] = self._facts[body] = fact
        return fact

    def _remember(self, key: Line, msg: str) -> Optional[Fact]:
        """Parse a bulk message once and memoise it (bounded: the memo is cleared when full)."""
        fact = parse_info(msg)
        self._nogdr = self._nogdr or is_net_without_gdr(fact)
        if len(self._facts) >= MAX_FACT_MEMO:
            self._facts.clear()
        self._facts[key] = fact
        return fact

    def _info(self, proc: Proc, msg: str, file: str, lineno: int, line: Line) -> Any:
        """One INFO message of a known process: facts, RDMA markers, INFO-scope signatures.
        Returns its fact (None: none) when the message is plain: no marker, no INFO-scope
        signature looks at it, so the same message from any process only counts a line and
        applies that fact (memoised by :meth:`feed_bytes`); ``_MISSING`` otherwise."""
        proc.lines += 1
        self._last_proc[file] = proc
        if msg[:1] in _BULK_CHARS:                       # Channel/Ring/Trees: the bulk, memoised
            fact = self._facts.get(msg, _MISSING)
            if fact is _MISSING:
                fact = self._remember(msg, msg)
        else:
            fact = parse_info(msg)
        plain = fact
        if fact is not None:
            self._apply(proc, fact, file, lineno, line)  # type: ignore[arg-type]
        if msg.startswith(_MARKER_STARTS) or "ibverbs" in msg or "ibv_open" in msg:
            self._rdma_markers(proc, msg, file, lineno, line)
            plain = _MISSING
        if msg.startswith(INFO_STARTS):
            self._match(INFO_SIGNATURES, msg, proc, file, lineno, line)
            plain = _MISSING
        return plain

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
        if "NCCL_" in text and "=" in text and len(self.exported) < MAX_LIST:
            for name, value in _EXPORT.findall(text):   # export NCCL_IB_GID_INDEX=4 (a pasted script)
                self.exported.setdefault(name, (value, evidence(file, lineno, line)))
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
