"""The failure signatures ``ncclcheck diagnose`` knows, one small module per family.

Each module exports ``SIGNATURES`` (matched line by line) and/or ``DERIVED`` (raised by the whole-log
checks in :mod:`ncclcheck.judge.derived`). Ids reuse the rules engine's vocabulary where the
meaning is the same (``limits-shm-too-small``, ``net-socket-ifname``, ...); the others start with
``log-``. Every signature cites NCCL's docs, source or a public issue.
"""

from __future__ import annotations

from ncclcheck.signatures import (
                                  connection,
                                  cuda,
                                  diag,
                                  gpu,
                                  ib,
                                  init,
                                  interface,
                                  launcher,
                                  nccltests,
                                  plugin,
                                  ras,
                                  rdma,
                                  shm,
                                  torch,
                                  version,
)
from ncclcheck.signatures.base import Signature
from ncclcheck.signatures.dispatch import Dispatch

_FAMILIES = (shm, interface, rdma, plugin, ib, connection, gpu, version, cuda, torch, launcher,
             init, nccltests, diag, ras)

#: signatures matched against log lines, in reporting order.
LINE_SIGNATURES: tuple[Signature, ...] = tuple(
    s for fam in _FAMILIES for s in getattr(fam, "SIGNATURES", ()))
#: signatures only raised by whole-log checks.
DERIVED_SIGNATURES: tuple[Signature, ...] = tuple(
    s for fam in _FAMILIES for s in getattr(fam, "DERIVED", ()))
#: id -> signature (line signatures win where an id is both).
BY_ID: dict[str, Signature] = {s.id: s for s in DERIVED_SIGNATURES + LINE_SIGNATURES}
#: signatures that also look at NCCL INFO lines.
INFO_SIGNATURES = tuple(s for s in LINE_SIGNATURES if s.scope == "info")
#: how the INFO messages those signatures look at begin (a cheap gate on the hot path).
INFO_STARTS: tuple[str, ...] = tuple(p for s in INFO_SIGNATURES for p in s.info_starts)
#: text -> the line signatures (resp. INFO-scope ones) that can match it (one regex search).
LINE_DISPATCH = Dispatch(LINE_SIGNATURES)
INFO_DISPATCH = Dispatch(INFO_SIGNATURES)

__all__ = ["BY_ID", "DERIVED_SIGNATURES", "INFO_DISPATCH", "INFO_SIGNATURES", "INFO_STARTS",
           "LINE_DISPATCH", "LINE_SIGNATURES"]
