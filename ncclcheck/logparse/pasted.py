"""Command output pasted into a log or a bug report, recognised line by line in the same run.

:class:`Pasted` hands each line that is not an NCCL line to the readers of each kind:
:mod:`~ncclcheck.logparse.pasted_ib` (``ibstat``, ``ibstatus``, ``ibv_devinfo``, ``show_gids``)
and :mod:`~ncclcheck.logparse.pasted_ip` (``ip addr``, ``ip -br addr``, ``ifconfig``) and :mod:`~ncclcheck.logparse.pasted_topo` (``nvidia-smi topo
-m``) and :mod:`~ncclcheck.logparse.pasted_nccltests` (nccl-tests tables). A shell prompt
(``root@node2:~# ...``) names the host the output after it comes from, for all of them.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.logparse import pasted_ib, pasted_ifconfig, pasted_ip, pasted_nccltests, pasted_topo
from ncclcheck.logparse.pasted_ib import PastedIb, clean
from ncclcheck.logparse.pasted_ip import PastedIp
from ncclcheck.logparse.pasted_nccltests import PastedNcclTests
from ncclcheck.logparse.pasted_topo import PastedTopo

#: what the prefilter must look for (and how many lines after each to keep) for any kind.
KEYS_FOLLOW: dict[bytes, int] = {**pasted_ib.KEYS_FOLLOW, **pasted_ip.KEYS_FOLLOW,
                                  **pasted_ifconfig.KEYS_FOLLOW,
                                  **pasted_topo.KEYS_FOLLOW, **pasted_nccltests.KEYS_FOLLOW}


class Pasted:
    """Every kind of pasted output read so far."""

    def __init__(self) -> None:
        self.ib = PastedIb()
        self.ip = PastedIp()
        self.topo = PastedTopo()
        self.tests = PastedNcclTests()

    @property
    def kinds(self) -> dict[str, dict[str, Any]]:
        """command -> the first line that showed it."""
        return {**self.ib.kinds, **self.ip.kinds, **self.topo.kinds, **self.tests.kinds}

    def feed_nccl(self, line: str, ev: dict[str, Any]) -> None:
        """An NCCL line: only an nccl-tests table being read takes it."""
        self.tests.feed(line, ev)

    def feed(self, line: str, ev: dict[str, Any]) -> None:
        """Take one decoded line (not an NCCL line)."""
        if self.tests.feed(line, ev):
            return
        host = self.ib.host
        if self.topo.feed(line, ev):
            return
        if self.ib.feed(line, ev):
            return
        if self.ib.host != host:
            self.ip.set_host(self.ib.host)
            self.topo.set_host(self.ib.host)
        text = clean(line)
        if text:
            self.ip.feed(text, ev)

    def close(self) -> None:
        """The input ended: finish what was being read."""
        self.topo.close()
        self.tests.close()

    def document(self) -> dict[str, Any]:
        """What the diagnosis shows under ``pasted``: the kinds and the facts read."""
        out: dict[str, Any] = {"kinds": sorted(self.kinds)}
        if self.ib.hosts:
            out["ib_devices"] = self.ib.devices()
        if self.ip.hosts:
            out["network_interfaces"] = {f["hostname"]: f["sections"]["network"]["data"]["interfaces"]
                                         for f in self.ip.facts()}
        if self.topo.matrices:
            out["gpu_topology"] = [{"host": h, **t} for h, t, _ in self.topo.matrices]
        if self.tests.tables:
            out["nccl_tests"] = [{k: t[k] for k in ("op", "nccl_version", "ranks", "rows",
                                                    "out_of_bounds", "avg_busbw_gbps")}
                                 for t, _ in self.tests.tables]
        return out
