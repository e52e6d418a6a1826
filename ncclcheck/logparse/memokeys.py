"""Memo keys of :class:`~ncclcheck.logparse.state.LogState`'s fast path (issue 24): which lines
share a process (:func:`head_key`), which bulk messages share a fact (:func:`shape`), and which
facts may be shared at all (:func:`frozen`).
"""

from __future__ import annotations

import re
from typing import Any

#: a timestamp at the start of a line, as :mod:`~ncclcheck.logparse.prefix` strips it (its
#: ``stamp`` alternative, on bytes): the only prefix that differs on every line of a process.
STAMP_FIRST = frozenset(b"[0123456789")
STAMP_PATTERN = rb"\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+"
_STAMP = re.compile(STAMP_PATTERN)


def head_key(raw: bytes, cut: int) -> bytes:
    """The fast path's key for a line whose `` NCCL INFO `` starts at ``cut``: the bytes before
    it, less a leading timestamp (marked by a NUL, so that stamped and unstamped lines never share
    a key). Lines with the same key parse to the same process with the same prefixes: a
    timestamp only sets ``Prefix.stamped``, which nothing reads. Without this, a log with a
    timestamp on every line (``kubectl logs --timestamps``, CloudWatch, Python logging) missed
    the fast path on every line (issue 24: 47 us per NCCL line instead of 15).

    >>> head_key(b"2026-11-26T12:00:01.5Z h:1:2 [0] NCCL INFO x", 32), head_key(b"h:1:2 [0] NCCL INFO x", 9)
    (b'\\x00h:1:2 [0]', b'h:1:2 [0]')
    """
    c = raw[0] if raw else 0
    if 48 <= c <= 57 or (c == 91 and 48 <= (raw[1] if len(raw) > 1 else 0) <= 57):   # 2 or [2
        m = _STAMP.match(raw, 0, cut)
        if m is not None:
            return b"\0" + raw[m.end():cut]
    return raw[:cut]


_ZEROS = bytes.maketrans(b"123456789", b"000000000")


def shape(body: bytes) -> bytes:
    """The memo key of a Channel/Ring/Trees message: its ASCII digits made ``0`` where they only
    name ranks (between the first `` : `` and the `` via ``; all of a Trees line), so that one
    parse serves every rank's line of the same shape (issue 24: a job's connection lines are
    nearly all different, and each took a full parse). Exact: :mod:`.facts`' patterns treat
    every ASCII digit alike there, and the values (channel and total before the `` : ``, the
    transport after ``via``, the count of ``[n]`` groups) are kept.

    >>> shape(b"Channel 05/1 : 13[5] -> 77[5] [send] via NET/IB/5/GDRDMA"), shape(b"Trees [1] 3/-1/-1->2->1")
    (b'Channel 05/1 : 00[0] -> 00[0] [send] via NET/IB/5/GDRDMA', b'Trees [0] 0/-0/-0->0->0')
    """
    if body[:1] == b"T":
        return body.translate(_ZEROS)
    i = body.find(b" : ")
    if i < 0:
        return body
    j = body.find(b" via ", i)
    if j < 0:
        return body[:i] + body[i:].translate(_ZEROS)
    return body[:i] + body[i:j].translate(_ZEROS) + body[j:]


def frozen(fact: Any) -> bool:
    """Whether ``fact`` may be shared by every process that prints its message: None, or a value
    that nothing can change (hashable: no list or dict, which a process's fields may take in and
    extend)."""
    try:
        hash(fact)
    except TypeError:
        return False
    return True
