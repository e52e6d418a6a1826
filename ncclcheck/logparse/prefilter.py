"""The bytes-level prefilter: only the lines that can matter reach Python.

A training log is mostly progress lines; NCCL's are under 1% of them. :func:`iter_matching` reads
1 MiB chunks and finds the lines holding a key with one ``memmem`` pass per key (glibc's, through
ctypes; ``bytes.find`` where there is none), counts newlines with ``bytes.count`` for the line
numbers, and never makes a Python step for a line it skips. A key may also select the lines after
the one holding it (``follow``): the reason PyTorch prints after ``Last error:``, the body of a
pasted ``ibstat`` or ``ibv_devinfo`` block after its ``CA '...'`` / ``hca_id:`` header.

Same contract as :func:`~ncclcheck.logparse.reader.iter_lines`: every line counted in ``stats``,
lines cut at :data:`~ncclcheck.logparse.reader.MAX_LINE_BYTES`, a broken gzip stream ends the
input with ``stats.error``. A chunk that may hold an over-long line, or that starts while lines
are still to be followed, takes the line-by-line path.
"""

from __future__ import annotations

import gzip
import io
import zlib
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


def _spans(buf: bytes, end: int, keys: tuple[bytes, ...],
           follow: Mapping[bytes, int]) -> tuple[dict[int, int], int]:
    """Start → end offsets of the lines in ``buf[:end]`` that hold a key (plus the lines they
    select after them), and how many selected lines lie beyond ``end`` (in the next chunk)."""
    spans: dict[int, int] = {}
    pending = 0
    find = _finder(buf)
    for key in keys:
        i = find(key, 0, end)
        more = follow.get(key, 0)
        hits = 0
        while i >= 0:
            hits += 1
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
            # memmem wins on long gaps, bytes.find on dense hits (no ctypes call per line)
            i = find(key, e + 1, end) if hits < 8 else buf.find(key, e + 1, end)
    return spans, pending


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
    """Yield ``(line_number, line)`` for each line holding one of ``keys``, and for the
    ``follow[key]`` lines after a line holding ``key`` (a tuple of keys means one line each).

    >>> s = InputStats("t")
    >>> list(iter_matching(io.BytesIO(b"a\\nNCCL x\\n\\nLast error:\\nwhy\\nz"), s, (b"NCCL", b"Last error"),
    ...                    (b"Last error",))), s.lines
    ([(2, b'NCCL x'), (4, b'Last error:'), (5, b'why')], 6)
    """
    counts: Mapping[bytes, int] = dict.fromkeys(follow, 1) if isinstance(follow, tuple) else follow
    lineno = 0
    carry = b""
    dropping = False
    pending = 0                       # lines still to take after a follow key
    limit = reader.MAX_LINE_BYTES

    def hit(line: bytes) -> tuple[bool, int]:
        found = [k for k in keys if k in line]
        return bool(found), max((counts.get(k, 0) for k in found), default=0)

    read = getattr(stream, "read1", stream.read)
    while True:
        try:
            chunk = read(reader.CHUNK_BYTES)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            stats.error = f"read stopped: {exc}"
            break
        if not chunk:
            break
        stats.bytes += len(chunk)
        if dropping:                                     # the rest of an over-long line
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            chunk = chunk[cut + 1:]
            dropping = False
            lineno += 1
            found, more = hit(carry)
            if found or pending:
                yield lineno, carry
            pending = max(pending - 1, more, 0)
            carry = b""
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n")
        if end < 0:
            carry = buf
        else:
            if pending or _has_long_line(buf, end, limit):
                parts = buf[:end].split(b"\n")
                for i, part in enumerate(parts, lineno + 1):
                    if len(part) > limit:
                        stats.truncated_lines += 1
                        part = part[:limit]
                    found, more = hit(part)
                    if found or pending:
                        yield i, part
                    pending = max(pending - 1, more, 0)
                lineno += len(parts)
            else:
                spans, pending = _spans(buf, end, keys, counts)
                prev = 0
                for s in sorted(spans):
                    lineno += buf.count(b"\n", prev, s)
                    prev = s
                    yield lineno + 1, buf[s:spans[s]]
                lineno += buf.count(b"\n", prev, end + 1)
            carry = buf[end + 1:]
        if len(carry) > limit:
            stats.truncated_lines += 1
            carry = carry[:limit]
            dropping = True
    if carry or dropping:
        lineno += 1
        found, _ = hit(carry)
        if found or pending:
            yield lineno, carry
    stats.lines = lineno
