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
import tempfile
import time
from typing import Any

from ncclcheck.errors import BadInput, NcclcheckError

#: Small-message latency: bytes each way, and exchanges timed.
LATENCY_BYTES = 8
LATENCY_ITERS = 10
#: Confirmation rounds allowed for in the run deadline on top of the schedule's.
CONFIRM_ALLOWANCE = 8


def fleet_size(req: Any) -> int:
    """How many nodes the hunt runs on (hostfile, the Slurm allocation, or the pods of a
    Kubernetes job API)."""
    if req.hostfile:
        from ncclcheck.hostfile import load_hostfile

        return len(load_hostfile(req.hostfile, req.nodes))
    from ncclcheck.bench.environ import POD_LAUNCHERS, detect_launcher, rank_env
    from ncclcheck.slurm import allocation_nodes, in_allocation

    environ = dict(os.environ)
    launcher = detect_launcher(environ)
    if launcher in POD_LAUNCHERS and req.launcher != "slurm":  # one pod per node
        return int(rank_env(environ, launcher)["world_size"])
    if req.launcher == "slurm" or in_allocation(environ):
        nodes = allocation_nodes(environ)
        return len(nodes[:req.nodes] if req.nodes else nodes)
    raise BadInput("--pairwise needs nodes: --hostfile FILE, --launcher slurm inside an "
                   "allocation, or a Kubernetes job's pods (ncclcheck k8s render pairwise)")


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


def hunt(req: Any, err: Any) -> dict[str, Any] | None:
    """Run the hunt: the ``ncclcheck/pairwise`` document (None on a non-zero rank inside a
    launcher). Printing and writing it is the command's (:func:`ncclcheck.benchcmd.run_pairwise`)."""
    from ncclcheck.pairwise.document import build

    started = time.monotonic()
    n = fleet_size(req)
    opts = pairwise_options(req, n)
    err.print(f"bench --pairwise: {n} nodes, "
              f"{len(opts.sizes) - (CONFIRM_ALLOWANCE if req.rounds else 0)} rounds"
              + (" (+ confirmation)" if req.rounds else ""), highlight=False)
    if req.hostfile:
        raw, failed = hunt_over_ssh(req, opts, n, err)
    else:
        raw, failed = first_run(opts), []
    if raw is None:  # a non-zero rank inside a launcher
        return None
    hosts = host_names(raw, raw.get("launch"))
    return build(raw, hosts, req.rounds, failed=failed, launch=raw.get("launch"),
                 wall_s=round(time.monotonic() - started, 2), latency_bytes=LATENCY_BYTES)


def first_run(opts: Any, watch: list | None = None) -> dict[str, Any] | None:
    """One launch of the hunt; rank 0's raw result."""
    from ncclcheck.bench import launch
    from ncclcheck.bench.launch import Progress

    raw = launch.run(opts, Progress(), watch)
    if raw is not None and not raw.get("pairwise_raw"):
        raise NcclcheckError("the ranks did not run the pairwise hunt (an older ncclcheck on "
                             "the nodes?)")
    return raw


def culprit(monitor: Any) -> int | None:
    """The node the monitor holds responsible (its most likely cause), or None."""
    ranked = sorted((f for f in monitor.failures if f.node is not None),
                    key=lambda f: f.priority)
    return ranked[0].node if ranked else None


def hunt_over_ssh(req: Any, opts: Any, n: int, err: Any) -> tuple[dict[str, Any], list[int]]:
    """The hunt over ``--hostfile``: a node that fails mid-hunt is named failed and the rounds
    go on without it -- a new launch on the nodes left, for the pairs not measured yet (each
    launch keeps bench's deadlines and stops everything it started). Returns the raw result in
    the hostfile's indices and the failed nodes."""
    from ncclcheck.bench.pairrank import pairs_from_events
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.pairwise import schedule

    targets = load_hostfile(req.hostfile, req.nodes)
    plan = schedule.plan(n, req.rounds)
    size = opts.pairwise["size_bytes"]
    alive = list(range(n))
    failed: list[int] = []
    done: dict[tuple[int, int], dict[str, Any]] = {}
    last: dict[str, Any] | None = None
    run_opts = opts
    with tempfile.TemporaryDirectory(prefix="ncclcheck-pairwise-") as tmp:
        while True:
            watch: list = []
            try:
                raw = first_run(run_opts, watch)
            except NcclcheckError as exc:
                node = culprit(watch[0]) if watch and watch[0].processes else None
                if node is None or len(alive) <= 2:
                    raise
                for (a, b), pair in pairs_from_events(size, watch[0].pair_events).items():
                    ga, gb = alive[a], alive[b]
                    done[(ga, gb)] = {**pair, "a": ga, "b": gb}
                gone = alive.pop(node)
                failed.append(gone)
                why = str(exc).split(" (also: ")[0][:300]
                err.print(f"bench --pairwise: {targets[gone].label} failed ({why}); going on "
                          f"without it", highlight=False, soft_wrap=True, markup=False)
                todo = [p for rnd in plan for p in rnd if p[0] in alive and p[1] in alive
                        and p not in done]
                if not todo:
                    break
                run_opts = restart_options(opts, req.hostfile, targets, alive, todo, tmp)
                continue
            assert raw is not None
            last = raw
            index = alive if failed else list(range(n))
            for p in raw["pairs"]:
                ga, gb = index[p["a"]], index[p["b"]]
                done[(min(ga, gb), max(ga, gb))] = {**p, "a": min(ga, gb), "b": max(ga, gb)}
            break
    return merged(plan, done, targets, last, opts, failed), failed


def restart_options(opts: Any, hostfile: str, targets: list, alive: list[int],
                    todo: list[tuple[int, int]], folder: str) -> Any:
    """Options for a launch on the ``alive`` nodes (a hostfile of their own lines) that
    measures the ``todo`` pairs, packed into rounds, in the new launch's rank numbers."""
    from ncclcheck.pairwise import schedule

    lines = open(hostfile, encoding="utf-8").read().splitlines()
    path = os.path.join(folder, f"hosts.{len(alive)}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(lines[targets[g].line - 1] + "\n" for g in alive))
    local = {g: i for i, g in enumerate(alive)}
    rounds = schedule.pack([(local[a], local[b]) for a, b in todo])
    return dataclasses.replace(
        opts, hostfile=path, nodes=None, sizes=[opts.pairwise["size_bytes"]] * len(rounds),
        pairwise={**opts.pairwise, "schedule": [[list(p) for p in r] for r in rounds]})


def merged(plan: list, done: dict, targets: list, last: dict[str, Any] | None, opts: Any,
           failed: list[int]) -> dict[str, Any]:
    """One raw result over the whole fleet: every pair measured, and every pair of the plan
    with no figure (a failed node's) as missing."""
    pairs = list(done.values())
    for index, rnd in enumerate(plan):
        pairs.extend({"round": index, "a": a, "b": b, "gbps": None, "time_us": [None, None],
                      "latency_us": [None, None]} for a, b in rnd if (a, b) not in done)
    base = dict(last or {})
    launch_info = dict(base.get("launch") or {"mode": "ssh"})
    launch_info["hosts"] = [t.label for t in targets]
    if failed:
        launch_info["restarts"] = len(failed)
    return {**base, "pairwise_raw": True, "hosts": [t.label for t in targets],
            "size_bytes": opts.pairwise["size_bytes"],
            "rounds": plan if failed or not base else base["rounds"],
            "confirm_rounds": [] if failed else base.get("confirm_rounds", []),
            "pairs": sorted(pairs, key=lambda p: (p["round"], p["a"])),
            "backend": base.get("backend"), "warmup": opts.warmup, "iters": opts.iters,
            "launch": launch_info}
