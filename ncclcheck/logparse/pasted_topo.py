r"""Pasted ``nvidia-smi topo -m`` matrices, read with the ``gpu`` probe's own parser.

A matrix starts at its header row (``GPU0  GPU1 ... NIC0 ... CPU Affinity``) and runs until a
line that belongs to no matrix; each block is handed to
:func:`ncclcheck.probes.gpu.smi.parse_topo_matrix`, which takes tab-separated and space-padded copies,
cut rows and the ``NIC Legend``. Recorded (NVIDIA/nccl#1591, cut after GPU2 as pasted)::

            GPU0    GPU1    GPU2  ...  NIC0    NIC1  ...  CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    NV18  ...  PIX     NODE  ...  0-31,64-95      0               N/A
    GPU1    NV18     X      NV18  ...  NODE    NODE  ...  0-31,64-95      0               N/A
"""

from __future__ import annotations

import re
from typing import Any


MAX_LINES = 400            #: lines kept per matrix (256 GPUs+NICs and a legend fit)
MAX_MATRICES = 64
#: the byte strings the prefilter must look for, and how many lines after each it must keep.
KEYS_FOLLOW = {b"GPU0": 80}

_ROW = re.compile(r"^(?:GPU\d{1,3}|NIC\d{1,3}|mlx\w+|\s*$|Legend:|NIC Legend:|\s*NIC\d{1,3}:|\s+[A-Z#]{1,4}\d?\s+=)")


class PastedTopo:
    """``topo -m`` matrices read so far, per host (``pasted`` where no prompt says)."""

    def __init__(self) -> None:
        self.matrices: list[tuple[str, dict[str, Any], dict[str, Any]]] = []   # host, topo, ev
        self.kinds: dict[str, dict[str, Any]] = {}
        self._lines: list[str] = []
        self._host = "pasted"
        self._ev: dict[str, Any] = {}

    def set_host(self, host: str) -> None:
        """A shell prompt named the host the next output comes from."""
        self.close()
        self._host = host

    def feed(self, line: str, ev: dict[str, Any]) -> bool:
        """Take one line (raw, indentation kept: the matrix needs its columns)."""
        text = line.rstrip("\r\n")
        words = text.split()
        if words[:1] == ["GPU0"] and words[1:2] != ["X"] and ("GPU1" in words or "NIC0" in words
                                                             or "CPU" in words):
            self.close()
            self._lines, self._ev = [text.strip(" ")], ev
            self.kinds.setdefault("nvidia-smi topo -m", ev)
            return True
        if not self._lines:
            return False
        if len(self._lines) < MAX_LINES and _ROW.match(text.strip(" ") if text.strip() else text):
            self._lines.append(text.strip(" "))
            return True
        self.close()
        return False

    def close(self) -> None:
        """End the matrix being read (at a foreign line, a new prompt, or the end of input)."""
        if self._lines and len(self.matrices) < MAX_MATRICES:
            from ncclcheck.probes.gpu.smi import parse_topo_matrix  # only when a matrix is pasted

            topo = parse_topo_matrix("\n".join(self._lines))
            if topo["labels"]:
                self.matrices.append((self._host, topo, self._ev))
        self._lines = []
