"""``bench --pairwise``: launch one rank per node with the pairwise plan, then name names.

The run reuses bench's launch machinery unchanged: :func:`ncclcheck.bench.launch.run` starts
one agent per hostfile node over ssh (or one rank per node with srun for ``--launcher slurm``),
under the nodes' watchdogs, the run deadline and the monitor that stops everything on a failure.
The only difference is the worker spec's ``pairwise`` entry, which makes each rank run
:func:`ncclcheck.bench.pairrank.run_pairs` instead of a size sweep.

The hunt fits ``--budget`` with its defaults on any link: each pair is measured for a time
(``pair_s``, :data:`PAIR_S` or less so that the rounds fit the budget), at a size a short probe
of the link picks; ``-e``/``-n``/``-w`` given fix the size, the count and the warm-up instead.
Rank 0 reports each round, printed as one line (:class:`RoundLines`). When a launch fails, a
liveness check (:func:`liveness`: a short ssh command on every node) tells a dead node from a
slow one: a node that does not answer is named failed; when every node answers and no rank
died, the pairs that were running ran out of time, are reported slow
(``out_of_time``), and the hunt goes on with every node.

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
#: Seconds each pair's bandwidth is measured for (iperf measures for a time, 10 s by default).
PAIR_S = 1.0
#: The least time per pair a budget may leave; below it the budget is refused.
MIN_PAIR_S = 0.1
#: Budget seconds kept for ssh, the agents' start, torch's import and the rendezvous.
STARTUP_S = 60.0
#: A round's cost in pair times (the probe up to 2/3 of one, the measure one) and seconds on top
#: (latency, barriers, agreeing).
ROUND_PAIRS, ROUND_EXTRA_S = 2.0, 0.5
#: The probe's largest size (the bench's -e default).
PROBE_MAX_BYTES = 128 << 20
#: The collective timeout of a hunt when --timeout is not given: a pair never waits on a
#: collective longer than its time, so this bounds only a stuck or dead link.
PAIRWISE_TIMEOUT_S = 60.0
#: Seconds (beyond ssh's connect timeout) a node has to answer the liveness check.
LIVENESS_S = 15.0


def fleet_size(req: Any) -> int:
    """How many nodes the hunt runs on (hostfile, the Slurm allocation, or the pods of a
    Kubernetes job API)."""
    if req.hostfile:
        from ncclcheck.hostfile import load_hostfile

        return len(load_hostfile(req.hostfile, req.nodes))
    from ncclcheck.bench.environ import rank_env
    from ncclcheck.k8s.launcher import POD_LAUNCHERS, detect_launcher
    from ncclcheck.remote.slurm import allocation_nodes, in_allocation

    environ = dict(os.environ)
    launcher = detect_launcher(environ)
    if launcher in POD_LAUNCHERS and req.launcher != "slurm":  # one pod per node
        return int(rank_env(environ, launcher)["world_size"])
    if req.launcher == "slurm" or in_allocation(environ):
        nodes = allocation_nodes(environ)
        return len(nodes[:req.nodes] if req.nodes else nodes)
    raise BadInput("--pairwise needs nodes: --hostfile FILE, --launcher slurm inside an "
                   "allocation, or a Kubernetes job's pods (ncclcheck k8s render pairwise)")


def pair_seconds(budget_s: float, rounds: int, budget_text: str) -> float:
    """Seconds per pair so that ``rounds`` rounds fit the budget: :data:`PAIR_S`, or less.

    >>> pair_seconds(600, 7, "10m"), pair_seconds(90, 15, "90s")
    (1.0, 0.75)
    >>> pair_seconds(60, 4095, "1m")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: --budget 1m: 4095 rounds of pairs need at least 49 min (60 s to start, then 0.7 s a round); give a larger --budget or fewer --rounds
    """
    per_round = (budget_s - STARTUP_S) / max(1, rounds)
    pair_s = min(PAIR_S, (per_round - ROUND_EXTRA_S) / ROUND_PAIRS)
    if pair_s < MIN_PAIR_S:
        round_s = ROUND_PAIRS * MIN_PAIR_S + ROUND_EXTRA_S
        need = STARTUP_S + rounds * round_s
        raise BadInput(f"--budget {budget_text}: {rounds} rounds of pairs need at least "
                       f"{need / 60:.0f} min ({STARTUP_S:.0f} s to start, then {round_s:g} s a "
                       "round); give a larger --budget or fewer --rounds")
    return round(pair_s, 3)


def pairwise_options(req: Any, n: int) -> Any:
    """The bench options for the hunt: sendrecv, one rank per node, the plan, a time per pair
    (and the size, count and warm-up when ``-e``/``-n``/``-w`` were given)."""
    from ncclcheck.bench.command import bench_options
    from ncclcheck.bench.sweep import parse_budget, parse_size
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
    try:
        budget_s = parse_budget(req.budget)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    given = set(req.given)
    size = parse_size(req.max_bytes) if "max_bytes" in given else None
    shown = size or PROBE_MAX_BYTES
    opts = bench_options(dataclasses.replace(req, op="sendrecv", min_bytes=str(shown),
                                             max_bytes=str(shown)))
    planned = schedule.plan_length(n, req.rounds) + (CONFIRM_ALLOWANCE if req.rounds else 0)
    return dataclasses.replace(
        opts, op="sendrecv", procs=None, check=0, sizes=[shown] * planned, gloo_sizes=None,
        timeout=req.timeout if "timeout" in given else PAIRWISE_TIMEOUT_S,
        sweep={"min_bytes": shown, "max_bytes": shown, "step_factor": 1},
        pairwise={"rounds": req.rounds, "size_bytes": size, "max_bytes": shown,
                  "pair_s": pair_seconds(budget_s, planned, req.budget),
                  "iters": req.iters if "iters" in given else None,
                  "warmup": req.warmup if "warmup" in given else None,
                  "budget_s": budget_s, "latency_bytes": LATENCY_BYTES,
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


class RoundLines:
    """The hunt's progress: one line per round (its pairs and seconds), as tune prints per run."""

    def __init__(self, err: Any, started: float, note: str = "") -> None:
        self.err, self.started, self.note = err, started, note

    def start(self, total: int) -> None:  # noqa: D102 - bench's Progress interface
        pass

    def update(self, done: int, row: dict[str, Any]) -> None:  # noqa: D102
        pass

    def stop(self) -> None:  # noqa: D102
        pass

    def round(self, event: dict[str, Any]) -> None:
        """Rank 0 closed a round (``beat``: round, rounds, pairs, s)."""
        self.err.print(f"bench --pairwise: round {int(event['round']) + 1}/{event['rounds']}"
                       f"{self.note}: {event.get('pairs', '?')} pairs in {event.get('s', 0):.1f} s"
                       f" ({time.monotonic() - self.started:.0f} s so far)", highlight=False)


def hunt(req: Any, err: Any) -> dict[str, Any] | None:
    """Run the hunt: the ``ncclcheck/pairwise`` document (None on a non-zero rank inside a
    launcher). Printing and writing it is the command's (:func:`ncclcheck.benchcmd.run_pairwise`)."""
    from ncclcheck.pairwise.document import build

    started = time.monotonic()
    n = fleet_size(req)
    opts = pairwise_options(req, n)
    pw = opts.pairwise
    how = (f"{pw['size_bytes']} B x {pw['iters'] or 'a time'}" if pw["size_bytes"]
           else f"{pw['pair_s']:g} s per pair at a probed size")
    err.print(f"bench --pairwise: {n} nodes, "
              f"{len(opts.sizes) - (CONFIRM_ALLOWANCE if req.rounds else 0)} rounds"
              + (" (+ confirmation)" if req.rounds else "")
              + f", {how}, budget {req.budget}", highlight=False)
    if req.hostfile:
        raw, failed = hunt_over_ssh(req, opts, n, err, started)
    else:
        raw, failed = first_run(opts, None, RoundLines(err, started)), []
    if raw is None:  # a non-zero rank inside a launcher
        return None
    hosts = host_names(raw, raw.get("launch"))
    return build(raw, hosts, req.rounds, failed=failed, launch=raw.get("launch"),
                 wall_s=round(time.monotonic() - started, 2), latency_bytes=LATENCY_BYTES)


def first_run(opts: Any, watch: list | None = None,
              progress: Any = None) -> dict[str, Any] | None:
    """One launch of the hunt; rank 0's raw result."""
    from ncclcheck.bench import launch
    from ncclcheck.bench.options import Progress

    raw = launch.run(opts, progress or Progress(), watch)
    if raw is not None and not raw.get("pairwise_raw"):
        raise NcclcheckError("the ranks did not run the pairwise hunt (an older ncclcheck on "
                             "the nodes?)")
    return raw


def culprit(monitor: Any) -> int | None:
    """The node the monitor holds responsible (its most likely cause), or None."""
    ranked = sorted((f for f in monitor.failures if f.node is not None),
                    key=lambda f: f.priority)
    return ranked[0].node if ranked else None


def a_rank_died(monitor: Any) -> bool:
    """Whether a rank or agent ended on its own (killed, an error not caused by a peer, an
    agent or ssh that exited): its node failed. Otherwise only timeouts and peers going away
    were seen -- a slow or stuck pair, or a node that went silent; the liveness check decides.

    >>> from ncclcheck.bench.monitor import Failure
    >>> import types
    >>> a_rank_died(types.SimpleNamespace(failures=[Failure(3, "timed out", 1)]))
    False
    >>> a_rank_died(types.SimpleNamespace(failures=[Failure(1, "killed by signal 9", 3)]))
    True
    """
    return any(f.priority <= 2 for f in monitor.failures)


def liveness(req: Any, targets: list) -> list[int]:
    """The nodes (indices into ``targets``) that do not answer a short ssh command with the
    hunt's python (:data:`LIVENESS_S` each, all at once): dead, not slow."""
    from ncclcheck.remote.ssh import SSH, run_all

    ssh = SSH(ssh_config=req.ssh_config, connect_timeout=req.connect_timeout,
              remote_python=req.remote_python, watchdog=False)
    results = run_all(ssh, targets, [ssh.remote_python, "-c", "pass"],
                      timeout=req.connect_timeout + LIVENESS_S)
    return [i for i, t in enumerate(targets) if not results[t.label].ok]


def hunt_over_ssh(req: Any, opts: Any, n: int, err: Any,
                  started: float) -> tuple[dict[str, Any], list[int]]:
    """The hunt over ``--hostfile``. When a launch fails the liveness check runs: a node that
    does not answer, or whose rank died, is named failed and the rounds go on without it; when
    every node answers and only timeouts were seen, the pairs that were running ran out of time
    (reported slow) and the rounds go on with every node. Each new launch measures the pairs
    not measured yet, within what is left of the budget, with bench's deadlines. Returns the
    raw result in the hostfile's indices and the failed nodes."""
    from ncclcheck.bench.pairrank import pairs_from_events
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.pairwise import schedule

    targets = load_hostfile(req.hostfile, req.nodes)
    plan = schedule.plan(n, req.rounds)
    size = opts.pairwise["size_bytes"]
    budget_s = opts.pairwise["budget_s"]
    alive = list(range(n))
    failed: list[int] = []
    done: dict[tuple[int, int], dict[str, Any]] = {}
    last: dict[str, Any] | None = None
    run_opts, launches = opts, 0
    with tempfile.TemporaryDirectory(prefix="ncclcheck-pairwise-") as tmp:
        while True:
            watch: list = []
            note = f" (launch {launches + 1})" if launches else ""
            try:
                raw = first_run(run_opts, watch, RoundLines(err, started, note))
            except NcclcheckError as exc:
                monitor = watch[0] if watch and watch[0].processes else None
                node = culprit(monitor) if monitor else None
                if node is None or len(alive) <= 2:
                    raise
                launches += 1
                local = run_opts.pairwise.get("schedule")
                local_rounds = ([[tuple(p) for p in r] for r in local] if local
                                else plan)
                got = pairs_from_events(size, monitor.pair_events)
                for (a, b), pair in got.items():
                    ga, gb = alive[a], alive[b]
                    done[(ga, gb)] = {**pair, "a": ga, "b": gb}
                why = str(exc).split(" (also: ")[0][:300]
                dead = [alive[i] for i in liveness(req, [targets[g] for g in alive])]
                if not dead and a_rank_died(monitor):
                    dead = [alive[node]]
                if dead:
                    for gone in dead:
                        alive.remove(gone)
                        failed.append(gone)
                    names = ", ".join(targets[g].label for g in dead)
                    err.print(f"bench --pairwise: {names} failed ({why}); going on without "
                              f"{'them' if len(dead) > 1 else 'it'}",
                              highlight=False, soft_wrap=True, markup=False)
                else:  # every node answers, no rank died: the pairs running were too slow
                    stuck = (out_of_time(local_rounds, got, alive, run_opts.timeout)
                             if monitor.ready else {})
                    if not stuck:
                        raise
                    done.update(stuck)
                    late = ", ".join(f"{targets[a].label}-{targets[b].label}" for a, b in stuck)
                    err.print(f"bench --pairwise: every node answers; {late} ran out of time "
                              f"({why}); reported slow, going on with every node",
                              highlight=False, soft_wrap=True, markup=False)
                todo = [p for rnd in plan for p in rnd if p[0] in alive and p[1] in alive
                        and p not in done]
                if not todo or len(alive) < 2:
                    break
                left = budget_s - (time.monotonic() - started)
                if left < STARTUP_S:
                    err.print(f"bench --pairwise: {left:.0f} s of the budget left; "
                              f"{len(todo)} pairs not measured", highlight=False)
                    break
                run_opts = restart_options(opts, req.hostfile, targets, alive, todo, tmp)
                continue
            assert raw is not None
            last = raw
            for p in raw["pairs"]:
                ga, gb = alive[p["a"]], alive[p["b"]]
                done[(min(ga, gb), max(ga, gb))] = {**p, "a": min(ga, gb), "b": max(ga, gb)}
            break
    return merged(plan, done, targets, last, opts, failed, launches), failed


def out_of_time(rounds: list, got: dict, alive: list[int],
                timeout: float) -> dict[tuple[int, int], dict[str, Any]]:
    """The pairs of the first round not all of whose pairs reported (in the launch's rank
    numbers ``rounds``, ``got`` the pairs that did), as hostfile-index pairs: out of time, no
    exchange finished within the collective ``timeout`` -- their figure is None, their flag
    ``out_of_time``.

    >>> out_of_time([[(0, 1), (2, 3)], [(0, 2), (1, 3)]], {(0, 1): {}}, [0, 2, 5, 7], 60)
    {(5, 7): {'round': 0, 'a': 5, 'b': 7, 'gbps': None, 'time_us': [None, None], 'latency_us': [None, None], 'out_of_time': True, 'timeout_s': 60}}
    """
    for index, rnd in enumerate(rounds):
        missing = [(a, b) for a, b in rnd if (a, b) not in got]
        if missing:
            return {(alive[a], alive[b]): {"round": index, "a": alive[a], "b": alive[b],
                                           "gbps": None, "time_us": [None, None],
                                           "latency_us": [None, None], "out_of_time": True,
                                           "timeout_s": timeout}
                    for a, b in missing}
    return {}


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
        opts, hostfile=path, nodes=None, sizes=[opts.pairwise["max_bytes"]] * len(rounds),
        pairwise={**opts.pairwise, "schedule": [[list(p) for p in r] for r in rounds]})


def merged(plan: list, done: dict, targets: list, last: dict[str, Any] | None, opts: Any,
           failed: list[int], launches: int = 0) -> dict[str, Any]:
    """One raw result over the whole fleet: every pair measured, and every pair of the plan
    with no figure (a failed node's) as missing."""
    pairs = list(done.values())
    for index, rnd in enumerate(plan):
        pairs.extend({"round": index, "a": a, "b": b, "gbps": None, "time_us": [None, None],
                      "latency_us": [None, None]} for a, b in rnd if (a, b) not in done)
    base = dict(last or {})
    launch_info = dict(base.get("launch") or {"mode": "ssh"})
    launch_info["hosts"] = [t.label for t in targets]
    restarted = launches or len(failed)
    if restarted:
        launch_info["restarts"] = restarted
    return {**base, "pairwise_raw": True, "hosts": [t.label for t in targets],
            "size_bytes": opts.pairwise["size_bytes"],
            "rounds": plan if restarted or not base else base["rounds"],
            "confirm_rounds": [] if restarted else base.get("confirm_rounds", []),
            "pairs": sorted(pairs, key=lambda p: (p["round"], p["a"])),
            "backend": base.get("backend"), "warmup": opts.pairwise.get("warmup"),
            "iters": opts.pairwise.get("iters"),
            "pair_s": None if opts.pairwise.get("iters") else opts.pairwise.get("pair_s"),
            "launch": launch_info}
