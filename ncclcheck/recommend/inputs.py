"""Inputs of ``ncclcheck recommend``: the facts (``--probe`` files, or a live probe of this node)
and the runs of the ``--bench`` documents."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ncclcheck import schema

BENCH = "ncclcheck/bench"


def load_facts(paths: Iterable[str]) -> dict[str, Any]:
    """A cluster document from ``--probe`` files/folders (see :func:`ncclcheck.cluster.load_sources`)."""
    from ncclcheck.cluster import load_sources

    return load_sources(paths, with_differences=False)  # recommend() works them out


def probe_this_node() -> dict[str, Any]:
    """A one-node cluster document from a live probe of this machine."""
    from ncclcheck.cluster import cluster_document
    from ncclcheck.host.live import LiveHost
    from ncclcheck.probe import collect_facts

    facts = collect_facts(LiveHost("/"), findings=False)
    return cluster_document([facts], [], source="this node", with_differences=False)


def bench_runs(doc: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """Flatten a bench document (one run, an import, or a ``--compare`` set) into runs:
    ``{"file", "label", "op", "peak_busbw_gbps", "avg_busbw_gbps", "env", "interfaces"}``.

    ``env`` is the configuration the run used: NCCL's effective environment overlaid with the
    candidate configuration (``--env``/``--env-file``).

    >>> runs = bench_runs({"schema": "ncclcheck/bench", "runs": [
    ...     {"label": "a.env", "bench": {"op": "all_reduce", "peak_busbw_gbps": 9.5,
    ...      "env": {}, "candidate_env": {"NCCL_SOCKET_IFNAME": "=eth0"}}}]}, "cmp.json")
    >>> runs[0]["label"], runs[0]["env"], runs[0]["peak_busbw_gbps"]
    ('a.env', {'NCCL_SOCKET_IFNAME': '=eth0'}, 9.5)
    """
    items = ([(r.get("label") or f"run {i + 1}", r.get("bench") or {})
              for i, r in enumerate(doc.get("runs") or [])]
             if doc.get("runs") else [(Path(source).name, doc)])
    out = []
    for label, run in items:
        env = {**(run.get("env") or {}), **(run.get("candidate_env") or {})}
        transport = run.get("transport") or {}
        out.append({"file": source, "label": str(label), "op": run.get("op"),
                    "source": run.get("source") or doc.get("source"),
                    "nodes": run.get("nodes"), "world_size": run.get("world_size"),
                    "peak_busbw_gbps": run.get("peak_busbw_gbps"),
                    "avg_busbw_gbps": run.get("avg_busbw_gbps"), "env": env,
                    "network": transport.get("network"),
                    "interfaces": list(transport.get("interfaces") or [])})
    return out


def load_bench(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every run of every ``--bench`` document."""
    runs: list[dict[str, Any]] = []
    for path in paths:
        doc = schema.load(path, (BENCH,))
        runs.extend(bench_runs(doc, str(path)))
    return runs
