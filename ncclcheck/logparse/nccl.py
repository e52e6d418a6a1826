"""Split an NCCL debug line into its header (host, pid, thread, device, source) and message.

NCCL prints ``<host>:<pid>:<tid> [<cudaDev>] [<file>:<line> ]NCCL <LEVEL> <message>`` (see
``ncclDebugLog`` in src/debug.cc); WARN lines carry the source location, INFO lines usually
do not; since 2.26 WARN lines may start with a ``[%F %T] `` timestamp. Logs pasted into issues
also lose parts of the header (``[3] NCCL INFO ...``, ``NCCL INFO ...``), so every part is
optional. The header is read backwards from the ``NCCL <LEVEL>`` token with plain string
operations, not a regex, because this runs on nearly every line of a multi-GB log.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

LEVELS = ("INFO", "WARN", "TRACE", "ABORT")


class NcclLine(NamedTuple):
    """One NCCL debug line."""

    level: str                     #: INFO, WARN, TRACE or ABORT
    msg: str                       #: the message after ``NCCL <LEVEL> ``
    host: Optional[str] = None
    pid: Optional[int] = None
    tid: Optional[int] = None
    dev: Optional[int] = None      #: the CUDA device in brackets
    src: Optional[str] = None      #: ``file.cc:line`` of the WARN, when printed


#: NCCL 2.0-2.2 (closed source; 2.3.5, the first public tag, already prints ``NCCL INFO``) wrote
#: ``host:pid:tid [dev] INFO msg`` and ``host:pid:tid [dev] file:line WARN msg``, without the
#: ``NCCL`` tag. Recorded: ``seyun:17283:17549 [3] include/socket.h:371 WARN Connection closed by
#: remote peer`` (horovod/horovod#666), ``seyun:17281:17552 [1] INFO bootstrap.cu:45 -> 2 [Net]``.
#: The device in brackets (or, at the start of a line as users quote it, the source location) is
#: required, so that ``[main] INFO`` of a Python logger stays text.
_OLD_LEVEL = re.compile(r"(?:(?:^|\s)\[\d{1,4}\] (?:[\w./\-]{1,120}\.(?:cu|cc|h|c|cpp|hpp):\d{1,6} )?"
                        r"|^[\w./\-]{1,120}\.(?:cu|cc|h|c|cpp|hpp):\d{1,6} )"
                        r"(INFO|WARN|TRACE|ABORT)(?= |$)")
#: what the reader's prefilter must look for to see such a line (they hold no ``NCCL``).
OLD_KEYS = (b"] INFO ", b" WARN ")


def _level_at(text: str) -> tuple[int, str, int]:
    """Index of the ``NCCL`` of the first ``NCCL <LEVEL>`` token in ``text``, the level, and the
    length of the tag before it (5 for ``NCCL ``; 0 for the untagged NCCL 2.0-2.2 form)."""
    i = text.find("NCCL ")
    while i != -1:
        if i == 0 or text[i - 1] in " \t]":
            for level in LEVELS:
                if text.startswith(level, i + 5):
                    end = i + 5 + len(level)
                    if end == len(text) or text[end] in " \t":
                        return i, level, 5
        i = text.find("NCCL ", i + 5)
    if "INFO" in text or "WARN" in text or "TRACE" in text or "ABORT" in text:
        m = _OLD_LEVEL.search(text)
        if m is not None:
            return m.start(1), m.group(1), 0
    return -1, "", 0


def parse_nccl_line(text: str) -> Optional[NcclLine]:
    """Parse one NCCL debug line (launcher prefixes may still be in front of it).

    Args:
        text: the line, decoded.

    Returns:
        An :class:`NcclLine`, or None when the line is not an NCCL debug line.

    >>> parse_nccl_line("node2:14159:14168 [0] NCCL INFO NCCL_IB_HCA set to mlx5_4")
    NcclLine(level='INFO', msg='NCCL_IB_HCA set to mlx5_4', host='node2', pid=14159, tid=14168, dev=0, src=None)
    >>> parse_nccl_line("ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend").src
    'misc/shmutils.cc:71'
    >>> parse_nccl_line("[3] NCCL INFO 2 coll channels").dev
    3
    >>> parse_nccl_line("torch ... ProcessGroupNCCL.cpp:1191, unhandled system error") is None
    True
    >>> parse_nccl_line("seyun:17283:17549 [3] include/socket.h:371 WARN Connection closed by remote peer")
    NcclLine(level='WARN', msg='Connection closed by remote peer', host='seyun', pid=17283, tid=17549, dev=3, src='include/socket.h:371')
    >>> parse_nccl_line("2021-01-31 [main] INFO loading model") is None
    True
    >>> parse_nccl_line("include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol").src
    'include/socket.h:344'
    """
    i, level, tag = _level_at(text)
    if i < 0:
        return None
    msg = text[i + tag + len(level):].lstrip(" \t")
    head = text[:i].split()
    host = src = None
    pid = tid = dev = None
    if head and ":" in head[-1] and "." in head[-1] and head[-1].rsplit(":", 1)[1].isdigit() \
            and not head[-1].startswith("["):
        tail = head[-1].rsplit(":", 2)
        if not (len(tail) == 3 and tail[1].isdigit()):      # not host:pid:tid
            src = head.pop()
    if head and 2 < len(head[-1]) < 9 and head[-1][0] == "[" and head[-1][-1] == "]" \
            and head[-1][1:-1].isdigit():
        dev = int(head.pop()[1:-1])
    if head:
        parts = head[-1].rsplit(":", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and parts[0] \
                and len(parts[1]) <= 10 and len(parts[2]) <= 10:
            host, pid, tid = parts[0], int(parts[1]), int(parts[2])
            for glue in (">:", "]:"):              # a launcher tag glued to the host name
                if glue in host:
                    host = host.rsplit(glue, 1)[1] or None
    return NcclLine(level, msg, host, pid, tid, dev, src)
