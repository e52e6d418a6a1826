"""The bytes-level prefilter: only the lines that can matter reach Python.

A training log is mostly progress lines; NCCL's are under 1% of them. :func:`iter_matching` reads
1 MiB chunks and finds the lines holding a key with one ``memmem`` pass per key (glibc's, through
ctypes; ``bytes.find`` where there is none), counts newlines with ``bytes.count`` for the line
numbers, and never makes a Python step for a line it skips. Most keys are not searched at all:
the lines holding ``NCCL`` are taken first, and a key is searched only where each of its rarest
bytes (:func:`gates`, found by ``memchr``) also occurs outside those lines (:func:`_spans`).
Measured by ``scripts/bench-diagnose.py --sparse 200``: on its 200 MB log, 2 of the 27 keys are
searched per chunk instead of all 27. A key may also select the lines after
the one holding it (``follow``): the reason PyTorch prints after ``Last error:``, the body of a
pasted ``ibstat`` or ``ibv_devinfo`` block after its ``CA '...'`` / ``hca_id:`` header.

Same contract as :func:`~ncclcheck.logparse.reader.iter_lines`: every line counted in ``stats``,
lines cut at :data:`~ncclcheck.logparse.reader.MAX_LINE_BYTES`, a broken gzip stream ends the
input with ``stats.error``. A chunk that may hold an over-long line, or that starts while lines
are still to be followed, takes the line-by-line path.
"""

from __future__ import annotations

import io
import re
from itertools import accumulate, repeat
from operator import add, itemgetter
from typing import BinaryIO, Callable, Iterator, Mapping, Optional, Union

from ncclcheck.logparse import reader
from ncclcheck.logparse.reader import InputStats

Follow = Union[Mapping[bytes, int], tuple[bytes, ...]]


def _libc_memmem() -> Optional[Callable[[int, int, bytes, int], Optional[int]]]:
    """The C library's ``memmem`` through ctypes (glibc's is 3-5x faster than ``bytes.find`` on a
    needle that is absent, which is what the prefilter mostly looks for), or None where there is
    none (the prefilter then uses ``bytes.find``)."""
    try:
        import ctypes

        fn = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, ImportError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return fn  # type: ignore[no-any-return]


_MEMMEM = _libc_memmem()
_GATES: dict[bytes, tuple[bytes, ...]] = {}     # key -> gates(key), filled by iter_matching
_MEMMEM_GAP = 16384    #: after a gap between hits longer than this, search the next with memmem
_MAX_SPLIT = 2048       #: above this many lines taken by keys[0] in a chunk, gate on the whole chunk
_MAX_MISSES = 32        #: a key's rare byte seen this often outside the key: search the key itself
_PAIR = itemgetter(0, 1)
_LINE_RX: dict[bytes, "re.Pattern[bytes]"] = {}     # key -> key and the rest of its line
_START, _END = re.Match.start, re.Match.end


def _finder(buf: bytes) -> Callable[[bytes, int, int], int]:
    """``find(key, start, end)`` over ``buf``, as ``buf.find`` (memmem where there is one).

    >>> f = _finder(b"abc NCCL x\\n"); f(b"NCCL", 0, 11), f(b"NCCL", 5, 11), f(b"zz", 0, 11)
    (4, -1, -1)
    """
    if _MEMMEM is None:
        return buf.find
    import ctypes

    holder = ctypes.c_char_p(buf)              # points into buf itself (no copy), keeps it alive
    base = ctypes.cast(holder, ctypes.c_void_p).value or 0
    memmem = _MEMMEM

    def find(key: bytes, start: int, end: int) -> int:
        if end - start < len(key):
            return -1
        hit = memmem(base + start, end - start, key, len(key))
        return -1 if hit is None else hit - base
    find.holder = holder  # type: ignore[attr-defined]
    return find


#: bytes of log text from the most common to the least (English text, numbers, paths, NCCL's
#: tags); a byte not listed is rarer than all of them.
_COMMON = (b" etaoinsr0123456789lcdum.:/_-=,phgbfywkvx[]()ENSTAIRCLO|%#<>DPMUBGFHKVWYZJQX'$\t"
           b"\"jqz")


def gates(key: bytes, n: int = 3) -> tuple[bytes, ...]:
    """The ``n`` rarest distinct bytes of ``key`` (by :data:`_COMMON`), rarest first: a chunk
    without one of them cannot hold the key, and one ``memchr`` pass (C, ~15 GB/s, stopping at
    the first hit) says whether it is there, while ``memmem`` for the key itself runs at 2-10 GB/s.
    This is the skip ``grep -c NCCL`` makes on text without ``N``; most keys are absent from most
    chunks of a training log.

    >>> gates(b"CA '"), gates(b"nccl"), gates(b"Heartbeat monitor", 1)
    ((b"'", b'C', b'A'), (b'c', b'l', b'n'), (b'H',))
    """
    rank = {b: _COMMON.find(bytes([b])) % (len(_COMMON) + 1) for b in set(key)}
    return tuple(bytes([b]) for b in sorted(rank, key=lambda b: (-rank[b], b))[:n])


def _take(buf: bytes, end: int, key: bytes, more: int, find: Callable[[bytes, int, int], int],
          spans: dict[int, int]) -> int:
    """Add to ``spans`` the lines of ``buf[:end]`` holding ``key`` and the ``more`` lines after
    each; return how many of those lie beyond ``end``."""
    pending = 0
    rare = (_GATES.get(key) or gates(key))[0]
    off = key.index(rare)
    bfind, starts = buf.find, buf.startswith
    misses = 0

    def next_hit(start: int) -> int:
        """The first ``key`` at or after ``start``: the key's rarest byte found by memchr (SIMD,
        10-50x memmem's speed), each one checked in place; past _MAX_MISSES bytes that are not
        the key's, memmem (and from then on, memmem / bytes.find as below)."""
        nonlocal misses
        j = bfind(rare, start + off, end)
        while j >= 0:
            if starts(key, j - off) and j - off + len(key) <= end:
                return j - off
            misses += 1
            if misses > _MAX_MISSES:
                return find(key, j - off + 1, end)
            j = bfind(rare, j + 1, end)
        return -1

    last = -1 << 20
    i = next_hit(0)
    while i >= 0:
        s = buf.rfind(b"\n", 0, i) + 1
        e = buf.find(b"\n", i, end)
        if e < 0:
            e = end
        spans[s] = e
        pos, n = e, more
        while n > 0:
            if pos + 1 > end:
                pending = max(pending, n)
                break
            ne = buf.find(b"\n", pos + 1, end)
            ne = end if ne < 0 else ne
            spans[pos + 1] = ne
            pos, n = ne, n - 1
        # memmem wins on long gaps, bytes.find on dense hits (no ctypes call): guess from the last
        # gap. Measured per hit (issue 24): a 770-byte gap 1.5 us memmem / 0.75 us find, 1 KB
        # 2.5 / 1.1, 20 KB 12.4 / 12.9: the ctypes call costs more than the search below ~16 KB.
        if misses <= _MAX_MISSES:
            i = next_hit(e + 1)
        else:
            i = find(key, e + 1, end) if s - last > _MEMMEM_GAP else buf.find(key, e + 1, end)
        last = e
    return pending


def _take_lines(buf: bytes, end: int, key: bytes, spans: dict[int, int]) -> None:
    """Add to ``spans`` the lines of ``buf[:end]`` holding ``key``, found with no Python step per
    line (issue 24): one ``re.finditer`` for the key and the rest of its line (a second key on
    the same line is inside the first match), each line's start by ``rfind`` in a C loop (map).

    >>> sp = {}; _take_lines(b"a\\nx NCCL y NCCL\\nNCCL\\nb", 20, b"NCCL", sp); sp
    {2: 15, 16: 20}
    """
    rx = _LINE_RX.get(key)
    if rx is None:
        rx = _LINE_RX[key] = re.compile(re.escape(key) + rb"[^\n]*")
    found = list(rx.finditer(buf, 0, end))
    spans.update(zip(map(add, map(buf.rfind, repeat(b"\n"), repeat(0), map(_START, found)),
                         repeat(1)), map(_END, found)))


def _gated(text: bytes, end: int, key: bytes, present: dict[bytes, bool]) -> bool:
    """Whether every gate byte of ``key`` is in ``text[:end]`` (answers cached in ``present``)."""
    for g in _GATES.get(key) or gates(key):
        there = present.get(g)
        if there is None:
            there = present[g] = text.find(g, 0, end) >= 0
        if not there:
            return False
    return True


def _spans(buf: bytes, end: int, keys: tuple[bytes, ...], follow: Mapping[bytes, int],
           keys2: tuple[bytes, ...] = (), follow2: Mapping[bytes, int] = {}
           ) -> tuple[dict[int, int], int, dict[int, int], int, bool]:
    """Start → end offsets of the lines in ``buf[:end]`` that hold a key (plus the lines they
    select after them), and how many selected lines lie beyond ``end`` (in the next chunk).

    ``keys[0]`` (``NCCL``) is searched first; another key is searched only when each of its
    :func:`gates` bytes occurs outside the lines already taken, or, for a key that selects lines
    after it, when the key is inside them: a key can only hold where all its bytes are, and a
    line already taken gains nothing from a second key but that key's following lines. (In a
    training log the uppercase and rare bytes are mostly in NCCL's own lines.)

    ``keys2``: a second reader's keys (``follow2`` its following lines), their lines and pending
    count returned apart: searched where their gates occur outside the lines ``keys[0]`` took,
    or where the key is inside them. The last value: whether every line taken holds ``keys[0]``."""
    spans: dict[int, int] = {}
    find = _finder(buf)
    present: dict[bytes, bool] = {}
    pending = 0
    if not _gated(buf, end, keys[0], present):
        pass
    elif follow.get(keys[0]):
        pending = _take(buf, end, keys[0], follow[keys[0]], find, spans)
    else:                                       # the common key: its lines found in C loops
        _take_lines(buf, end, keys[0], spans)
    first = -1 if follow.get(keys[0]) else len(spans)     # no other key took a line: see below
    outside, stop, inside = buf, end, b""
    if spans and len(spans) <= _MAX_SPLIT:
        # one copy each, the slices made by C loops (map), not a Python step per line
        cut = memoryview(buf)[:end].__getitem__
        starts = sorted(spans)
        ends = list(map(spans.__getitem__, starts))
        outside = b"".join(map(cut, map(slice, [0] + ends, starts + [end])))  # taken lines out
        stop = len(outside)
        inside = b"\n".join(map(cut, map(slice, starts, ends)))
        present = {}
    held: Callable[[bytes], bool] = inside.__contains__
    if len(inside) > _MEMMEM_GAP:                      # memmem: 3-10x ``key in inside`` there
        within = _finder(inside)
        seen: dict[bytes, bool] = {}                   # and first the key's rare bytes (memchr)
        held = lambda key: _gated(inside, len(inside), key, seen) and \
            within(key, 0, len(inside)) >= 0      # noqa: E731

    for key in keys[1:]:
        if not _gated(outside, stop, key, present) and not (follow.get(key) and held(key)):
            continue
        pending = max(pending, _take(buf, end, key, follow.get(key, 0), find, spans))
    spans2: dict[int, int] = {}
    pending2 = 0
    for key in keys2:
        if not _gated(outside, stop, key, present) and not held(key):
            continue
        pending2 = max(pending2, _take(buf, end, key, follow2.get(key, 0), find, spans2))
    return spans, pending, spans2, pending2, len(spans) == first


def _has_long_line(buf: bytes, end: int, limit: int) -> bool:
    """Whether ``buf[:end]`` may hold a line over ``limit`` bytes: any window of ``limit // 2``
    bytes without a newline (a line longer than ``limit`` always covers one such aligned window).

    >>> _has_long_line(b"ab\\n" * 100, 300, 8), _has_long_line(b"a" * 20 + b"\\n", 21, 8)
    (False, True)
    """
    half = max(1, limit // 2)
    find = buf.find
    for pos in range(0, end, half):
        if find(b"\n", pos, min(pos + half, end)) < 0 and min(pos + half, end) - pos == half:
            return True
    return False


def iter_matching(stream: BinaryIO, stats: InputStats, keys: tuple[bytes, ...],
                  follow: Follow = ()) -> Iterator[tuple[int, bytes]]:
    """The ``(line_number, line)`` of each line holding one of ``keys``, and of the
    ``follow[key]`` lines after a line holding ``key`` (a tuple of keys means one line each).

    >>> s = InputStats("t")
    >>> list(iter_matching(io.BytesIO(b"a\\nNCCL x\\n\\nLast error:\\nwhy\\nz"), s, (b"NCCL", b"Last error"),
    ...                    (b"Last error",))), s.lines
    ([(2, b'NCCL x'), (4, b'Last error:'), (5, b'why')], 6)
    """
    counts: Mapping[bytes, int] = dict.fromkeys(follow, 1) if isinstance(follow, tuple) else follow
    return map(_PAIR, iter_matching2(stream, stats, keys, counts, (), {}))


def iter_matching2(stream: BinaryIO, stats: InputStats, keys: tuple[bytes, ...],
                   follow: Mapping[bytes, int], keys2: tuple[bytes, ...],
                   follow2: Mapping[bytes, int]) -> Iterator[tuple[int, bytes, int]]:
    """:func:`iter_matching` for two readers in one pass: ``(line_number, line, which)`` for each
    line the first one takes (``which & 1``: a line holding one of ``keys`` or following one, as
    ``follow`` says) or the second (``which & 2``: ``keys2``, ``follow2``). One read and one
    newline count of each byte instead of two; the second reader's keys are mostly not searched
    at all (:func:`_spans`). ``diagnose`` reads the NCCL lines and the job scan's this way.

    >>> s = InputStats("t")
    >>> list(iter_matching2(io.BytesIO(b"a\\nNCCL x\\nFailures:\\nwhy\\nz"), s, (b"NCCL",), {},
    ...                     (b"Failures:",), {b"Failures:": 1})), s.lines
    ([(2, b'NCCL x', 1), (3, b'Failures:', 2), (4, b'why', 2)], 5)
    """
    for numbers, lines, which in iter_blocks2(stream, stats, keys, follow, keys2, follow2):
        yield from zip(numbers, lines, repeat(1) if which is None else which)


def iter_blocks2(stream: BinaryIO, stats: InputStats, keys: tuple[bytes, ...],
                 follow: Mapping[bytes, int], keys2: tuple[bytes, ...],
                 follow2: Mapping[bytes, int], pending: tuple[int, int] = (0, 0),
                 until_done: bool = False
                 ) -> Iterator[tuple[list[int], list[bytes], Optional[list[int]]]]:
    """:func:`iter_matching2` a block at a time: ``(line_numbers, lines, which)`` per chunk, where
    ``which`` is None when every line is the first reader's alone (``which == 1``) and holds
    ``keys[0]``, the common case: a caller can then take the whole block in C loops.

    >>> s = InputStats("t")
    >>> list(iter_blocks2(io.BytesIO(b"a\\nNCCL x\\nNCCL y\\nz"), s, (b"NCCL",), {}, (), {}))
    [([2, 3], [b'NCCL x', b'NCCL y'], None)]

    ``pending``: the lines still to follow (first reader's, second's) when ``stream`` starts in
    the middle of a log (:mod:`~ncclcheck.logparse.parallel`); ``until_done``: stop after the
    first line from which a reader that started at ``stream``'s start with none to follow
    takes the same lines, i.e. where its counts equal these (they never exceed these, and agree
    from then on). What is left at the end (or the lines read, with ``until_done``) is put in
    ``stats.extra["follow_left"]`` (``stats.extra["read_until_done"]``).
    """
    lineno = 0
    pending, pending2 = pending
    fresh = [0, 0]                  # the counts of a reader that started here (until_done)
    limit = reader.MAX_LINE_BYTES

    def one(part: bytes) -> int:
        nonlocal pending, pending2
        found = [k for k in keys if k in part]
        found2 = [k for k in keys2 if k in part]
        which = bool(found) | (bool(found2) << 1) | (pending > 0) | ((pending2 > 0) << 1)
        new = max((follow.get(k, 0) for k in found), default=0)
        new2 = max((follow2.get(k, 0) for k in found2), default=0)
        pending, pending2 = max(pending - 1, new, 0), max(pending2 - 1, new2, 0)
        if until_done:
            fresh[:] = max(fresh[0] - 1, new, 0), max(fresh[1] - 1, new2, 0)
        return which

    for k in keys + keys2:
        _GATES.setdefault(k, gates(k))
    for block, end in reader.line_blocks(stream, stats):
        if pending or pending2 or _has_long_line(block, end, limit):
            parts = block[:end].split(b"\n")
            got: tuple[list[int], list[bytes], list[int]] = ([], [], [])
            for i, part in enumerate(parts, lineno + 1):
                if len(part) > limit:
                    stats.truncated_lines += 1
                    part = part[:limit]
                which = one(part)
                if which:
                    got[0].append(i)
                    got[1].append(part)
                    got[2].append(which)
                if until_done and pending == fresh[0] and pending2 == fresh[1]:
                    stats.extra["read_until_done"] = i
                    if got[0]:
                        yield got
                    return
            if got[0]:
                yield got
            lineno += len(parts)
        else:
            spans, pending, spans2, pending2, first = _spans(block, end, keys, follow, keys2,
                                                             follow2)
            prev = 0
            if spans2:
                got = ([], [], [])
                for s in sorted(spans.keys() | spans2.keys()):
                    lineno += block.count(b"\n", prev, s)
                    prev = s
                    got[0].append(lineno + 1)
                    got[1].append(block[s:spans[s] if s in spans else spans2[s]])
                    got[2].append((s in spans) | ((s in spans2) << 1))
                yield got
            elif spans:             # line numbers and lines made by C loops (map, accumulate)
                starts = sorted(spans)
                numbers = list(accumulate(map(block.count, repeat(b"\n"), [0] + starts[:-1],
                                              starts), initial=lineno + 1))
                numbers.pop(0)
                yield numbers, list(map(block.__getitem__, map(slice, starts, map(
                    spans.__getitem__, starts)))), None if first else [1] * len(starts)
                lineno, prev = numbers[-1] - 1, starts[-1]
            lineno += block.count(b"\n", prev, end) + 1
    stats.lines = lineno
    stats.extra["follow_left"] = (pending, pending2)
    stats.extra["read_until_done"] = lineno
