"""Paths under a host's root: normalising, following links inside it, reading regular files.

A path that would leave the root reads as missing; links are resolved as a process chrooted at
the root would; only regular files are read, at most :data:`MAX_READ_BYTES` (see
:mod:`ncclcheck.host`).

Pure helpers that import nothing of ncclcheck, so that :mod:`ncclcheck.host` and
:mod:`ncclcheck.native` (which the host calls) can both stand on them without a circle.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

MAX_READ_BYTES = 4 * 1024 * 1024


#: Symbolic links followed for one path before giving up (the kernel's MAXSYMLINKS).
MAX_SYMLINK_HOPS = 40


def read_regular(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES) -> str | None:
    """Text of a regular file (its first ``limit`` bytes), or None when it cannot be read.

    None also for anything that is not a regular file: opening a FIFO blocks until a writer comes
    and a device may never end, so neither is read. The file is opened non-blocking and checked
    with ``fstat`` (no race between a check and the open). /proc and /sys attributes are regular
    files; they are read in small chunks because some refuse one large read (ENOMEM).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(65536, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def rel(path: str) -> str:
    """Normalise a machine path to a root-relative one; '' for the root itself.

    >>> rel("/sys/class/net/"), rel("sys/class/../class/net"), rel("/")
    ('sys/class/net', 'sys/class/net', '')
    >>> rel("../etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: path leaves the root: ../etc/passwd
    """
    norm = os.path.normpath("/" + path.lstrip("/")) if path else "/"
    if path and not path.startswith("/") and os.path.normpath(path).startswith(".."):
        raise ValueError(f"path leaves the root: {path}")
    return norm.lstrip("/")


def follow_links(path: str, readlink: Callable[[str], str | None],
                 follow_last: bool = True) -> str | None:
    """Resolve the symbolic links of a machine path as a process chrooted at the root would.

    ``readlink(p)`` answers the target of the root-relative path ``p``, or None when it is not
    a link. An absolute target starts again at the root and ``..`` stops at it. Returns the
    root-relative result, or None after :data:`MAX_SYMLINK_HOPS` links (a loop).

    >>> links = {"lib": "usr/lib", "usr/lib/libnccl.so.2": "/opt/nccl/libnccl.so.2.21.5",
    ...          "loop": "loop"}
    >>> follow_links("/lib/libnccl.so.2", links.get), follow_links("../../lib", links.get)
    ('opt/nccl/libnccl.so.2.21.5', 'usr/lib')
    >>> follow_links("lib", links.get, follow_last=False), follow_links("loop", links.get)
    ('lib', None)
    """
    todo = [p for p in path.split("/") if p]
    done: list[str] = []
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        target = readlink("/".join(done + [part])) if todo or follow_last else None
        if target is None:
            done.append(part)
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            return None
        if target.startswith("/"):
            done = []
        todo = [p for p in target.split("/") if p] + todo
    return "/".join(done)


def _inside(path: str) -> str | None:
    """:func:`rel`, or None for a path that leaves the root."""
    try:
        return rel(path)
    except ValueError:
        return None

