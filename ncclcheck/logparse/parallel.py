"""A big plain log file prefiltered by forked workers, segment by segment, in the file's order.

Finding the lines that matter (:func:`~ncclcheck.logparse.prefilter.iter_blocks2`) is about half
of ``diagnose``'s time on a job-sized log (issue 24: 200 MB at NCCL_DEBUG=INFO, one line in
eleven NCCL's). :func:`blocks` cuts a regular file of :data:`MIN_BYTES` or more into segments of
:data:`SEGMENT_BYTES` at line starts and hands them round-robin to forked workers, one per idle
CPU (:func:`workers_for`). Each worker runs the same ``iter_blocks2`` over its segments and
sends, per segment, the lines it took with their line numbers within the segment, as
:mod:`marshal` data (plain bytes and numbers; no pickle). This process takes the segments in the
file's order, adds the lines before each to its numbers, and parses them while the workers read
ahead: at most one segment per worker waits, so memory stays flat.

Why the lines, numbers and ``which`` flags are those of one ``iter_blocks2`` over the whole file
(``tests/diagnose/test_parallel.py`` holds it): segments end at a newline; a line that a key
selects after it (``follow``: a pasted ``ibstat`` body, the reason after ``Last error:``) may lie
in the next segment, so a worker whose segment ends with lines still to follow reads on past its
end, with the same count left, and this process drops the next segments' lines up to where it
stopped. The next segment's worker started with none left to follow; its count is never above
the whole file's, and from the first line where the two are equal they stay equal, so the
worker reading on stops there (``until_done``): at most the longest follow-up (400 lines) past
its end, however often a key recurs. A segment whose read failed stops the file there, as one
pass does. Segment starts are found once, before the workers start (:func:`bounds`), in the
file ``src`` has open (not opened again by name: a log rotated meanwhile stays the one read);
the last segment runs to the end of the file as it is then (a log still written).

Workers ignore Ctrl-C (this process handles it), take SIGTERM's default, die with this process
(``PR_SET_PDEATHSIG``) and are stopped and reaped before :func:`blocks` returns or raises; a
worker that fails leaves its segments to this process, which reads them itself the same way.
Linux only (fork); elsewhere, for gzip, standard input and small files, one process reads.
"""

from __future__ import annotations

import io
import marshal
import os
import signal
import stat
import sys
from array import array
from bisect import bisect_right
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional

from ncclcheck.logparse.prefilter import iter_blocks2
from ncclcheck.logparse.reader import InputStats, Source

SEGMENT_BYTES = 8 << 20     #: a worker's unit of work
MIN_BYTES = 48 << 20        #: smaller files are read by one process (forking costs more)
MAX_WORKERS = 8
_WINDOW = 1 << 16           #: bytes read at a time to find a segment's first line

Block = tuple[list[int], list[bytes], Optional[list[int]]]


def cpus(root: str = "/") -> int:
    """CPUs this process may use: its affinity (else the machine's count), capped by its
    cgroup v2 CPU quota (``cpu.max``: a container's or a Slurm step's limit; ``root``: where
    /proc and /sys are, for tests)."""
    try:
        n = len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open(os.path.join(root, "proc/self/cgroup"), encoding="ascii") as f:
            rel = next(ln[3:].strip() for ln in f if ln.startswith("0::"))
        with open(os.path.join(root, f"sys/fs/cgroup{rel.rstrip('/')}/cpu.max"),
                  encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, -(-int(quota) // int(period))))
    except (OSError, StopIteration, ValueError, UnicodeDecodeError):
        pass
    return n


@contextmanager
def signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked while workers are forked: blocked in each worker from its
    start until :func:`worker_start` has them ignored (Ctrl-C is this process's) and at their
    default (a handler of this process's would not stop the worker)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def worker_start(parent: int) -> Optional[Any]:
    """In a forked worker, first: Ctrl-C ignored, SIGTERM at its default, death with the
    parent (``PR_SET_PDEATHSIG``). Returns libc (None where ctypes cannot load it), or False
    when the parent is already gone (the worker should return)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)     # whatever the parent made of it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    libc = None
    try:                                       # die with the parent, however it ends
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)                                # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    return False if os.getppid() != parent else libc


class _Range(io.RawIOBase):
    """Bytes ``start`` to ``end`` (None: the end of the file) of the open file ``fd``."""

    def __init__(self, fd: int, start: int, end: Optional[int]) -> None:
        super().__init__()
        self._fd, self._pos, self._end = fd, start, end

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = len(buf) if self._end is None else min(len(buf), self._end - self._pos)
        if n <= 0:
            return 0
        data = os.pread(self._fd, n, self._pos)
        buf[:len(data)] = data
        self._pos += len(data)
        return len(data)


def line_start(fd: int, pos: int) -> int:
    """The first line start at or after ``pos`` in the file ``fd`` (its end if none)."""
    if pos <= 0:
        return 0
    at = pos - 1                                 # a newline right before pos: pos starts a line
    while True:
        data = os.pread(fd, _WINDOW, at)
        if not data:
            return at
        cut = data.find(b"\n")
        if cut >= 0:
            return at + cut + 1
        at += len(data)


def bounds(fd: int, size: int) -> list[int]:
    """Where each segment starts (the first line start at or after each multiple of
    :data:`SEGMENT_BYTES` below ``size``), found once, before the workers start, so that a
    segment's end and the next one's start are the same offset even in a log still written.
    A read that fails ends the list there: the last segment then reads on to the failure, as
    one pass does, and says it."""
    out = []
    for i in range(-(-size // SEGMENT_BYTES)):
        try:
            out.append(line_start(fd, i * SEGMENT_BYTES))
        except OSError:
            break
    return out or [0]


def segment(fd: int, i: int, starts: list[int], keys: tuple[bytes, ...],
            follow: Mapping[bytes, int], keys2: tuple[bytes, ...],
            follow2: Mapping[bytes, int]) -> bytes:
    """Segment ``i`` (``starts``: :func:`bounds`) read as :func:`iter_blocks2` reads a whole
    file, line numbers counted from the segment's start; the lines still to follow at its end
    are taken past it. Returns the :mod:`marshal` message :func:`blocks` decodes."""
    start, end = starts[i], starts[i + 1] if i + 1 < len(starts) else None
    stats = InputStats("")
    out = [_pack(b) for b in iter_blocks2(_Range(fd, start, end), stats, keys, follow, keys2,
                                         follow2)]
    left, more = stats.extra["follow_left"], 0
    if end is not None and any(left) and not stats.error:
        after = InputStats("")
        for numbers, lines, which in iter_blocks2(_Range(fd, end, None), after, keys, follow,
                                                  keys2, follow2, left, until_done=True):
            out.append(_pack(([x + stats.lines for x in numbers], lines, which)))
        more = after.extra["read_until_done"]
    return marshal.dumps((stats.bytes, stats.lines, stats.truncated_lines, stats.error, more,
                          out))


def _pack(block: Block) -> tuple[bytes, bytes, Optional[bytes]]:
    numbers, lines, which = block
    return (array("q", numbers).tobytes(), b"\n".join(lines),
            None if which is None else bytes(which))


def _unpack(packed: tuple[bytes, bytes, Optional[bytes]], base: int, skip: int
            ) -> Optional[Block]:
    """A block with ``base`` added to its line numbers and the lines up to ``skip`` left out."""
    raw, joined, which = packed
    numbers = array("q")
    numbers.frombytes(raw)
    if not numbers:
        return None
    nums = list(map(base.__add__, numbers))
    lines = joined.split(b"\n")
    whiches = None if which is None else list(which)
    cut = bisect_right(nums, skip) if nums[0] <= skip else 0
    if cut:
        nums, lines = nums[cut:], lines[cut:]
        whiches = None if whiches is None else whiches[cut:]
        if not nums:
            return None
    return nums, lines, whiches


def _worker(fd: int, mine: list[int], starts: list[int], conn: Any, parent: int,
            args: tuple) -> None:
    if worker_start(parent) is False:
        return
    for i in mine:
        conn.send_bytes(segment(fd, i, starts, *args))


def workers_for(size: int) -> Optional[int]:
    """Workers for a file of ``size`` bytes: one per CPU this process may use and nothing else
    keeps busy (the 1-minute load average), at most :data:`MAX_WORKERS`; None (one process)
    under :data:`MIN_BYTES`, with fewer than two such CPUs, or off Linux. Workers cost about a
    third more CPU in all than one process: on a node whose CPUs train, they would slow it."""
    if size < MIN_BYTES or not sys.platform.startswith("linux"):
        return None
    n = cpus()
    try:
        idle = int(n - os.getloadavg()[0] + 0.5)
    except OSError:
        idle = n
    n = min(n, idle, MAX_WORKERS, -(-size // SEGMENT_BYTES))
    return n if n >= 2 else None


def blocks(src: Source, path: str, keys: tuple[bytes, ...], follow: Mapping[bytes, int],
           keys2: tuple[bytes, ...], follow2: Mapping[bytes, int]) -> Iterator[Block]:
    """:func:`iter_blocks2` over ``src`` (opened from ``path``): by workers for a big regular
    file (see the module's docstring), else in this process. ``src.stats`` is filled in."""
    fd, count = -1, None
    if path != "-" and not src.stats.gzip:
        try:                           # the file src has open, whatever its name is now
            fd = os.dup(src.stream.fileno())
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                count = workers_for(info.st_size)
        except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
            pass
    if count is None:
        if fd >= 0:
            os.close(fd)
        yield from iter_blocks2(src.stream, src.stats, keys, follow, keys2, follow2)
        return
    try:
        yield from _parallel(fd, info.st_size, count, src.stats, (keys, follow, keys2, follow2))
    finally:
        os.close(fd)


def _parallel(fd: int, size: int, count: int, stats: InputStats, args: tuple
              ) -> Iterator[Block]:
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    starts = bounds(fd, size)
    n = len(starts)
    count = min(count, n)
    conns: list[Any] = []
    procs: list[Any] = []
    try:
        with signals_blocked():
            for w in range(count):
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker, daemon=True,
                                args=(fd, list(range(w, n, count)), starts, send, os.getpid(),
                                      args))
                p.start()
                send.close()
                conns.append(recv)
                procs.append(p)
        base = skip = 0
        for i in range(n):
            conn = conns[i % count]
            msg = None
            if conn is not None:
                try:
                    msg = conn.recv_bytes()
                except (EOFError, OSError):
                    conns[i % count] = None             # this worker's segments: read here
            if msg is None:
                msg = segment(fd, i, starts, *args)
            nbytes, lines, truncated, error, more, packed = marshal.loads(msg)
            for block in packed:
                got = _unpack(block, base, skip)
                if got is not None:
                    yield got
            stats.bytes += nbytes
            stats.truncated_lines += truncated
            skip = max(skip, base + lines + more)
            base += lines
            stats.lines = base
            if error:
                stats.error = error
                return
    finally:
        for conn in conns:
            if conn is not None:
                conn.close()
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
