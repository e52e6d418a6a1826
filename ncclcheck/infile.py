"""Read an input file the user named, with a size cap: ``/dev/zero`` is exit 2, not MemoryError.

Every reader of a whole file (documents, hostfiles, nccl-tests tables, env files) goes through
:func:`read_text`. It reads at most ``limit`` bytes plus one, in chunks, from whatever the path is
(a regular file, a pipe, ``-`` for standard input, a device), and refuses the file the moment it
is larger. ``diagnose`` is the one reader that streams instead (it may follow an endless log).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from ncclcheck.errors import BadInput

MiB = 1 << 20

#: Caps per kind of input: what a reader can afford under a 2 GB address-space limit
#: (``scripts/bench-memory.py`` prints the peak memory of each at its cap). A 1,000-node
#: cluster document is ~100 MiB (about 100 KB a node) and parsing one costs ~7x its size; an
#: nccl-tests table costs more per byte (every row becomes a dict), and a real one is KBs.
LIMITS = {
    "document": 128 * MiB,
    "hostfile": 16 * MiB,
    "table": 32 * MiB,
    "envfile": 1 * MiB,
}

NAMES = {"document": "a document", "hostfile": "a hostfile", "table": "an nccl-tests output",
         "envfile": "an env file"}

#: The cap for a character device, whatever the kind (nothing ncclcheck reads is one).
DEVICE_LIMIT = 16 * MiB
_CHUNK = 4 * MiB
#: Seconds a FIFO or pipe (``rank --hostfile FIFO``, ``--probe <(cmd)``) has to deliver its
#: whole file; a FIFO that nobody writes is then exit 2, never a hang.
PIPE_WAIT = 10.0


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit} bytes"


#: Bytes read so far per kind in this command (several documents together stay under the cap).
_READ: dict[str, int] = {}


def start_command() -> None:
    """Forget what earlier commands read (the CLI calls it per invocation)."""
    _READ.clear()


def _count(path: str | Path, kind: str, data: bytes) -> bytes:
    _READ[kind] = _READ.get(kind, 0) + len(data)
    if _READ[kind] > LIMITS[kind]:
        raise BadInput(f"{path}: this command's inputs of this kind ({kind}) are larger than "
                       f"{_size(LIMITS[kind])} together")
    return data


def read_bytes(path: str | Path, kind: str = "document", what: str = "read") -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``LIMITS[kind]`` of them.

    >>> read_bytes("/dev/zero", "hostfile")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: /dev/zero: larger than 16 MiB; not a hostfile ncclcheck reads

    Raises:
        BadInput: unreadable, a directory, or larger than the cap.
    """
    limit = LIMITS[kind]
    parts: list[bytes] = []
    total = 0
    try:
        if str(path) != "-" and stat.S_ISFIFO(os.stat(path).st_mode):
            data = _read_fifo(str(path), limit)
            if len(data) > limit:
                raise BadInput(f"{path}: larger than {_size(limit)}; not {NAMES[kind]} "
                               "ncclcheck reads")
            return _count(path, kind, data)
        f = sys.stdin.buffer if str(path) == "-" else open(path, "rb")  # noqa: SIM115
        try:
            mode = os.fstat(f.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            if stat.S_ISCHR(mode):  # /dev/zero, /dev/urandom: endless, so a small cap
                limit = min(limit, DEVICE_LIMIT)
            elif stat.S_ISREG(mode) and os.fstat(f.fileno()).st_size > limit:
                total = limit + 1
            while total <= limit:
                chunk = f.read(min(_CHUNK, limit + 1 - total))
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
        finally:
            if f is not sys.stdin.buffer:
                f.close()
    except OSError as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadInput(f"{path}: cannot {what} ({reason})") from None
    except MemoryError:
        raise BadInput(f"{path}: too large to read") from None
    if total > limit:
        raise BadInput(f"{path}: larger than {_size(limit)}; not {NAMES[kind]} ncclcheck reads")
    return _count(path, kind, b"".join(parts))


def _read_fifo(path: str, limit: int, deadline: float | None = None) -> bytes:
    """A FIFO (or ``<(cmd)``'s pipe), read within :data:`PIPE_WAIT` seconds: a FIFO that no
    one writes would otherwise block the reader forever. At most ``limit`` + 1 bytes."""
    import select
    import time

    end = time.monotonic() + (PIPE_WAIT if deadline is None else deadline)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        parts: list[bytes] = []
        total, began = 0, False
        while total <= limit:
            left = end - time.monotonic()
            if left <= 0:
                raise BadInput(f"{path}: a FIFO or pipe that did not end within "
                               f"{PIPE_WAIT:g} s" + ("" if began else " (nothing wrote to it)"))
            events = poller.poll(min(left, 1.0) * 1000)
            if not events:
                continue
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            except BlockingIOError:
                continue
            if not chunk:
                if events[0][1] & select.POLLHUP or began:
                    break
                continue
            began = True
            parts.append(chunk)
            total += len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_text(path: str | Path, kind: str = "document", what: str = "read") -> str:
    """:func:`read_bytes` decoded as UTF-8; a decoding error is a :class:`BadInput` line."""
    data = read_bytes(path, kind, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: cannot {what} (not UTF-8 text at byte {exc.start})") from None
