"""The probe registry: section name -> collector, in the order they run and print.

Each probe module (or package: :mod:`~ncclcheck.probes.nccl`, :mod:`~ncclcheck.probes.network`,
:mod:`~ncclcheck.probes.gpu`, one module per job inside) has pure ``parse_*`` functions over text
and one thin ``collect(host, errors) -> dict`` that reads through the
:class:`~ncclcheck.host.protocol.Host` only. ``collect`` raises
:class:`~ncclcheck.host.protocol.Unavailable` when the subsystem is absent, appends non-fatal
problems to ``errors``, and may raise anything else: :mod:`ncclcheck.probe` turns that into the
section's ``error`` status and runs the next probe.
"""

from __future__ import annotations

from typing import Any, Callable

from ncclcheck.probes import cuda, env, gpu, host, ib, limits, nccl, netpath, network, platform

Collector = Callable[[Any, list], dict]

#: The sections of a facts document. Explicit and ordered; no discovery.
PROBES: dict[str, Collector] = {
    "host": host.collect,
    "gpu": gpu.collect,
    "cuda": cuda.collect,
    "nccl": nccl.collect,
    "network": network.collect,
    "ib": ib.collect,
    "limits": limits.collect,
    "env": env.collect,
    "netpath": netpath.collect,
    "platform": platform.collect,
}
