"""Whole blocks of NCCL lines with no Python step for most of them (issue 24).

Most NCCL lines of a big log are INFO lines of a process seen before whose message was seen
before too (Channel/Ring/Trees lines, "Connected all rings", ...), and such a line only adds to
counters of its process: its line count, its connections per transport, the rings and trees it
is on. :meth:`BlockMixin.feed_block` finds those lines of a block in C loops (``map`` over the
block: `` NCCL INFO `` found, the header before it looked up in the header memo with a leading
timestamp made a NUL as :func:`~.memokeys.head_key` does, the message after it in the memo of
such messages), and counts each (process, fact) pair in a :class:`collections.Counter` (C
again); every other line takes :meth:`~.state.LogState.feed_bytes`, in order. The counts are
applied once per pair by :meth:`BlockMixin.flush`: at the end of a file, before any other line
applies a connection, ring or trees fact, and when the counter holds :data:`MAX_PENDING` pairs.

Why the result is the same as line by line (``tests/diagnose/test_dispatch.py`` holds it on every
fixture): these facts only add (counts, maxima, members of a capped set or dict), and the counter
keeps its pairs in the order of their first line, so a capped set or dict takes the same members
in the same order; nothing reads those fields while the log is read; and the one thing the
lines set that other lines read, the file's last process, is set before each line that takes
the other way.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import compress, repeat
from operator import and_, gt, is_not, itemgetter, not_
from typing import Any, Callable, Optional

from ncclcheck.logparse.memokeys import STAMP_PATTERN, shape

MAX_PENDING = 1 << 16      #: (process, fact) pairs counted before they are applied
MAX_AGG = 1 << 16          #: messages in the memo of messages that only count; cleared when full
#: fact kinds whose lines only add to their process (see the module's docstring)
DEFERRED = frozenset(("connection", "ring", "trees"))
NOFACT = ("none", None)    #: the fact of a message that states none (a Counter key, unlike None)
_INFO = b" NCCL INFO "
_RELOOK, _MAX_RELOOK = 256, 4   #: after this many lines fed one by one, classify the rest again
_BULK = (b"C", b"R", b"T")    #: Channel/Ring/Trees messages: memoised by shape (state.py)
_STAMP_HEAD = re.compile(rb"\A" + STAMP_PATTERN)
_HEAD, _SEP, _BODY = itemgetter(0), itemgetter(1), itemgetter(2)


def is_net_without_gdr(fact: Any) -> bool:
    """A connection fact over a network transport that does not use GPUDirect RDMA."""
    return (fact is not None and fact[0] == "connection" and fact[1][1][:4] == "NET/"
            and not fact[1][2])


def first_net_line(proc: Any, fact: Any) -> bool:
    """Whether a line with ``fact`` must not only be counted: it is the first NET connection
    without GPUDirect RDMA of ``proc``, whose line ib-gdr-not-ready shows as evidence (apply.py
    keeps it in ``proc.evidence["net_conn"]``; a counted line has no file nor line number)."""
    return "net_conn" not in proc.evidence and is_net_without_gdr(fact)


class BlockMixin:
    """:meth:`feed_block` and :meth:`flush` of :class:`~ncclcheck.logparse.state.LogState`."""

    _heads: dict[bytes, Any]
    _agg: dict[bytes, tuple]
    _facts: dict[Any, Any]
    _pending: Counter
    _deferring: bool
    _heads_gen: int
    _nogdr: bool
    _block: Optional[tuple[list[Any], list[Any], list[Any]]]
    _upto: int
    _at: int
    _last_proc: dict[str, Any]
    feed_bytes: Callable[[bytes, str, int], None]
    _apply: Callable[..., None]

    def _classify(self, lines: list[bytes]) -> tuple[list[Any], list[Any], list[Any]]:
        """Per line: its process and fact where it only counts (else None), and whether it does
        (a truth value)."""
        parts = list(map(bytes.partition, lines, repeat(_INFO)))        # head, sep, message
        procs = list(map(self._heads.get, map(_HEAD, parts)))
        if procs.count(None) * 4 > len(procs):        # timestamps: look up head_key's key
            procs = list(map(self._heads.get, map(_STAMP_HEAD.sub, repeat(b"\0"),
                                                  map(_HEAD, parts), repeat(1))))
        facts = list(map(self._agg.get, map(_BODY, parts)))
        known = list(map(is_not, procs, repeat(None)))
        only = list(map(and_, map(and_, known, map(is_not, facts, repeat(None))),
                        map(len, map(_SEP, parts))))
        memo = self._facts                             # a Channel/Ring/Trees message not seen as
        for k in compress(range(len(lines)), map(gt, known, only)):   # such: its shape's fact
            body = parts[k][2]
            if parts[k][1] and body[:1] in _BULK:
                fact = memo.get(body, memo)
                if fact is memo:
                    fact = memo.get(shape(body), memo)
                if fact is None or (fact is not memo and fact[0] in DEFERRED):
                    facts[k] = NOFACT if fact is None else fact
                    only[k] = True
        if self._nogdr:                               # a NET connection without GDR seen
            self._first_net_lines(procs, facts, only)
        return procs, facts, only   # (a CR line is never counted: no memo key holds a CR)

    @staticmethod
    def _first_net_lines(procs: list[Any], facts: list[Any], only: list[Any]) -> None:
        """The lines :func:`first_net_line` keeps from being counted take the long way (only the
        first of each process: it then has its evidence). Called only once such a connection was
        parsed (``_nogdr``): nothing to pay where every NET connection uses GPUDirect RDMA."""
        lacking = {p for p in set(procs) if p is not None and "net_conn" not in p.evidence}
        if not lacking:
            return
        nets = {f for f in set(facts) if is_net_without_gdr(f)}
        for k in compress(range(len(facts)), map(nets.__contains__, facts)):
            if only[k] and procs[k] in lacking:
                only[k] = False
                lacking.discard(procs[k])
                if not lacking:
                    return

    def feed_block(self, lines: list[bytes], numbers: list[int], file: str) -> None:
        """:meth:`~.state.LogState.feed_bytes` of each line, in order (``numbers`` their line
        numbers), with the lines that only count counted in C; :meth:`flush` before reading."""
        self._deferring = True
        start, relook = 0, 0
        try:
            while start < len(lines):
                start = self._feed_from(lines, numbers, file, start, relook)
                relook += 1
        finally:
            self._block = None
        if len(self._pending) >= MAX_PENDING:
            self.flush(keep=True)

    def _feed_from(self, lines: list[bytes], numbers: list[int], file: str, start: int,
                   relook: int) -> int:
        """:meth:`feed_block` from line ``start`` on, classified once; where to go on from
        (``len(lines)``: the end) when a header was cleared or taken again (the classification
        may be stale), or when most lines so far took the long way (a log's start: new headers
        and messages, worth classifying again)."""
        part = lines[start:] if start else lines
        procs, facts, only = self._block = self._classify(part)
        self._upto = 0
        gen = self._heads_gen
        for fed, k in enumerate(compress(range(len(part)), map(not_, only)), 1):
            if k and only[k - 1]:                            # the other lines, in order
                self._last_proc[file] = procs[k - 1]
            self._at = k
            self.feed_bytes(part[k], file, numbers[start + k])
            if self._heads_gen != gen or (fed == _RELOOK and relook < _MAX_RELOOK
                                          and k + 1 < len(part) - 4 * fed and fed * 2 > k):
                self._count_block(k + 1)
                return start + k + 1
        self._count_block(len(part))
        if part and only[-1]:
            self._last_proc[file] = procs[-1]
        return len(lines)

    def _count_block(self, end: Optional[int] = None) -> None:
        """Count the block's lines that only count, up to ``end`` (default: the line being fed)."""
        if self._block is None:
            return
        procs, facts, only = self._block
        end = self._at if end is None else end
        if end > self._upto:
            self._pending.update(compress(zip(procs[self._upto:end], facts[self._upto:end]),
                                          only[self._upto:end]))
            self._upto = end

    def flush(self, keep: bool = False) -> None:
        """Apply the counted lines (each pair's count at once, in the order of their first
        line); ``keep``: go on counting afterwards (else :meth:`feed_block` starts it again)."""
        self._count_block()
        pending, self._pending = self._pending, Counter()
        self._deferring = keep
        for (proc, fact), n in pending.items():
            proc.lines += n
            if fact is NOFACT:
                continue
            self._apply(proc, fact, "", 0, "")            # what the first line does ...
            if n > 1 and fact[0] == "connection":         # ... and the other n - 1 add
                _, transport, gdr = fact[1]
                if transport in proc.transports:
                    proc.transports[transport] += n - 1
                if gdr:
                    proc.gdr_connections += n - 1
