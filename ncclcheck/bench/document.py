"""The bench document (schema ``ncclcheck/bench``): rows, averages and comparisons (pure).

One run::

    {"schema": "ncclcheck/bench", "schema_version": 1, "ncclcheck_version": "...",
     "source": "ncclcheck" | "nccl-tests import", "created_at": "...Z",
     "op": "all_reduce", "dtype": "float", "backend": "nccl" | "gloo",
     "world_size": 16, "nodes": ["node-a", "node-b"], "ranks_per_node": 8,
     "warmup": 5, "iters": 20, "check": 1,
     "sweep": {"min_bytes": 8, "max_bytes": 134217728, "step_factor": 2, ...} | null,
     "time_basis": "mean over ranks (nccl-tests -a 1, its default)",
     "env": {NCCL_*/TORCH_NCCL_*/GLOO_* in effect on rank 0},
     "candidate_env": {the --env/--env-file configuration},
     "versions": {"torch": "2.6.0", "cuda": "12.4", "nccl": "2.21.5"},
     "transport": {"network": "IB" | "Socket" | "<plugin name>" | null, "interfaces": [...],
                   "hcas": [...], "gdr": true | false | null, "nccl_versions": [...],
                   "per_rank": [{"host", "pid", "rank", "nccl_version", "network", ...}]},
     "rows": [{"size_bytes", "count", "type", "redop", "root",
               "out_of_place": {"time_us", "time_us_mean", "time_us_max", "algbw_gbps",
                                "busbw_gbps", "wrong"},
               "in_place": {...} | null}],
     "avg_busbw_gbps": 12.3, "peak_busbw_gbps": 45.6, "wrong_total": 0,
     "link_rate_gbps": null | 50.0}

``time_us`` is the time per op (block time / iters) combined over ranks as ``time_basis`` says
(``-a/--average``; by default the mean, as nccl-tests); ``time_us_mean`` is the mean and
``time_us_max`` the slowest rank; algbw and busbw come from ``time_us`` with nccl-tests'
formulas. ``in_place`` is
null for ops torch.distributed cannot run in place (alltoall, sendrecv), shown as ``N/A``.
``avg_busbw_gbps`` is nccl-tests' ``Avg bus bandwidth``: the mean busbw over every printed
cell, out-of-place and in-place.

``--compare`` writes one document of the same schema whose ``runs`` hold the labelled runs::

    {"schema": "ncclcheck/bench", ..., "source": "ncclcheck compare",
     "runs": [{"label": "a.env", "env_file": "a.env", "bench": {one run, as above}}, ...],
     "best": {"label": "a.env", "peak_busbw_gbps": 45.6}}
"""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.formulas import Op, algbw_gbps, busbw_gbps
from ncclcheck.schema import envelope, now_utc


#: How per-rank times combine into the reported time: nccl-tests' ``-a`` values.
AVERAGES = {"rank0": 0, "mean": 1, "min": 2, "max": 3}
TIME_BASIS = {"rank0": "rank 0's time (nccl-tests -a 0)",
              "mean": "mean over ranks (nccl-tests -a 1, its default)",
              "min": "fastest rank (nccl-tests -a 2)",
              "max": "slowest rank (nccl-tests -a 3)"}


def combine_times(times_us: list[float], average: str) -> float:
    """The reported time from every rank's time (rank order), as nccl-tests ``-a`` does.

    >>> [combine_times([10.0, 20.0, 30.0], a) for a in ("rank0", "mean", "min", "max")]
    [10.0, 20.0, 10.0, 30.0]
    """
    if average == "rank0":
        return times_us[0]
    if average == "min":
        return min(times_us)
    if average == "max":
        return max(times_us)
    return sum(times_us) / len(times_us)


def placement_result(op: Op, size_bytes: int, nranks: int, times_us: list[float],
                     wrong: int | None, average: str = "mean") -> dict[str, Any]:
    """One half of a row from every rank's time per op (in rank order).

    ``time_us`` is combined as ``average`` says (nccl-tests' default: the mean) and gives algbw
    and busbw; ``time_us_mean`` and ``time_us_max`` (the slowest rank) are always recorded.

    >>> from ncclcheck.bench.formulas import OPS
    >>> placement_result(OPS["all_reduce"], 1000000, 2, [10.0, 30.0], 0)
    {'time_us': 20.0, 'time_us_mean': 20.0, 'time_us_max': 30.0, 'algbw_gbps': 50.0, 'busbw_gbps': 50.0, 'wrong': 0}
    """
    time_us = combine_times(times_us, average)
    return {"time_us": time_us, "time_us_mean": sum(times_us) / len(times_us),
            "time_us_max": max(times_us), "algbw_gbps": algbw_gbps(size_bytes, time_us),
            "busbw_gbps": busbw_gbps(op, size_bytes, time_us, nranks), "wrong": wrong}


def make_row(op: Op, size_bytes: int, count: int, type_name: str, nranks: int,
             out_of_place: dict[str, Any], in_place: dict[str, Any] | None) -> dict[str, Any]:
    """A table row in the document's shape."""
    return {"size_bytes": size_bytes, "count": count, "type": type_name, "redop": op.redop,
            "root": op.root, "out_of_place": out_of_place, "in_place": in_place}


def cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every printed measurement: each row's out-of-place, then in-place when present."""
    out: list[dict[str, Any]] = []
    for row in rows:
        for key in ("out_of_place", "in_place"):
            if row.get(key):
                out.append(row[key])
    return out


def footer_averages(rows: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """(nccl-tests' Avg bus bandwidth, the peak busbw) over the rows' printed cells.

    >>> footer_averages([{"out_of_place": {"busbw_gbps": 1.0}, "in_place": {"busbw_gbps": 3.0}},
    ...                  {"out_of_place": {"busbw_gbps": 8.0}, "in_place": None}])
    (4.0, 8.0)
    """
    values = [c["busbw_gbps"] for c in cells(rows) if c.get("busbw_gbps") is not None]
    if not values:
        return None, None
    return sum(values) / len(values), max(values)


def wrong_total(rows: list[dict[str, Any]]) -> int:
    """The sum of #wrong over every checked cell."""
    return sum(c["wrong"] for c in cells(rows) if isinstance(c.get("wrong"), int))


def bench_document(*, source: str, op: str, dtype: str, backend: str, world_size: int | None,
                   nodes: list[str], ranks_per_node: Any, warmup: int | None, iters: int | None,
                   check: int | None, env: dict[str, str], versions: dict[str, Any],
                   transport: dict[str, Any] | None, rows: list[dict[str, Any]],
                   time_basis: str = TIME_BASIS["mean"],
                   sweep: dict[str, Any] | None = None,
                   candidate_env: dict[str, str] | None = None,
                   link_rate_gbps: float | None = None) -> dict[str, Any]:
    """A complete bench document for one run."""
    avg, peak = footer_averages(rows)
    return envelope(
        "ncclcheck/bench", source=source, created_at=now_utc(), op=op, dtype=dtype,
        backend=backend, world_size=world_size, nodes=nodes, ranks_per_node=ranks_per_node,
        warmup=warmup, iters=iters, check=check, sweep=sweep, time_basis=time_basis, env=env,
        candidate_env=candidate_env or {}, versions=versions, transport=transport, rows=rows,
        avg_busbw_gbps=avg, peak_busbw_gbps=peak, wrong_total=wrong_total(rows),
        link_rate_gbps=link_rate_gbps)


def compare_document(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--compare`` document from ``[{"label", "env_file", "bench"}]``; best = highest peak.

    >>> doc = compare_document([{"label": "a", "bench": {"peak_busbw_gbps": 2.0}},
    ...                         {"label": "b", "bench": {"peak_busbw_gbps": 3.0}}])
    >>> doc["best"]
    {'label': 'b', 'peak_busbw_gbps': 3.0}
    """
    scored = [r for r in runs if r["bench"].get("peak_busbw_gbps") is not None]
    best = max(scored, key=lambda r: r["bench"]["peak_busbw_gbps"]) if scored else None
    return envelope("ncclcheck/bench", source="ncclcheck compare", created_at=now_utc(),
                    runs=runs, best=({"label": best["label"],
                                      "peak_busbw_gbps": best["bench"]["peak_busbw_gbps"]}
                                     if best else None))
