"""What ``ncclcheck bench`` was asked to do (:class:`BenchOptions`), the limits the launcher's
watch derives from it (:func:`stall_limit`, :func:`run_deadline`), and the no-op
:class:`Progress`; shared by :mod:`~ncclcheck.bench.launch` and :mod:`~ncclcheck.bench.monitor`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from typing import Any


INSTALL_HINT = ("torch is not installed; pip install torch (in ncclcheck's source folder: "
                "pip install '.[bench]')")
STALL_MARGIN_S = 10.0
FAILURE_GRACE_S = 2.0
#: Seconds the launcher waits for the nodes' watchdogs to stop their agents and ranks.
STOP_WAIT_S = 6.0
#: Messages that say a rank saw a peer go away: a consequence, not the cause.
CONSEQUENCE_RE = re.compile(r"connection (closed|reset)|closed by peer|broken pipe|"
                            r"connection refused|end of file|socket.*closed|timed out|"
                            r"timeout|peer|ECONNRESET|EPIPE|their own errors say why", re.I)


@dataclasses.dataclass
class BenchOptions:
    """Everything ``ncclcheck bench`` was asked to do (the CLI fills it)."""

    op: str = "all_reduce"
    dtype: str = "float"
    sizes: list[int] = dataclasses.field(default_factory=lambda: [8])
    #: the sizes when the backend is gloo (no ``-e`` given: the sweep ends at 8 MiB there)
    gloo_sizes: list[int] | None = None
    warmup: int = 5
    iters: int = 20
    check: int = 1
    backend: str = "auto"
    procs: int | None = None
    timeout: float = 300.0
    candidate_env: dict[str, str] = dataclasses.field(default_factory=dict)
    nodes: int | None = None
    hostfile: str | None = None
    ssh_config: str | None = None
    remote_python: str | None = None
    master_addr: str | None = None
    master_port: int | None = None
    connect_timeout: float = 10.0
    nccl_log_dir: str | None = None
    link_rate_gbps: float | None = None
    average: str = "mean"
    sweep: dict[str, Any] | None = None
    launcher: str | None = None  #: "ssh", "slurm", or None: slurm inside an allocation
    pairwise: dict[str, Any] | None = None  #: bench --pairwise (ncclcheck.bench.pairlaunch)
    #: a caller's cap on :func:`run_deadline` (tune: what is left of its --budget), or None
    deadline_s: float | None = None

    def worker_spec(self, backend: str) -> dict[str, Any]:
        """What each rank needs to run the sweep."""
        sizes, sweep = list(self.sizes), self.sweep
        if backend == "gloo" and self.gloo_sizes:
            sizes = list(self.gloo_sizes)
            sweep = {**(sweep or {}), "max_bytes": sizes[-1]} if sweep else sweep
        return {"op": self.op, "dtype": self.dtype, "sizes": sizes,
                "warmup": self.warmup, "iters": self.iters, "check": self.check,
                "backend": backend, "timeout_s": self.timeout, "average": self.average,
                "sweep": sweep, "candidate_env": dict(self.candidate_env),
                "link_rate_gbps": self.link_rate_gbps, "pairwise": self.pairwise}


def torch_available() -> bool:
    """Whether ``import torch`` would find torch here (without importing it)."""
    if "torch" in sys.modules and sys.modules["torch"] is None:
        return False
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


class Progress:
    """Receives progress; the CLI passes a rich progress bar on a TTY, else this no-op."""

    def start(self, total: int) -> None:  # noqa: D102
        pass

    def update(self, done: int, row: dict[str, Any]) -> None:  # noqa: D102
        pass

    def round(self, event: dict[str, Any]) -> None:
        """``bench --pairwise``: rank 0 closed a round (its ``beat`` event)."""

    def stop(self) -> None:  # noqa: D102
        pass




def ops_between_beats(opts: BenchOptions) -> int:
    """Collectives a rank may run between two progress events: one placement's warm-up and
    timed block and its barrier, plus the gather and the ``-c`` check that follow a size.

    ``--timeout`` bounds each collective (torch.distributed's timeout), so a healthy block of
    many ops may take far longer than ``--timeout``; the launcher's watch allows for that.

    >>> ops_between_beats(BenchOptions(warmup=5, iters=20))
    34
    """
    return opts.warmup + opts.iters + 1 + 8


def stall_limit(opts: BenchOptions) -> float:
    """Seconds without any event after which the launcher gives the sweep up (a backstop: a
    stuck collective fails on its own after ``--timeout``)."""
    return opts.timeout * ops_between_beats(opts) + STALL_MARGIN_S


def run_deadline(opts: BenchOptions) -> float:
    """Seconds after which the remote watchdogs stop an agent no matter what (a backstop), or
    the caller's ``deadline_s`` when that is sooner.

    >>> opts = BenchOptions(timeout=10, warmup=1, iters=4, sizes=[1 << 20, 2 << 20])
    >>> run_deadline(opts), run_deadline(dataclasses.replace(opts, deadline_s=12.5))
    (840.0, 12.5)
    """
    own = (stall_limit(opts) * (2 * len(opts.sizes) + 1) + 2 * opts.timeout
           + opts.connect_timeout + 60)
    return own if opts.deadline_s is None else min(own, opts.deadline_s)
