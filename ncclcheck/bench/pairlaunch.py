"""``bench --pairwise``: launch one rank per node with the pairwise plan, then name names.

The run reuses bench's launch machinery unchanged: :func:`ncclcheck.bench.launch.run` starts
one agent per hostfile node over ssh (or one rank per node with srun for ``--launcher slurm``),
under the nodes' watchdogs, the run deadline and the monitor that stops everything on a failure.
The only difference is the worker spec's ``pairwise`` entry, which makes each rank run
:func:`ncclcheck.bench.pairrank.run_pairs` instead of a size sweep. The size is ``-e`` (one size,
large enough to fill the link), ``-w``/``-n`` the warm-up and timed exchanges per pair.

Rank 0's raw result becomes the ``ncclcheck/pairwise`` document
(:mod:`ncclcheck.pairwise.document`), named by the hostfile's labels in rank order.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from ncclcheck.errors import BadInput, NcclcheckError

#: Small-message latency: bytes each way, and exchanges timed.
LATENCY_BYTES = 8
LATENCY_ITERS = 10
#: Confirmation rounds allowed for in the run deadline on top of the schedule's.
CONFIRM_ALLOWANCE = 8


def fleet_size(req: Any) -> int:
    """How many nodes the hunt runs on (hostfile, or the Slurm allocation)."""
    if req.hostfile:
        from ncclcheck.hostfile import load_hostfile

        return len(load_hostfile(req.hostfile, req.nodes))
    from ncclcheck.slurm import allocation_nodes, in_allocation

    environ = dict(os.environ)
    if req.launcher == "slurm" or in_allocation(environ):
        nodes = allocation_nodes(environ)
        return len(nodes[:req.nodes] if req.nodes else nodes)
    raise BadInput("--pairwise needs nodes: --hostfile FILE, or --launcher slurm inside an "
                   "allocation")


def pairwise_options(req: Any, n: int) -> Any:
    """The bench options for the hunt: sendrecv at ``-e``, one rank per node, the plan."""
    from ncclcheck.bench.command import bench_options
    from ncclcheck.bench.sweep import parse_size
    from ncclcheck.pairwise import schedule

    if req.compare or req.import_path:
        raise BadInput("--pairwise cannot be combined with --compare or --import")
    if req.op not in (None, "sendrecv"):
        raise BadInput(f"--pairwise measures sendrecv between pairs; drop --op {req.op}")
    if req.procs not in (None, 1):
        raise BadInput("--pairwise runs one rank per node; drop --procs")
    if n < 2:
        raise BadInput(f"--pairwise needs at least 2 nodes (have {n})")
    if req.rounds is not None and req.rounds < 1:
        raise BadInput("--rounds must be at least 1")
    size = parse_size(req.max_bytes)
    opts = bench_options(dataclasses.replace(req, op="sendrecv", min_bytes=req.max_bytes))
    planned = len(schedule.plan(n, req.rounds)) + (CONFIRM_ALLOWANCE if req.rounds else 0)
    return dataclasses.replace(
        opts, op="sendrecv", procs=None, check=0, sizes=[size] * planned,
        sweep={"min_bytes": size, "max_bytes": size, "step_factor": 1},
        pairwise={"rounds": req.rounds, "size_bytes": size, "latency_bytes": LATENCY_BYTES,
                  "latency_iters": LATENCY_ITERS, "seed": 0})


def host_names(raw: dict[str, Any], launch_info: dict[str, Any] | None) -> list[str]:
    """Rank ``i``'s name: the hostfile label over ssh, else the host's own name.

    >>> host_names({"hosts": ["a", "b"]}, {"hosts": ["node1", "node2"]})
    ['node1', 'node2']
    >>> host_names({"hosts": ["a", "b"]}, None)
    ['a', 'b']
    """
    labels = (launch_info or {}).get("hosts")
    if isinstance(labels, list) and len(labels) == len(raw["hosts"]):
        return [str(x) for x in labels]
    return [str(h) for h in raw["hosts"]]


def run_pairwise(req: Any, out: Any, err: Any) -> None:
    """Run the hunt, then print and write the document (as bench's outputs)."""
    from ncclcheck.bench import launch
    from ncclcheck.bench.command import progress_for, write_outputs
    from ncclcheck.pairwise.document import build
    from ncclcheck.render.pairwise import render_pairwise

    started = time.monotonic()
    n = fleet_size(req)
    opts = pairwise_options(req, n)
    err.print(f"bench --pairwise: {n} nodes, "
              f"{len(opts.sizes) - (CONFIRM_ALLOWANCE if req.rounds else 0)} rounds"
              + (" (+ confirmation)" if req.rounds else ""), highlight=False)
    raw = launch.run(opts, progress_for(out, True))
    if raw is None:  # a non-zero rank inside a launcher
        return
    if not raw.get("pairwise_raw"):
        raise NcclcheckError("the ranks did not run the pairwise hunt (an older ncclcheck on "
                             "the nodes?)")
    hosts = host_names(raw, raw.get("launch"))
    doc = build(raw, hosts, req.rounds, launch=raw.get("launch"),
                wall_s=round(time.monotonic() - started, 2), latency_bytes=LATENCY_BYTES)
    write_outputs(doc, req, render_pairwise(doc), err)
