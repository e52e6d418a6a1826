"""NCCL RAS text output (``ncclras``, NCCL 2.24+; src/ras/client_support.cc), as posted in
NVIDIA/nccl#1911::

    #0-0 (fa93daea854b060b) MISMATCH
      Communicator ranks have different AllGather operation counts
      30 ranks have launched up to operation 640
      2 ranks have launched up to operation 641
      Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124

and INCOMPLETE (``Missing communicator data from 1 rank`` then ``Rank 1 -- GPU 0 managed by
process 60004 on node 10.4.109.13``). RAS lists the ranks of the smaller group only, and never
names the collective or the call: a listed rank can be the one ahead (#1911), not the one stuck.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

_COMM = re.compile(r"^#\d+-\d+ \(([0-9a-f]+)\) ([A-Z, ]+)$")
_COUNT = re.compile(r"(\d+) ranks? (?:has|have) launched up to operation (\d+)")
_RANK = re.compile(r"Rank (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)")
_OPS = re.compile(r"different (\w+) operation counts")
KEYS = (b"launched up to operation", b" -- GPU ", b"operation counts", b"MISMATCH",
        b"INCOMPLETE")


@dataclass
class RasComm:
    """One communicator RAS reports on."""

    hash: str
    status: str
    at: str
    op: Optional[str] = None
    counts: list[tuple[int, int]] = field(default_factory=list)   #: (ranks, operation)
    ranks: list[tuple[int, int, int, str, str]] = field(default_factory=list)  #: r,gpu,pid,node,at

    def listed_behind(self) -> Optional[bool]:
        """Are the ranks RAS lists behind the others (True), ahead (False), or unknown?"""
        if self.status != "MISMATCH" or len(self.counts) < 2 or not self.ranks:
            return None
        listed = len(self.ranks)
        mine = [op for n, op in self.counts if n == listed]
        others = [op for n, op in self.counts if n != listed]
        if len(mine) != 1 or not others:
            return None
        return mine[0] < max(others)


class RasScanner:
    """Feed lines; ``comms`` holds what RAS said."""

    def __init__(self) -> None:
        self.comms: list[RasComm] = []

    def feed(self, line: str, at: str) -> None:
        """One line (any prefix removed)."""
        s = line.strip()
        m = _COMM.match(s)
        if m:
            self.comms.append(RasComm(m.group(1), m.group(2).split(",")[0].strip(), at))
            return
        if not self.comms:
            return
        c = self.comms[-1]
        m = _COUNT.search(s)
        if m:
            c.counts.append((int(m.group(1)), int(m.group(2))))
        m = _OPS.search(s)
        if m:
            c.op = m.group(1)
        m = _RANK.search(s)
        if m:
            c.ranks.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), at))
