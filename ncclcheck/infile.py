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

#: Caps per kind of input. A 1,000-node cluster document is ~100 MiB (about 100 KB a node).
LIMITS = {
    "document": 1024 * MiB,
    "hostfile": 16 * MiB,
    "table": 256 * MiB,
    "envfile": 1 * MiB,
}

NAMES = {"document": "a document", "hostfile": "a hostfile", "table": "an nccl-tests output",
         "envfile": "an env file"}

#: The cap for a character device, whatever the kind (nothing ncclcheck reads is one).
DEVICE_LIMIT = 16 * MiB
_CHUNK = 4 * MiB


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit} bytes"


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
    return b"".join(parts)


def read_text(path: str | Path, kind: str = "document", what: str = "read") -> str:
    """:func:`read_bytes` decoded as UTF-8; a decoding error is a :class:`BadInput` line."""
    data = read_bytes(path, kind, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: cannot {what} (not UTF-8 text at byte {exc.start})") from None
