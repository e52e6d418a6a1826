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
     "ignored": {"backend": "gloo", "variables": ["NCCL_ALGO"], "all": true} | null,
     "best": {"label": "a.env", "peak_busbw_gbps": 45.6} | null}

``best`` is named only beyond the spread of the repeats (:func:`compare_document`).
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


#: NCCL variables the gloo backend still follows: bench turns NCCL_SOCKET_IFNAME into gloo's
#: GLOO_SOCKET_IFNAME (:mod:`ncclcheck.bench.ifname`). Every other NCCL_*/TORCH_NCCL_* variable
#: is read by libnccl only, which gloo never loads.
GLOO_FOLLOWS = frozenset({"NCCL_SOCKET_IFNAME"})


def busbw_spread(row: dict[str, Any] | None) -> tuple[float, float] | None:
    """(lowest, highest) busbw that one size's repeats gave: out-of-place and in-place (the
    same collective run twice), each also at the slowest rank's time.

    >>> busbw_spread({"out_of_place": {"busbw_gbps": 2.0, "time_us": 10.0, "time_us_max": 20.0},
    ...               "in_place": {"busbw_gbps": 3.0}})
    (1.0, 3.0)
    """
    values = []
    for cell in cells([row] if row else []):
        if cell.get("busbw_gbps") is None:
            continue
        values.append(cell["busbw_gbps"])
        if cell.get("time_us") and cell.get("time_us_max"):
            values.append(cell["busbw_gbps"] * cell["time_us"] / cell["time_us_max"])
    return (min(values), max(values)) if values else None


def clear_winner(spreads: list[tuple[float, float] | None]) -> int | None:
    """The index whose lowest busbw beats every other's highest, or None (within the noise).

    >>> clear_winner([(1.0, 2.0), (2.5, 3.0)]), clear_winner([(1.0, 2.6), (2.5, 3.0)])
    (1, None)
    >>> clear_winner([(0.0, 0.0), (0.0, 0.0)]), clear_winner([(1.0, 1.0), None])
    (None, None)
    """
    known = [(i, s) for i, s in enumerate(spreads) if s is not None]
    if len(known) < 2:
        return None
    for i, (low, _) in known:
        if all(low > high for j, (_, high) in known if j != i):
            return i
    return None


def row_at(run: dict[str, Any], size: int) -> dict[str, Any] | None:
    """The run's row for ``size`` bytes, if it has one."""
    rows = [r for r in run["bench"].get("rows") or [] if r.get("size_bytes") == size]
    return rows[0] if rows else None


def ignored_settings(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The variables the runs differ in that their backend ignores (gloo and NCCL_*), or None.

    >>> ignored_settings([{"env": {"NCCL_ALGO": "Ring"}, "bench": {"backend": "gloo"}},
    ...                   {"env": {"NCCL_ALGO": "Tree"}, "bench": {"backend": "gloo"}}])
    {'backend': 'gloo', 'variables': ['NCCL_ALGO'], 'all': True}
    """
    backends = {r["bench"].get("backend") for r in runs if r["bench"].get("backend")}
    if backends != {"gloo"}:
        return None
    names = sorted({k for r in runs for k in (r.get("env") or {})})
    differ = [k for k in names if len({(r.get("env") or {}).get(k) for r in runs}) > 1]
    ignored = [k for k in differ if k.startswith(("NCCL_", "TORCH_NCCL_"))
               and k not in GLOO_FOLLOWS]
    if not ignored:
        return None
    return {"backend": "gloo", "variables": ignored, "all": len(ignored) == len(differ)}


def compare_document(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--compare`` document from ``[{"label", "env_file", "env", "bench"}]``.

    ``best`` is the run with the highest peak busbw, named only when it is beyond the noise: at
    its peak size its lowest busbw over the repeats (:func:`busbw_spread`) beats every other
    run's highest, and the runs do not differ only in variables their backend ignores
    (``ignored``: gloo does not read NCCL_ALGO and the like). Otherwise ``best`` is null.

    >>> doc = compare_document([{"label": "a", "bench": {"peak_busbw_gbps": 2.0}},
    ...                         {"label": "b", "bench": {"peak_busbw_gbps": 3.0}}])
    >>> doc["best"]
    {'label': 'b', 'peak_busbw_gbps': 3.0}
    """
    ignored = ignored_settings(runs)
    scored = sorted((r for r in runs if r["bench"].get("peak_busbw_gbps") is not None),
                    key=lambda r: -r["bench"]["peak_busbw_gbps"])
    best = None
    if len(scored) > 1 and not (ignored and ignored["all"]):
        top = scored[0]
        peak_size = max(top["bench"].get("rows") or [{}],
                        key=lambda r: (busbw_spread(r) or (0.0, 0.0))[1]).get("size_bytes")
        if peak_size is None:  # no rows: the peaks alone
            best = top if scored[1]["bench"]["peak_busbw_gbps"] < \
                top["bench"]["peak_busbw_gbps"] else None
        elif clear_winner([busbw_spread(row_at(r, peak_size)) for r in scored]) == 0:
            best = top
    return envelope("ncclcheck/bench", source="ncclcheck compare", created_at=now_utc(),
                    runs=runs, ignored=ignored,
                    best=({"label": best["label"],
                           "peak_busbw_gbps": best["bench"]["peak_busbw_gbps"]}
                          if best else None))
