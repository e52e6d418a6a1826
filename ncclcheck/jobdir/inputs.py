"""Inputs of ``diagnose``: a job's folder walked, each file taken by what it holds.

A folder is walked (sorted, symlinks not followed, hidden entries skipped) and each regular
file becomes an input. A Flight Recorder dump is read whole through :mod:`.fr` (gzip-free: torch
writes them plain); any other file is text, read by ``diagnose``'s NCCL log reader and once more
here for the job's own lines (:data:`KEYS`, found at C speed by the prefilter).

Many dumps (:data:`PARALLEL_MIN` and more) are read ahead by :func:`prefetch` in forked worker
processes (:mod:`.pool`): unpickling is most of the time and runs in C under each process's own
lock. :func:`read_dump` then takes each path's outcome in order, as if it had read it itself.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from ncclcheck.errors import BadInput
from ncclcheck.jobdir import pool
from ncclcheck.jobdir.job import JobReader, sniff
from ncclcheck.jobdir.ras import KEYS as RAS_KEYS
from ncclcheck.jobdir.text import LABEL_B
from ncclcheck.jobdir.unpickle import MAX_PICKLE_BYTES, UnsafePickle
from ncclcheck.logparse.prefilter import iter_matching
from ncclcheck.logparse.reader import InputStats, open_source, shown

MAX_FILES = 200_000
#: the lines the job-level scanner reads (torchrun's summary, srun, torch's prefixes, gloo and
#: watchdog timeouts, stacks)
KEYS = (b"time      :", b"host      :", b"rank      :", b"exitcode  :", b"traceback :",
        b"Root Cause", b"Failures:", b"[rank", b"srun: error", b"srun: launching",
        b"Timed out waiting",
        b"Watchdog caught", b"most recent call first", b"Connection closed", b"=====",
        b"Connection reset by peer",
        b"Fatal Python error") + RAS_KEYS
FOLLOW = {b"most recent call first": 12}
#: what sends a ``[rankN]:`` line to the full scanner: every key but the prefix, and the looser
#: forms :mod:`.text`'s patterns also take (``time  :``, "RAS", ...); the other lines -- in a
#: torchrun log, nearly all of them -- only feed their rank's last lines
_FULL = tuple(k for k in KEYS if k != b"[rank") + (
    b"RAS", b"launched up to", b"time  ", b"host  ", b"rank  ", b"exitcode", b"traceback",
    b"Thread 0x")
_FULL_RX = re.compile(b"|".join(re.escape(k) for k in _FULL))
_KEYS_BUT_PREFIX = tuple(k for k in KEYS if k != b"[rank")
TAIL_BYTES = 2 << 20     #: where a plain file's ranks' last lines are looked for
#: dumps from which they are read by worker processes: two workers read 64 dumps of 2,000
#: entries in half the time of one process, and forking them costs a few ms
PARALLEL_MIN = 16


def expand(paths: list[str]) -> list[str]:
    """Files for ``paths``: a folder becomes its files (walked in order), others stay.

    Raises:
        BadInput: a folder with no files, or more than :data:`MAX_FILES`.
    """
    out: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            out.append(path)
            continue
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(os.path.join(root, f) for f in sorted(files)
                         if not f.startswith(".") and os.path.isfile(os.path.join(root, f)))
            if len(found) > MAX_FILES:
                raise BadInput(f"{shown(path)}: more than {MAX_FILES} files")
        if not found:
            raise BadInput(f"{shown(path)}: an empty folder, nothing to diagnose")
        out.extend(found)
    return out


def _is_dump(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return sniff(f.read(4096)) == "fr"
    except OSError:
        return False


def prefetch(job: JobReader, paths: list[str]) -> None:
    """Read the dumps among ``paths`` ahead in worker processes (:mod:`.pool`) when there are
    :data:`PARALLEL_MIN` or more of them and more than one CPU."""
    if len(paths) < PARALLEL_MIN or pool.pool_size(len(paths), PARALLEL_MIN) is None:
        return
    dumps = [p for p in paths if p != "-" and _is_dump(p)]
    workers = pool.pool_size(len(dumps), PARALLEL_MIN)
    if workers is not None:
        pool.read_ahead(job, dumps, workers, read_dump)


def read_dump(job: JobReader, path: str) -> Optional[InputStats]:
    """Read ``path`` into ``job`` if it is a Flight Recorder dump; None when it is text.

    Raises:
        BadInput: a pickle that names a callable (refused, nothing in it ran).
    """
    if path == "-":
        return None
    ahead = job.prefetched.pop(path, None)
    if ahead is not None:
        kind, got, size = ahead
        if kind == "text":
            return None
        if kind == "error":
            raise BadInput(got)
        if kind == "bad":
            job.bad.append(got)
        else:
            job.dumps.append(got)
        return InputStats(name=shown(path), bytes=size)
    try:
        with open(path, "rb") as f:
            if sniff(f.read(4096)) != "fr":
                return None
            f.seek(0)
            # read(n) allocates n bytes first: a file within the limit is read whole
            size = os.fstat(f.fileno()).st_size
            data = f.read() if size <= MAX_PICKLE_BYTES else f.read(MAX_PICKLE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"{shown(path)}: cannot read ({exc.strerror or exc})") from None
    try:
        job.add_dump(shown(path), data, path)
    except UnsafePickle as exc:
        raise BadInput(f"{shown(path)}: refused: {exc}") from None
    return InputStats(name=shown(path), bytes=len(data))


class InlineScan:
    """:func:`scan_text` of a plain text file (not ``-``, not gzip, not a --log-dir file) fed by
    the caller's own pass over it: ``diagnose`` reads each log once for its NCCL keys and these
    (issue 24: the job scan's second pass cost 0.8-1.2 CPU-s on a 200 MB log). The caller feeds
    every line that holds one of :attr:`keys` or follows one (:attr:`follow`), then calls
    :meth:`close`; the result is what :func:`scan_text` leaves (tests/diagnose/test_shared_pass.py).
    """

    keys = _KEYS_BUT_PREFIX
    follow = FOLLOW

    def __init__(self, scanner: Any, path: str) -> None:
        self.scanner = scanner
        self.path = path

    @classmethod
    def of(cls, job: JobReader, path: str, src: Any) -> Optional["InlineScan"]:
        """The inline scan of ``path`` (``src`` its open source, not read yet), or None where
        :func:`scan_text` must read it itself."""
        if path == "-" or src.stats.gzip:
            return None
        scanner = job.scanner(src.stats.name, labelled(src.stream))
        return None if scanner.local_rank is not None else cls(scanner, path)

    def feed(self, lineno: int, raw: bytes) -> None:
        self.scanner.feed(raw.decode("utf-8", "replace"), lineno)

    def close(self, stats: InputStats) -> None:
        """The end of the file (``stats`` as the pass left them): its tail's last lines, then
        the scanner's close, in :func:`scan_text`'s order."""
        if not (stats.error or not stats.lines):
            _tail(self.scanner, self.path, stats.bytes, stats.lines)
        self.scanner.close()


def scan_text(job: JobReader, path: str) -> None:
    """Read the job-level lines of a text input (not ``-``: it was read once already).

    A plain file is read once for every key but the ``[rankN]:`` prefix; its last
    :data:`TAIL_BYTES` give each rank's last lines (:meth:`.TextScanner.tail`): in a torchrun
    log nearly every line carries the prefix, and the others need no Python per line. A gzip
    file, or a --log-dir file (whose prefixed lines map its ranks), is read once with the prefix
    among the keys; its plain prefixed lines take :meth:`.TextScanner.plain`'s short way."""
    if path == "-":
        return
    with open_source(path) as src:
        scanner = job.scanner(src.stats.name, labelled(src.stream))
        whole = src.stats.gzip or scanner.local_rank is not None
        queue = whole and scanner.local_rank is None     # gzip: no tail to read afterwards
        for lineno, raw in iter_matching(src.stream, src.stats, KEYS if whole else _KEYS_BUT_PREFIX,
                                         FOLLOW):
            if queue and raw.startswith(b"[rank") and not _FULL_RX.search(raw) \
                    and scanner.plain(raw, lineno):
                continue
            scanner.feed(raw.decode("utf-8", "replace"), lineno)
        stats = src.stats
    if not (whole or stats.error or not stats.lines):
        _tail(scanner, path, stats.bytes, stats.lines)
    scanner.close()


def _tail(scanner: Any, path: str, size: int, lines: int) -> None:
    try:
        with open(path, "rb") as f:
            start = max(0, size - TAIL_BYTES)
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return
    if start:
        data = data[data.find(b"\n") + 1:]          # the first line is cut: not one
    scanner.tail(data, lines, _FULL_RX)


def labelled(stream: Any) -> bool:
    """Is the text srun's ``--label`` output (most of its first lines start ``N: ``, srun's own
    ``srun: `` lines aside: ``srun -v`` writes a dozen before any task's)?"""
    try:
        head = stream.peek(1 << 16)[:1 << 16]
    except (AttributeError, OSError, ValueError):
        return False
    lines = [ln for ln in head.split(b"\n")[:-1] if ln.strip() and not ln.startswith(b"srun: ")][
        :200]
    return len(lines) >= 2 and 2 * sum(1 for ln in lines if LABEL_B.match(ln)) >= len(lines)
