"""One rank of ``bench --pairwise``: rounds of disjoint pairs, each pair exchanging both ways.

The worker (:mod:`ncclcheck.bench.worker`, the only module that imports torch) hands this module
``torch`` and ``torch.distributed`` after the process group is up. Every node runs one rank, and
rank ``i`` is node ``i``. The schedule is pure and deterministic
(:func:`ncclcheck.pairwise.schedule.plan`), so every rank computes the same rounds from the
world size and ``--rounds``; no rank waits for a plan.

Per round: a barrier, then each rank with a partner exchanges with it: ``latency_iters``
exchanges of ``latency_bytes`` (the small-message latency), then ``-w`` warm-up and ``-n`` timed
exchanges of ``size_bytes`` each way at once -- nccl-tests' sendrecv between two ranks (each rank
sends to its peer and receives from it, bench-method.md §1.3). The block of ``-n`` is timed as
one (:class:`ncclcheck.bench.worker.Timer`), and a pair's ``algbw = size / time`` with the time
the mean of its two ranks' (nccl-tests' ``-a 1``); for sendrecv busbw = algbw.

After the rounds every rank's figures are gathered on every rank (as JSON, see :func:`run_pairs`). With
``--rounds K`` short of all pairs, every rank then runs the same analysis on the same figures,
derives the same confirmation rounds (suspects against known-good peers, suspect links again) and
runs them. Rank 0 returns the raw result; the launcher names names
(:mod:`ncclcheck.bench.pairlaunch`).
"""

from __future__ import annotations

import socket
from typing import Any, Callable

from ncclcheck.pairwise import analysis, schedule

Emit = Callable[[dict], None]


def partner(rnd: list[tuple[int, int]], rank: int) -> int | None:
    """This rank's peer in a round, or None when it rests.

    >>> partner([(0, 3), (1, 2)], 2), partner([(1, 2)], 0)
    (1, None)
    """
    for a, b in rnd:
        if rank == a:
            return b
        if rank == b:
            return a
    return None


def pair_figures(size: int, rounds: list[list[tuple[int, int]]],
                 per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every pair's figures from every rank's own records: ``gbps`` (algbw from the mean of
    the two ranks' times), ``time_us`` and ``latency_us`` per end; ``gbps`` None when an end
    has no figure.

    >>> recs = [[{"round": 0, "peer": 1, "time_us": 1000.0, "latency_us": 50.0}],
    ...         [{"round": 0, "peer": 0, "time_us": 3000.0, "latency_us": 70.0}]]
    >>> pair_figures(4_000_000, [[(0, 1)]], recs)[0]["gbps"]
    2.0
    """
    mine = {(rank, r["round"]): r for rank, records in enumerate(per_rank) for r in records}
    out = []
    for index, rnd in enumerate(rounds):
        for a, b in rnd:
            ra, rb = mine.get((a, index)), mine.get((b, index))
            times = [x.get("time_us") if x else None for x in (ra, rb)]
            lats = [x.get("latency_us") if x else None for x in (ra, rb)]
            ok = all(isinstance(t, (int, float)) and t > 0 for t in times)
            mean_us = sum(times) / 2 if ok else None  # type: ignore[arg-type]
            out.append({"round": index, "a": a, "b": b,
                        "gbps": size / 1e9 / (mean_us / 1e6) if mean_us else None,
                        "time_us": times, "latency_us": lats})
    return out


def pairs_from_events(size: int, events: list[dict[str, Any]]) -> dict[tuple[int, int], dict]:
    """Pairs both of whose ranks reported a figure (``pair`` events), by ``(low, high)`` rank.

    >>> ev = [{"rank": 0, "peer": 1, "round": 2, "time_us": 1000.0, "latency_us": 5.0},
    ...       {"rank": 1, "peer": 0, "round": 2, "time_us": 1000.0, "latency_us": 6.0},
    ...       {"rank": 2, "peer": 3, "round": 2, "time_us": 1000.0, "latency_us": 6.0}]
    >>> pairs_from_events(1_000_000, ev)
    {(0, 1): {'round': 2, 'a': 0, 'b': 1, 'gbps': 1.0, 'time_us': [1000.0, 1000.0], 'latency_us': [5.0, 6.0]}}
    """
    ends: dict[tuple[int, int, int], dict[int, dict]] = {}
    for e in events:
        a, b = sorted((int(e["rank"]), int(e["peer"])))
        ends.setdefault((int(e["round"]), a, b), {})[int(e["rank"])] = e
    out: dict[tuple[int, int], dict] = {}
    for (index, a, b), got in sorted(ends.items()):
        if a in got and b in got:
            times = [got[a]["time_us"], got[b]["time_us"]]
            mean_us = sum(times) / 2
            out[(a, b)] = {"round": index, "a": a, "b": b,
                           "gbps": size / 1e9 / (mean_us / 1e6) if mean_us > 0 else None,
                           "time_us": times,
                           "latency_us": [got[a].get("latency_us"), got[b].get("latency_us")]}
    return out


class Exchanger:
    """Both-ways exchanges with one peer: grouped (``batch_isend_irecv``) on NCCL, where an
    ungrouped send and receive on both sides would wait for each other; ``isend``/``irecv``
    on gloo."""

    def __init__(self, torch: Any, dist: Any, cuda: bool, device: Any, size: int,
                 small: int) -> None:
        self.dist, self.cuda = dist, cuda
        self.big = [torch.ones(max(1, size // 4), dtype=torch.float32, device=device),
                    torch.empty(max(1, size // 4), dtype=torch.float32, device=device)]
        self.small = [torch.ones(max(1, small // 4), dtype=torch.float32, device=device),
                      torch.empty(max(1, small // 4), dtype=torch.float32, device=device)]

    def fn(self, peer: int, big: bool) -> Callable[[], None]:
        """One exchange with ``peer`` (send and receive at once)."""
        send, recv = self.big if big else self.small
        dist = self.dist
        if self.cuda:
            ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]

            def grouped() -> None:
                for work in dist.batch_isend_irecv(ops):
                    work.wait()
            return grouped

        def plain() -> None:
            s, r = dist.isend(send, peer), dist.irecv(recv, peer)
            s.wait()
            r.wait()
        return plain


def measure_rounds(rounds: list[list[tuple[int, int]]], first: int, rank: int, spec: dict,
                   ex: Exchanger, timer: Any, barrier: Callable[[], None],
                   emit: Emit) -> list[dict[str, Any]]:
    """This rank's records for ``rounds`` (numbered from ``first``)."""
    pw = spec["pairwise"]
    records = []
    for offset, rnd in enumerate(rounds):
        index = first + offset
        peer = partner(rnd, rank)
        barrier()
        if peer is not None:
            small = ex.fn(peer, big=False)
            small()
            latency = timer.time_us(small, int(pw.get("latency_iters", 10)))
            big = ex.fn(peer, big=True)
            for _ in range(int(spec["warmup"])):
                big()
            timer.sync()
            records.append({"round": index, "peer": peer, "latency_us": latency,
                            "time_us": timer.time_us(big, int(spec["iters"]))})
            emit({"ev": "pair", "rank": rank, **records[-1]})  # kept if a node fails later
        if rank == 0:
            emit({"ev": "beat", "round": index, "rounds": first + len(rounds)})
    return records


def run_pairs(spec: dict[str, Any], torch: Any, dist: Any, rank: int, world: int, cuda: bool,
              device: Any, timer: Any, barrier: Callable[[], None],
              emit: Emit, gather: Callable[[Any], list[Any]]) -> dict[str, Any] | None:
    """The rounds (and any confirmation rounds) as rank ``rank``; rank 0 returns the raw result.

    ``gather`` is :func:`ncclcheck.bench.worker.all_gather_json` (not ``all_gather_object``, which
    needs numpy, not a dependency of torch's wheels).
    """
    pw = spec["pairwise"]
    size = int(pw["size_bytes"])
    given = pw.get("schedule")  # a restart after a failed node: the pairs still to measure
    rounds = ([[(int(a), int(b)) for a, b in rnd] for rnd in given] if given
              else schedule.plan(world, pw.get("rounds"), int(pw.get("seed", 0))))
    ex = Exchanger(torch, dist, cuda, device, size, int(pw.get("latency_bytes", 8)))
    barrier()
    if rank == 0:
        emit({"ev": "ready", "world_size": world, "rounds": len(rounds)})
    mine = measure_rounds(rounds, 0, rank, spec, ex, timer, barrier, emit)
    me = {"host": socket.gethostname(), "records": mine}
    everyone: list[Any] = gather(me)
    hosts = [e["host"] for e in everyone]
    extra: list[list[tuple[int, int]]] = []
    if not given and pw.get("rounds") is not None and len(rounds) < schedule.round_count(world):
        pairs = pair_figures(size, rounds, [e["records"] for e in everyone])
        matrix = analysis.matrix_from_pairs(world, [(p["a"], p["b"], p["gbps"]) for p in pairs])
        labels = [f"{i}" for i in range(world)]
        verdict = analysis.analyse(labels, matrix)
        suspects = [int(v["host"]) for v in verdict["slow_nodes"]]
        links = [(int(v["hosts"][0]), int(v["hosts"][1])) for v in verdict["slow_links"]]
        good = [i for i, node in enumerate(verdict["nodes"]) if node["status"] == "ok"]
        met = {p for rnd in rounds for p in rnd}
        extra = schedule.confirm_rounds(suspects, links, good, met)
        if extra:
            more = measure_rounds(extra, len(rounds), rank, spec, ex, timer, barrier, emit)
            again: list[Any] = gather(more)
            for entry, records in zip(everyone, again):
                entry["records"] = entry["records"] + records
    if rank != 0:
        return None
    return {"pairwise_raw": True, "world_size": world, "hosts": hosts, "size_bytes": size,
            "rounds": [[list(p) for p in r] for r in rounds],
            "confirm_rounds": [[list(p) for p in r] for r in extra],
            "pairs": pair_figures(size, rounds + extra, [e["records"] for e in everyone]),
            "backend": spec["backend"], "warmup": spec["warmup"], "iters": spec["iters"]}
