"""Pasted nccl-tests output, read with ``bench --import``'s own parser.

A table starts at the ``# nThread ...`` header or at the column header (``size count type ...
busbw``) and ends at ``# Avg bus bandwidth`` (or at the end of the input); the block is handed to
:func:`ncclcheck.logparse.nccltests.parse_nccl_tests`, which takes launcher prefixes, interleaved
``NCCL INFO`` lines, old and new column sets.
"""

from __future__ import annotations

from typing import Any


MAX_LINES = 2000
MAX_TABLES = 64
#: the byte strings the prefilter must look for, and how many lines after each it must keep.
KEYS_FOLLOW = {b"nThread ": 400, b"busbw": 200}     # the footer lies within the table's follow


class PastedNcclTests:
    """nccl-tests outputs read so far."""

    def __init__(self) -> None:
        self.tables: list[tuple[dict[str, Any], dict[str, Any]]] = []    # facts, first line
        self.kinds: dict[str, dict[str, Any]] = {}
        self._lines: list[str] = []
        self._ev: dict[str, Any] = {}

    @property
    def reading(self) -> bool:
        """Whether a table is being read."""
        return bool(self._lines)

    def feed(self, line: str, ev: dict[str, Any]) -> bool:
        """Take one line (NCCL lines included: the table's transport comes from them)."""
        text = line.rstrip("\r\n")
        starts = "nThread " in text or ("busbw" in text and "size" in text and "count" in text)
        if starts and not (self._lines and "busbw" in text and any("nThread " in x
                                                                  for x in self._lines[-20:])):
            if self._lines and any("busbw" in x for x in self._lines):
                self.close()
            if not self._lines:
                self._ev = ev
                self.kinds.setdefault("nccl-tests", ev)
        if not self._lines and not starts:
            return False
        if len(self._lines) < MAX_LINES:
            self._lines.append(text)
        if "Avg bus bandwidth" in text:
            self.close()
        return True

    def gpu_models(self) -> dict[str, set[str]]:
        """host -> the GPU names nccl-tests' device lines show (``#  Rank 0 ... on spark-fb97
        device 0 [000f:01:00] NVIDIA GB10``), for the tables read so far."""
        out: dict[str, set[str]] = {}
        for facts, _ in self.tables:
            for rank in facts["ranks"][:4096]:
                if rank["gpu"] and len(out) < 4096:
                    out.setdefault(rank["host"], set()).add(rank["gpu"])
        return out

    def close(self) -> None:
        """End the table being read."""
        if self._lines and len(self.tables) < MAX_TABLES:
            from ncclcheck.logparse.nccltests import parse_nccl_tests  # only when a table is pasted

            facts = parse_nccl_tests("\n".join(self._lines))
            if facts["rows"] or facts["ranks"] or facts["avg_busbw_gbps"] is not None:
                self.tables.append((facts, self._ev))
        self._lines = []
