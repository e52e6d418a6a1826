"""The ``ncclcheck/pairwise`` document (``bench --pairwise --json``/``-o``), and its shape check.

Top-level keys (``schema_version`` 1; readers ignore unknown keys)::

    {"schema": "ncclcheck/pairwise", "schema_version": 1, "ncclcheck_version": "...",
     "created_at": "2026-11-25T15:00:00Z",
     "hosts": ["node1", ..., "node8"],                 # rank i is hosts[i]
     "slow_nodes": [{"host": "node5", "score": 0.2, "level_gbps": 0.0049,
                     "fleet_median_gbps": 0.0243, "cut": 0.75, "pair_count": 7,
                     "pairs": [{"peer": "node1", "gbps": 0.0049}, ...], "why": "..."}],
     "slow_links": [{"hosts": ["node2", "node6"], "gbps": 0.0049, "levels_gbps": [...],
                     "expected_gbps": 0.0243, "ratio": 0.2, "cut": 0.6, "why": "..."}],
     "failed": [{"host": "node3"}],                     # named as failed, never as slow
     "missing_pairs": [["node3", "node4"], ...],        # scheduled, no figure
     "out_of_time": [{"hosts": ["node2", "node6"], "timeout_s": 60, "why": "..."}],
                                                        # no exchange finished, nodes alive: slow
     "nodes": [{"host", "level_gbps", "score", "pairs", "status": ok|slow|failed|unjudged}],
     "fleet": {"median_gbps", "score_sigma", "node_cut", "pair_sigma", "link_cut"},
     "matrix": {"unit": "GB/s", "gbps": [[null, 0.0243, ...], ...]},   # N x N, null: none
     "pairs": [{"round": 0, "hosts": ["node1", "node8"], "gbps": 0.0243,
                "time_us": [a, b], "latency_us": [a, b], "size_bytes": 4194304, "iters": 6,
                "out_of_time": true (only when set)}],
     "schedule": {"kind": "all-pairs" | "rounds", "requested_rounds": null | K,
                  "rounds": [[["node1", "node8"], ...], ...], "confirm_rounds": [...]},
     "method": {"op": "sendrecv", "size_bytes" (null: probed per pair), "pair_s",
                "latency_bytes", "warmup", "iters", "backend", "bandwidth": "..."},
     "launch": {...}, "wall_s": 61.2}

Bandwidth is nccl-tests' sendrecv algbw (= busbw): bytes / 1e9 / seconds per exchange, each
exchange moving ``size_bytes`` each way at once, the time the mean of the pair's two ranks.
Each pair is measured for ``pair_s`` seconds at the size a short probe of its link picked (its
``size_bytes`` and ``iters``), unless ``-e``/``-n`` fixed them. A pair with ``out_of_time`` and
a figure took longer than ``pair_s`` for one probe exchange (that exchange is its figure); one
without a figure finished no exchange within the collective timeout while the liveness check
found both nodes alive, and is listed in ``out_of_time``: slow, never missing, never failed.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.errors import BadInput
from ncclcheck.pairwise import analysis, schedule
from ncclcheck.schema import envelope, now_utc

SCHEMA = "ncclcheck/pairwise"
BANDWIDTH = ("sendrecv algbw = busbw (nccl-tests): size_bytes / 1e9 / seconds per exchange, "
             "size_bytes each way at once, the mean of the pair's two ranks' times")


def build(raw: dict[str, Any], hosts: list[str], requested_rounds: int | None,
          failed: list[int] | None = None, launch: dict[str, Any] | None = None,
          wall_s: float | None = None, latency_bytes: int = 8) -> dict[str, Any]:
    """The document from the ranks' raw result (:func:`ncclcheck.bench.pairrank.run_pairs`)
    and the hosts' names in rank order."""
    n = len(hosts)
    dead = sorted(set(failed or []))
    matrix = analysis.PairMatrix(n)
    missing: list[list[str]] = []
    stuck: list[dict[str, Any]] = []
    pairs = []
    for p in raw["pairs"]:
        a, b = int(p["a"]), int(p["b"])
        matrix.record(a, b, p.get("gbps"))
        if p.get("gbps") is None and p.get("out_of_time"):
            stuck.append({"hosts": [hosts[a], hosts[b]], "timeout_s": p.get("timeout_s"),
                          "why": (f"no exchange finished within the collective timeout "
                                  f"({p.get('timeout_s')} s) while both nodes answered the "
                                  "liveness check: the link is slow or stuck")})
        elif p.get("gbps") is None:
            missing.append([hosts[a], hosts[b]])
        pairs.append({"round": p["round"], "hosts": [hosts[a], hosts[b]], "gbps": p.get("gbps"),
                      "time_us": p.get("time_us"), "latency_us": p.get("latency_us"),
                      **{k: p[k] for k in ("size_bytes", "iters", "out_of_time") if k in p}})
    verdict = analysis.analyse(hosts, matrix, dead)

    def named(rounds: list) -> list:
        return [[[hosts[a], hosts[b]] for a, b in rnd] for rnd in rounds]

    return envelope(
        SCHEMA, created_at=now_utc(), hosts=list(hosts),
        slow_nodes=verdict["slow_nodes"], slow_links=verdict["slow_links"],
        failed=verdict["failed"], missing_pairs=missing, out_of_time=stuck,
        nodes=verdict["nodes"],
        fleet=verdict["fleet"],
        matrix={"unit": "GB/s", "gbps": analysis.matrix_rows(matrix)},
        pairs=pairs,
        schedule={"kind": ("rounds" if requested_rounds is not None
                           and requested_rounds < schedule.round_count(n) else "all-pairs"),
                  "requested_rounds": requested_rounds, "rounds": named(raw["rounds"]),
                  "confirm_rounds": named(raw.get("confirm_rounds") or [])},
        method={"op": "sendrecv", "size_bytes": raw["size_bytes"], "pair_s": raw.get("pair_s"),
                "latency_bytes": latency_bytes, "warmup": raw.get("warmup"),
                "iters": raw.get("iters"), "backend": raw.get("backend"),
                "bandwidth": BANDWIDTH},
        launch=launch or {}, wall_s=wall_s)


def check_shape(doc: Any, source: str = "pairwise document") -> dict[str, Any]:
    """Refuse a document without the keys a reader needs, in one line naming ``source``.

    >>> check_shape({"schema": SCHEMA, "hosts": ["a"], "slow_nodes": []}, "p.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: p.json: ncclcheck/pairwise has no valid 'slow_links'
    """
    wants = {"hosts": list, "slow_nodes": list, "slow_links": list, "matrix": dict}
    for key, kind in wants.items():
        if not isinstance(doc.get(key), kind):
            raise BadInput(f"{source}: {SCHEMA} has no valid {key!r}")
    if not all(isinstance(v, dict) and isinstance(v.get("host"), str)
               for v in doc["slow_nodes"]):
        raise BadInput(f"{source}: {SCHEMA} slow_nodes entries need a 'host'")
    if not all(isinstance(v, dict) and isinstance(v.get("hosts"), list) and len(v["hosts"]) == 2
               for v in doc["slow_links"]):
        raise BadInput(f"{source}: {SCHEMA} slow_links entries need two 'hosts'")
    rows = doc["matrix"].get("gbps")
    if not isinstance(rows, list) or len(rows) != len(doc["hosts"]) or any(
            not isinstance(row, list) or len(row) != len(rows) for row in rows):
        raise BadInput(f"{source}: {SCHEMA} matrix is not N x N for {len(doc['hosts'])} hosts")
    return doc
