"""One rank of ``bench --pairwise``: rounds of disjoint pairs, each pair exchanging both ways.

The worker (:mod:`ncclcheck.bench.worker`, the only module that imports torch) hands this module
``torch`` and ``torch.distributed`` after the process group is up. Every node runs one rank, and
rank ``i`` is node ``i``. The schedule is pure and deterministic
(:func:`ncclcheck.pairwise.schedule.plan`), so every rank computes the same rounds from the
world size and ``--rounds``; no rank waits for a plan.

Per round: a barrier, then each rank with a partner exchanges with it: ``latency_iters``
exchanges of ``latency_bytes`` (the small-message latency), then the bandwidth, measured for a
time as iperf does rather than a fixed size x count: a short probe doubles the size by 4 from
:data:`PROBE_MIN_BYTES` until one exchange takes an eighth of the pair's time (``pair_s``) or the
size reaches ``max_bytes``; then as many exchanges of that size as fill ``pair_s`` are timed as
one block. The two ends agree on every decision (each step's time is exchanged and the larger
taken), so both run the same exchanges. A pair whose one probe exchange already takes longer than
``pair_s`` keeps that exchange as its figure and is marked ``out_of_time``: a slow pair, never a
failed node. ``-e``/``-n`` given fix the size/count instead (the old fixed measure). Each
exchange moves the size each way at once -- nccl-tests' sendrecv between two ranks
(bench-method.md §1.3); a pair's ``algbw = size / time`` with the time the mean of its two
ranks' (nccl-tests' ``-a 1``); for sendrecv busbw = algbw. Rank 0 reports each round when every
pair of it is done (``beat``: the round, its pairs and seconds).

After the rounds every rank's figures are gathered on every rank (as JSON, see :func:`run_pairs`). With
``--rounds K`` short of all pairs, every rank then runs the same analysis on the same figures,
derives the same confirmation rounds (suspects against known-good peers, suspect links again) and
runs them. Rank 0 returns the raw result; the launcher names names
(:mod:`ncclcheck.bench.pairlaunch`).
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable

from ncclcheck.pairwise import analysis, schedule

Emit = Callable[[dict], None]

#: The probe's first size; each step multiplies it by :data:`PROBE_STEP`.
PROBE_MIN_BYTES = 16 << 10
PROBE_STEP = 4
#: The probe stops at the first size one exchange of which takes this share of ``pair_s``.
PROBE_SHARE = 1 / 8


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


def figure(size: int | None, ends: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A pair's figures from its two ends' records: the size (each end's own, else ``size``),
    ``gbps`` (algbw from the mean of the two times; None when an end has none), ``time_us`` and
    ``latency_us`` per end, ``iters`` and ``out_of_time``.

    >>> figure(None, [{"time_us": 1000.0, "size_bytes": 4_000_000, "iters": 3},
    ...               {"time_us": 3000.0, "size_bytes": 4_000_000, "iters": 3}])["gbps"]
    2.0
    """
    times = [x.get("time_us") if x else None for x in ends]
    sizes = [x.get("size_bytes") for x in ends if x and x.get("size_bytes")]
    nbytes = int(sizes[0]) if sizes else size
    ok = all(isinstance(t, (int, float)) and t > 0 for t in times) and nbytes
    mean_us = sum(times) / 2 if ok else None  # type: ignore[arg-type]
    out = {"gbps": nbytes / 1e9 / (mean_us / 1e6) if mean_us else None, "size_bytes": nbytes,
           "time_us": times, "latency_us": [x.get("latency_us") if x else None for x in ends]}
    iters = [x.get("iters") for x in ends if x and x.get("iters")]
    if iters:
        out["iters"] = iters[0]
    if any(x and x.get("out_of_time") for x in ends):
        out["out_of_time"] = True
    return out


def pair_figures(size: int | None, rounds: list[list[tuple[int, int]]],
                 per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every pair's figures (:func:`figure`) from every rank's own records.

    >>> recs = [[{"round": 0, "peer": 1, "time_us": 1000.0, "latency_us": 50.0}],
    ...         [{"round": 0, "peer": 0, "time_us": 3000.0, "latency_us": 70.0}]]
    >>> pair_figures(4_000_000, [[(0, 1)]], recs)[0]["gbps"]
    2.0
    """
    mine = {(rank, r["round"]): r for rank, records in enumerate(per_rank) for r in records}
    out = []
    for index, rnd in enumerate(rounds):
        for a, b in rnd:
            out.append({"round": index, "a": a, "b": b,
                        **figure(size, [mine.get((a, index)), mine.get((b, index))])})
    return out


def pairs_from_events(size: int | None,
                      events: list[dict[str, Any]]) -> dict[tuple[int, int], dict]:
    """Pairs both of whose ranks reported a figure (``pair`` events), by ``(low, high)`` rank.

    >>> ev = [{"rank": 0, "peer": 1, "round": 2, "time_us": 1000.0, "latency_us": 5.0},
    ...       {"rank": 1, "peer": 0, "round": 2, "time_us": 1000.0, "latency_us": 6.0},
    ...       {"rank": 2, "peer": 3, "round": 2, "time_us": 1000.0, "latency_us": 6.0}]
    >>> pairs_from_events(1_000_000, ev)
    {(0, 1): {'round': 2, 'a': 0, 'b': 1, 'gbps': 1.0, 'size_bytes': 1000000, 'time_us': [1000.0, 1000.0], 'latency_us': [5.0, 6.0]}}
    """
    ends: dict[tuple[int, int, int], dict[int, dict]] = {}
    for e in events:
        a, b = sorted((int(e["rank"]), int(e["peer"])))
        ends.setdefault((int(e["round"]), a, b), {})[int(e["rank"])] = e
    out: dict[tuple[int, int], dict] = {}
    for (index, a, b), got in sorted(ends.items()):
        if a in got and b in got:
            out[(a, b)] = {"round": index, "a": a, "b": b, **figure(size, [got[a], got[b]])}
    return out


class Exchanger:
    """Both-ways exchanges with one peer: grouped (``batch_isend_irecv``) on NCCL, where an
    ungrouped send and receive on both sides would wait for each other; ``isend``/``irecv``
    on gloo. The large buffers grow as the probe asks (never beyond ``max_bytes``)."""

    def __init__(self, torch: Any, dist: Any, cuda: bool, device: Any, size: int,
                 small: int) -> None:
        self.torch, self.dist, self.cuda, self.device = torch, dist, cuda, device
        self.big: list[Any] = []
        self.size = 0
        self.resize(size)
        self.small = [torch.ones(max(1, small // 4), dtype=torch.float32, device=device),
                      torch.empty(max(1, small // 4), dtype=torch.float32, device=device)]
        self.word = [torch.zeros(2, dtype=torch.float64, device=device),
                     torch.zeros(2, dtype=torch.float64, device=device)]

    def resize(self, size: int) -> None:
        """Exchanges of ``size`` bytes from now on (new buffers only when they grow)."""
        count = max(1, size // 4)
        if not self.big or self.big[0].numel() < count:
            self.big = [self.torch.ones(count, dtype=self.torch.float32, device=self.device),
                        self.torch.empty(count, dtype=self.torch.float32, device=self.device)]
        self.size = size

    def _exchange(self, send: Any, recv: Any, peer: int) -> None:
        dist = self.dist
        if self.cuda:
            ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            return
        s, r = dist.isend(send, peer), dist.irecv(recv, peer)
        s.wait()
        r.wait()

    def fn(self, peer: int, big: bool) -> Callable[[], None]:
        """One exchange with ``peer`` (send and receive at once)."""
        if big:
            count = max(1, self.size // 4)
            send, recv = self.big[0][:count], self.big[1][:count]
        else:
            send, recv = self.small
        return lambda: self._exchange(send, recv, peer)

    def agree(self, peer: int, values: tuple[float, float]) -> tuple[float, float]:
        """The larger of this end's and the peer's value, each: both ends decide alike."""
        self.word[0].copy_(self.torch.tensor(values, dtype=self.torch.float64))
        self._exchange(self.word[0], self.word[1], peer)
        theirs = self.word[1].cpu().tolist()
        return max(values[0], theirs[0]), max(values[1], theirs[1])


def probe_size(peer: int, pw: dict, ex: Exchanger, timer: Any) -> tuple[int, float, bool]:
    """The size to measure at, one exchange's seconds at it, and whether that one exchange
    already took longer than the pair's time (out of time). Both ends agree at every step."""
    pair_s, top = float(pw["pair_s"]), int(pw["max_bytes"])
    start = time.monotonic()
    size = min(PROBE_MIN_BYTES, top)
    while True:
        ex.resize(size)
        one = timer.time_us(ex.fn(peer, big=True), 1) / 1e6
        one, spent = ex.agree(peer, (one, time.monotonic() - start))
        if one >= pair_s * PROBE_SHARE or size >= top:
            return size, one, one > pair_s
        if spent + one * PROBE_STEP > pair_s:  # the next step would not fit the pair's time
            return size, one, False
        size = min(size * PROBE_STEP, top)


def measure_pair(peer: int, spec: dict, ex: Exchanger, timer: Any) -> dict[str, Any]:
    """This end's figures with ``peer``: latency, then the bandwidth (see the module doc)."""
    pw = spec["pairwise"]
    small = ex.fn(peer, big=False)
    small()
    latency = timer.time_us(small, int(pw.get("latency_iters", 10)))
    fixed = pw.get("size_bytes")
    warmup = pw.get("warmup")
    if fixed:
        size, one, out = int(fixed), None, False
        ex.resize(size)
        warmup = 1 if warmup is None else warmup
    else:
        size, one, out = probe_size(peer, pw, ex, timer)
        warmup = warmup or 0  # the probe's last exchange was at this size
    if out:  # one exchange took longer than the pair's time: that exchange is the figure
        return {"latency_us": latency, "time_us": one * 1e6, "size_bytes": size, "iters": 1,
                "out_of_time": True}
    iters = pw.get("iters") or max(1, int(round(float(pw["pair_s"]) / max(one or 0, 1e-9))))
    big = ex.fn(peer, big=True)
    for _ in range(int(warmup)):
        big()
    timer.sync()
    return {"latency_us": latency, "time_us": timer.time_us(big, int(iters)),
            "size_bytes": size, "iters": int(iters)}


def measure_rounds(rounds: list[list[tuple[int, int]]], first: int, rank: int, spec: dict,
                   ex: Exchanger, timer: Any, barrier: Callable[[], None],
                   emit: Emit, total: int | None = None) -> list[dict[str, Any]]:
    """This rank's records for ``rounds`` (numbered from ``first``). After each round's closing
    barrier rank 0 reports it (``beat``: round, rounds, pairs, seconds)."""
    records = []
    total = total or first + len(rounds)
    barrier()
    for offset, rnd in enumerate(rounds):
        index = first + offset
        started = time.monotonic()
        peer = partner(rnd, rank)
        if peer is not None:
            records.append({"round": index, "peer": peer, **measure_pair(peer, spec, ex, timer)})
            emit({"ev": "pair", "rank": rank, **records[-1]})  # kept if a node fails later
        barrier()
        if rank == 0:
            emit({"ev": "beat", "round": index, "rounds": total, "pairs": len(rnd),
                  "s": round(time.monotonic() - started, 2)})
    return records


def run_pairs(spec: dict[str, Any], torch: Any, dist: Any, rank: int, world: int, cuda: bool,
              device: Any, timer: Any, barrier: Callable[[], None],
              emit: Emit, gather: Callable[[Any], list[Any]]) -> dict[str, Any] | None:
    """The rounds (and any confirmation rounds) as rank ``rank``; rank 0 returns the raw result.

    ``gather`` is :func:`ncclcheck.bench.worker.all_gather_json` (not ``all_gather_object``, which
    needs numpy, not a dependency of torch's wheels).
    """
    pw = spec["pairwise"]
    size = int(pw["size_bytes"]) if pw.get("size_bytes") else None
    given = pw.get("schedule")  # a restart after a failed node: the pairs still to measure
    rounds = ([[(int(a), int(b)) for a, b in rnd] for rnd in given] if given
              else schedule.plan(world, pw.get("rounds"), int(pw.get("seed", 0))))
    ex = Exchanger(torch, dist, cuda, device, size or PROBE_MIN_BYTES,
                   int(pw.get("latency_bytes", 8)))
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
            "backend": spec["backend"], "warmup": pw.get("warmup"), "iters": pw.get("iters"),
            "pair_s": None if pw.get("iters") else pw.get("pair_s")}
