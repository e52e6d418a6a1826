"""The reference the prefilter tests hold :mod:`ncclcheck.logparse.prefilter` to: the slow,
obvious line-by-line filter (imported as ``from linefilter import reference``). It splits the
whole text itself, so that it shares no code with the reader it checks."""

from __future__ import annotations

from typing import Mapping

from ncclcheck.logparse import reader


def split_lines(data: bytes) -> tuple[list[bytes], int]:
    """Every line of ``data`` (the text after the last newline is one, if any), each cut at
    ``reader.MAX_LINE_BYTES`` as read now, and how many were cut."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    limit = reader.MAX_LINE_BYTES
    return [line[:limit] for line in lines], sum(1 for line in lines if len(line) > limit)


def reference(data: bytes, keys: tuple[bytes, ...], follow: Mapping[bytes, int],
              keys2: tuple[bytes, ...] = (), follow2: Mapping[bytes, int] = {}
              ) -> tuple[list[tuple[int, bytes, int]], int, int]:
    """``(line_number, line, which)`` of each line that holds a key of ``keys`` or follows one
    (``which & 1``, ``follow[key]`` lines after it) or of ``keys2`` (``which & 2``); the number
    of lines and of cut lines."""
    lines, cut = split_lines(data)
    out, take, take2 = [], 0, 0
    for n, line in enumerate(lines, 1):
        found = [k for k in keys if k in line]
        found2 = [k for k in keys2 if k in line]
        which = (1 if found or take else 0) | (2 if found2 or take2 else 0)
        if which:
            out.append((n, line, which))
        take = max(take - 1, max((follow.get(k, 0) for k in found), default=0), 0)
        take2 = max(take2 - 1, max((follow2.get(k, 0) for k in found2), default=0), 0)
    return out, len(lines), cut
