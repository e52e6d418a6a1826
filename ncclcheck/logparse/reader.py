"""Stream lines out of log files, gzip files and stdin, with bounded memory.

Logs are read in 1 MiB chunks and split on ``\\n``; a line longer than :data:`MAX_LINE_BYTES`
keeps its first :data:`MAX_LINE_BYTES` bytes and the rest is skipped up to the next newline, so
one giant line (a dumped tensor, a binary blob) costs no more memory than a short one. Gzip is
recognised by its magic bytes, not by the file name, so ``job.log.gz``, a renamed archive and
``zcat``-less pipes all work. Bytes are handed out undecoded: the caller decides which lines are
worth decoding (most of a training log is not).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterator, Optional

from ncclcheck.errors import BadInput

MAX_LINE_BYTES = 16384          #: longer lines are truncated here (NCCL lines are < 2 KB)
CHUNK_BYTES = 1 << 20           #: read size
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class InputStats:
    """What was read from one input; the diagnosis reports it under ``inputs``."""

    name: str
    gzip: bool = False
    bytes: int = 0               #: bytes of log text read (after decompression)
    lines: int = 0
    truncated_lines: int = 0     #: lines longer than MAX_LINE_BYTES
    error: Optional[str] = None  #: a read error after the start (corrupt gzip, ...)
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The JSON form."""
        out = {"name": self.name, "gzip": self.gzip, "bytes": self.bytes, "lines": self.lines,
               "truncated_lines": self.truncated_lines}
        if self.error:
            out["error"] = self.error
        return out


class _Rewound(io.RawIOBase):
    """A raw stream that first gives back ``head`` (bytes already read to sniff) then ``rest``."""

    def __init__(self, head: bytes, rest: BinaryIO, owns: bool = False) -> None:
        super().__init__()
        self._head = head
        self._rest = rest
        self._owns = owns

    def close(self) -> None:
        if self._owns and not self.closed:
            self._rest.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buf))
        if not data:
            return 0
        buf[:len(data)] = data
        return len(data)


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(path: str) -> str:
    r"""A file name as an error message may print it: control characters escaped (issue 16).

    >>> shown("a\x1b[2Jb.log")
    'a\\x1b[2Jb.log'
    """
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], path)


def check_readable(path: str) -> None:
    """Raise :class:`BadInput` naming ``path`` when it cannot be opened for reading.

    >>> check_readable("/nonexistent/nccl.log")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: /nonexistent/nccl.log: cannot read (No such file or directory)
    """
    if path == "-":
        return
    if os.path.isdir(path):
        raise BadInput(f"{shown(path)}: cannot read (is a directory)")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise BadInput(f"{shown(path)}: cannot read ({exc.strerror or exc})") from None


class Source:
    """An opened input: ``stream`` gives log bytes (decompressed), ``stats`` counts them."""

    def __init__(self, stream: BinaryIO, stats: InputStats, closers: list) -> None:
        self.stream = stream
        self.stats = stats
        self._closers = closers

    def close(self) -> None:
        """Close what was opened (never stdin itself)."""
        for obj in self._closers:
            try:
                obj.close()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_source(path: str, stdin: Optional[BinaryIO] = None) -> Source:
    """Open ``path`` (``-`` is stdin) as a binary stream, decompressing gzip transparently.

    Args:
        path: a file name, or ``-`` for standard input.
        stdin: the binary stream ``-`` stands for (default ``sys.stdin.buffer``).

    Returns:
        A :class:`Source`; :func:`iter_lines` fills in its ``stats``.

    >>> import gzip as gz, tempfile
    >>> f = tempfile.NamedTemporaryFile(suffix=".log", delete=False); _ = f.write(gz.compress(b"x\\n")); f.close()
    >>> with open_source(f.name) as src:
    ...     src.stats.gzip, src.stream.read()
    (True, b'x\\n')
    >>> import os; os.unlink(f.name)
    """
    stats = InputStats(name="<stdin>" if path == "-" else shown(path))
    if path == "-":
        raw: BinaryIO = stdin if stdin is not None else sys.stdin.buffer
    else:
        check_readable(path)
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by Source.close
        except OSError as exc:
            raise BadInput(f"{shown(path)}: cannot read ({exc.strerror or exc})") from None
    peek = getattr(raw, "peek", None)
    try:
        if peek is not None and isinstance(raw, io.BufferedReader):
            head = peek(2)[:2]                    # sniffed without consuming: no copy layer
        else:
            head = raw.read(2) or b""
    except OSError as exc:
        raise BadInput(f"{stats.name}: cannot read ({exc.strerror or exc})") from None
    if peek is not None and isinstance(raw, io.BufferedReader):
        buffered = raw
        closers: list = [raw] if path != "-" else []
    else:
        buffered = io.BufferedReader(_Rewound(head, raw, owns=path != "-"), CHUNK_BYTES)  # type: ignore[arg-type]
        closers = [buffered]
    stream: BinaryIO = buffered  # type: ignore[assignment]
    if head == GZIP_MAGIC:
        stats.gzip = True
        stream = gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[assignment]
        closers.insert(0, stream)
    return Source(stream, stats, closers)


def read_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """``stream`` in chunks of :data:`CHUNK_BYTES`, counted in ``stats.bytes``; a read that fails
    ends the chunks and is said in ``stats.error``.

    read1: one underlying read at a time, so a stream that breaks off (a truncated gzip) hands
    over everything decoded before the break instead of losing the last chunk with the error.

    >>> s = InputStats("t")
    >>> list(read_chunks(io.BytesIO(b"abc"), s)), s.bytes, s.error
    ([b'abc'], 3, None)
    """
    read = getattr(stream, "read1", stream.read)
    while True:
        try:
            chunk = read(CHUNK_BYTES)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            stats.error = f"read stopped: {exc}"
            return
        if not chunk:
            return
        stats.bytes += len(chunk)
        yield chunk


def line_blocks(stream: BinaryIO, stats: InputStats) -> Iterator[tuple[bytes, int]]:
    """``stream`` as blocks of whole lines: ``(buf, end)``, where ``buf[:end]`` is one or more
    lines joined by ``\\n`` (without the last one's; not copied out of ``buf``): each chunk up to
    its last newline, the rest carried to the next. A line over :data:`MAX_LINE_BYTES` is cut
    there (counted in ``stats.truncated_lines``) when it is still open at a chunk's end, and
    comes alone, cut, once its newline is seen; a line the chunk holds whole is left to the
    caller. The text after the last newline comes last, when there is some.

    >>> s = InputStats("t")
    >>> [buf[:end] for buf, end in line_blocks(io.BytesIO(b"a\\nb\\nc"), s)], s.bytes
    ([b'a\\nb', b'c'], 5)
    """
    carry = b""
    dropping = False          # inside an over-long line: skip bytes up to the next newline
    limit = MAX_LINE_BYTES
    for chunk in read_chunks(stream, stats):
        if dropping:
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            chunk = chunk[cut + 1:]
            dropping = False
            yield carry, len(carry)
            carry = b""
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n")
        if end < 0:
            carry = buf
        else:
            yield buf, end
            carry = buf[end + 1:]
        if len(carry) > limit:
            stats.truncated_lines += 1
            carry = carry[:limit]
            dropping = True
    if carry or dropping:
        yield carry, len(carry)


def iter_lines(stream: BinaryIO, stats: InputStats, wanted: Callable[[bytes], bool] = bool,
               always: bytes = b"\n") -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, line)`` for each line for which ``wanted(line)`` is true.

    Every line is counted in ``stats`` whether wanted or not. Lines lose their ``\\n``; a line
    over :data:`MAX_LINE_BYTES` is cut to that length. Lines containing ``always`` are taken
    without calling ``wanted`` (the common case, tested in C). A corrupt or truncated gzip stream
    ends the input with ``stats.error`` set instead of raising, after every line decoded before
    the break.

    >>> s = InputStats("t")
    >>> list(iter_lines(io.BytesIO(b"a\\nNCCL x\\n\\nb"), s, lambda l: b"NCCL" in l)), s.lines
    ([(2, b'NCCL x')], 4)
    """
    lineno = 0
    limit = MAX_LINE_BYTES
    for buf, end in line_blocks(stream, stats):
        parts = buf[:end].split(b"\n")
        if max(map(len, parts)) > limit:
            stats.truncated_lines += sum(1 for p in parts if len(p) > limit)
            parts = [p[:limit] for p in parts]
        base = lineno
        lineno += len(parts)
        yield from [(base + i, p) for i, p in enumerate(parts, 1) if always in p or wanted(p)]
    stats.lines = lineno
