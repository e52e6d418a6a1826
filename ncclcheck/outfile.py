"""``-o FILE``: write what a command produced without harming what FILE is.

A plain ``rename`` over FILE, whatever FILE is, once turned a root user's ``/dev/null`` into a
regular file. So the target decides how it is written:

* a regular file or a new path: a temporary file beside it, fsynced, renamed over it (readers see
  the old file or the new one, never half of one);
* a symlink: followed to its final target, which is written as above (the link stays a link);
* a character device (``/dev/null``, a tty) or a FIFO: opened and written in place; a FIFO whose
  reader has not opened it within :data:`FIFO_WAIT` seconds is an error, never a hang;
* ``/dev/stdout`` (and ``/dev/fd/1``, ``/proc/self/fd/1``, ``//dev/stdout``, a link to one):
  the same as ``-`` (see :func:`is_stdout`, which the CLI applies to every ``-o``);
* ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: the stream that descriptor names, written
  where it stands (a log that ``2>>`` appends to keeps its lines; see :func:`stream_fd`);
* a directory, a block device or a socket: refused (exit 2).

:func:`check_output` says before a command's work whether its ``-o`` can be written. Text
that is not valid Unicode (a lone surrogate from a document, a non-UTF-8 byte in an argument) is
written escaped (``\\ud800``), never a ``UnicodeEncodeError``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

from ncclcheck.errors import BadInput, NcclcheckError

#: Seconds a FIFO's reader has to open its end before ``-o FIFO`` gives up.
FIFO_WAIT = 10.0

_STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


_STREAM_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_RE = re.compile(r"/(?:dev/fd|proc/(?:self|thread-self|(\d+))/fd)/(\d+)", re.ASCII)


def _fd_of_name(name: str) -> int | None:
    path = os.path.abspath(name)
    path = "/" + os.path.normpath(path).lstrip("/")  # //dev/stdout is /dev/stdout
    if path in _STREAM_NAMES:
        return _STREAM_NAMES[path]
    match = _FD_RE.fullmatch(path)
    if match and (match.group(1) is None or int(match.group(1)) == os.getpid()):
        return int(match.group(2))
    return None


def stream_fd(path: str | None) -> int | None:
    """The descriptor that ``-o path`` names (``/dev/stderr``: 2), following links, or None.

    >>> [stream_fd(p) for p in ("/dev/stderr", "//dev/stdout", "/dev/fd/2", "out.json", None)]
    [2, 1, 2, None, None]
    """
    if not path or path == "-":
        return None
    name = str(path)
    for _ in range(40):  # the kernel's own bound on a chain of links
        fd = _fd_of_name(name)
        if fd is not None:
            return fd
        try:
            link = os.readlink(name)
        except (OSError, ValueError):
            return None
        name = os.path.join(os.path.dirname(os.path.abspath(name)), link)
    return None


def is_stdout(path: str | None) -> bool:
    """True when ``-o path`` means standard output.

    >>> [is_stdout(p) for p in ("-", "/dev/stdout", "/dev/fd/1", "out.json", None)]
    [True, True, True, False, False]
    """
    return path in _STDOUT_NAMES or stream_fd(path) == 1


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


def write_stream(fd: int, text: str, shown: str) -> None:
    """Write ``text`` to the open descriptor ``fd`` where it stands (appending as it appends)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.fileno() == fd:
                stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        view = memoryview(_encode(text))
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise BadInput(f"{shown}: cannot write ({_reason(exc)})") from None


def check_output(path: str) -> None:
    """Refuse now an ``-o path`` that could not be written later (exit 2), before the work.

    Raises:
        BadInput: too long, in a missing or unwritable folder, a directory, a socket.
    """
    shown = str(path)
    if "\0" in shown:
        raise BadInput("-o: a path cannot hold a NUL byte")
    if len(os.fsencode(shown)) > 4095:
        raise BadInput(f"{shown[:60]}...: cannot write (path too long)")
    fd = stream_fd(shown)
    if fd is not None:
        try:
            os.fstat(fd)
        except OSError:
            raise BadInput(f"{shown}: cannot write (descriptor {fd} is not open)") from None
        return
    target = Path(os.path.realpath(shown))
    kind = _target_kind(target)
    if kind == "inplace":
        return
    if kind not in ("new", "file"):
        raise BadInput(f"{shown}: cannot write ({kind})")
    folder = target.parent
    if not folder.is_dir():
        raise BadInput(f"{shown}: cannot write (no folder {folder})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"{shown}: cannot write (folder {folder} is not writable)")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def write_in_place(path: str, text: str, deadline: float = FIFO_WAIT) -> None:
    """Write ``text`` into a character device or FIFO, opening it as a shell redirection would."""
    data = _encode(text)
    end = time.monotonic() + deadline
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a FIFO nobody reads yet
                raise BadInput(f"{path}: cannot write ({_reason(exc)})") from None
            if time.monotonic() >= end:
                raise NcclcheckError(f"{path}: a FIFO that nobody read within "
                                     f"{deadline:g} s; nothing written") from None
            time.sleep(0.05)
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise NcclcheckError(f"{path}: write failed ({_reason(exc)})") from None
    finally:
        os.close(fd)


def _target_kind(path: Path) -> str:
    """``new``, ``file``, ``inplace`` or a refusal reason for the final target of ``path``."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "new"
    except OSError as exc:
        raise BadInput(f"{path}: cannot write ({_reason(exc)})") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "inplace"
    if stat.S_ISDIR(mode):
        return "is a directory"
    return "not a regular file, character device or FIFO"


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` respecting what ``path`` is (see the module docstring).

    On any failure the temporary file is removed and the target is untouched.
    """
    shown = str(path)
    if len(os.fsencode(shown)) > 4095:
        raise BadInput(f"{shown[:60]}...: cannot write (path too long)")
    fd = stream_fd(shown)
    if fd is not None:
        write_stream(fd, text, shown)
        return
    target = Path(os.path.realpath(path))  # a symlink's final target; the link itself is kept
    kind = _target_kind(target)
    if kind == "inplace":
        write_in_place(str(target), text)
        return
    if kind not in ("new", "file"):
        raise BadInput(f"{shown}: cannot write ({kind})")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:200]}.", suffix=".tmp",
                                   dir=target.parent)
    except OSError as exc:
        raise BadInput(f"{shown}: cannot write ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if kind == "file":
            os.chmod(tmp, target.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, (IsADirectoryError, NotADirectoryError, PermissionError)) or (
                isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG):
            raise BadInput(f"{shown}: cannot write ({_reason(exc)})") from None
        if isinstance(exc, OSError):
            raise NcclcheckError(f"{shown}: write failed ({_reason(exc)}); "
                                 "the previous file, if any, is unchanged") from None
        raise
