"""Bench runs (single and ``--compare``): bandwidth charts, tables, transports."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.report.cells import gbps, size_text, text, us_text
from ncclcheck.report.transport import transport_view

def bench_runs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every measured run: single bench documents and each run of a ``--compare`` document."""
    runs = []
    for d in docs:
        if d["kind"] != "bench":
            continue
        doc = d["doc"]
        if isinstance(doc.get("runs"), list):
            best = (doc.get("best") or {}).get("label")
            for i, r in enumerate(doc["runs"]):
                runs.append({"label": str(r.get("label") or f"run {i + 1}"), "file": d["name"],
                             "bench": r["bench"],
                             "best": best is not None and r.get("label") == best,
                             "env_file": r.get("env_file")})
        else:
            runs.append({"label": "", "file": d["name"], "bench": doc, "best": False,
                         "env_file": None})
    for r in runs:
        if not r["label"]:
            r["label"] = default_label(r["bench"], r["file"])
    counts = Counter(r["label"] for r in runs)
    for r in runs:
        if counts[r["label"]] > 1:
            r["label"] = f"{r['label']} ({r['file']})"
    return runs


def default_label(bench: dict[str, Any], name: str) -> str:
    """A run's name: its candidate env, else its node set, else its file.

    >>> default_label({"candidate_env": {"NCCL_IB_QPS_PER_CONNECTION": "4"}}, "b.json")
    'NCCL_IB_QPS_PER_CONNECTION=4'
    >>> default_label({"nodes": ["a", "b"], "world_size": 16}, "b.json")
    '2 nodes, 16 ranks: a, b'
    """
    env = bench.get("candidate_env") or {}
    if env:
        return " ".join(f"{k}={v}" for k, v in env.items())
    nodes = bench.get("nodes") or []
    if nodes:
        shown = ", ".join(map(str, nodes[:4])) + (", ..." if len(nodes) > 4 else "")
        world = bench.get("world_size")
        return (f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
                f"{f', {world} ranks' if world else ''}: {shown}")
    return name


def launcher_text(bench: dict[str, Any]) -> str:
    """Which launcher started the ranks, as bench detected it; "none" when ncclcheck did.

    >>> launcher_text({"launch": {"mode": "torchrun"}}), launcher_text({"launch": {"mode": "local"}})
    ('torchrun', 'none (ncclcheck started the ranks)')
    >>> launcher_text({"source": "nccl-tests import"})
    'not recorded (nccl-tests import)'
    """
    launch = bench.get("launch") if isinstance(bench.get("launch"), dict) else {}
    mode = launch.get("mode")
    if mode in ("local", "ssh"):
        note = f"; {launch['note']}" if isinstance(launch.get("note"), str) else ""
        return f"none (ncclcheck started the ranks{note})"
    if mode:
        return str(mode)
    return f"not recorded ({text(bench.get('source'))})"


def busbw_of(row: dict[str, Any]) -> float | None:
    """The out-of-place busbw of a row (in-place where out-of-place is missing)."""
    for key in ("out_of_place", "in_place"):
        cell = row.get(key)
        if isinstance(cell, dict) and isinstance(cell.get("busbw_gbps"), (int, float)):
            return float(cell["busbw_gbps"])
    return None


def link_rate_label(bench: dict[str, Any]) -> str:
    """What the reference line is: the document's own words when it has them."""
    return str(bench.get("link_rate_label") or "link rate")


def charts_view(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One chart per collective: busbw against size, one line per run, link-rate lines."""
    from markupsafe import Markup

    from ncclcheck.charts import Reference, Series, line_chart

    by_op: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_op.setdefault(str(r["bench"].get("op") or "collective"), []).append(r)
    charts = []
    for op, group in by_op.items():
        series = []
        for r in group:
            rows = [row for row in r["bench"].get("rows") or [] if isinstance(row, dict)]
            series.append(Series(r["label"], [(row.get("size_bytes"), busbw_of(row))
                                              for row in rows if isinstance(row.get("size_bytes"),
                                                                            (int, float))],
                                 detail=r["file"]))
        rates: dict[float, str] = {}
        for r in group:
            rate = r["bench"].get("link_rate_gbps")
            if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
                rates.setdefault(float(rate), link_rate_label(r["bench"]))
        refs = [Reference(label, value) for value, label in sorted(rates.items())]
        dtypes = sorted({str(r["bench"].get("dtype")) for r in group if r["bench"].get("dtype")})
        title = f"{op} bus bandwidth{' (' + ', '.join(dtypes) + ')' if dtypes else ''}"
        svg = line_chart(series, references=refs, title=title,
                         x_title="message size (bytes, log scale)",
                         y_title="busbw (GB/s), out-of-place")
        sizes = sorted({row.get("size_bytes") for r in group for row in r["bench"].get("rows") or []
                        if isinstance(row, dict) and isinstance(row.get("size_bytes"), int)})
        cols = []
        for r in group:
            by_size = {row.get("size_bytes"): busbw_of(row) for row in r["bench"].get("rows") or []
                       if isinstance(row, dict)}
            cols.append([gbps(by_size.get(s)) for s in sizes])
        charts.append({
            "op": op, "title": title, "svg": Markup(svg),
            "labels": [r["label"] for r in group],
            "points": sum(1 for s in series for p in s.points if p[1] is not None),
            "references": [{"label": ref.label, "value": gbps(ref.value)} for ref in refs],
            "size_table": {"labels": [r["label"] for r in group],
                           "rows": [{"size": size_text(s), "busbw": [c[i] for c in cols]}
                                    for i, s in enumerate(sizes)]},
        })
    return charts


def cell_view(cell: Any) -> dict[str, str]:
    """One half (out-of-place or in-place) of a bench row, formatted; N/A when absent."""
    if not isinstance(cell, dict):
        return {"time": "N/A", "algbw": "N/A", "busbw": "N/A", "wrong": "N/A"}
    return {"time": us_text(cell.get("time_us")),
            "algbw": gbps(cell.get("algbw_gbps")), "busbw": gbps(cell.get("busbw_gbps")),
            "wrong": text(cell.get("wrong"))}


def run_view(r: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One run's summary, its table, its transport and its expected-bandwidth verdict (judged
    with the facts of ``nodes`` that are the run's)."""
    from ncclcheck.report.expected import expected_for, expected_view

    b = r["bench"]
    versions = b.get("versions") if isinstance(b.get("versions"), dict) else {}
    rows = [{"size": size_text(row.get("size_bytes")), "size_bytes": text(row.get("size_bytes")),
             "count": text(row.get("count")), "type": text(row.get("type")),
             "out": cell_view(row.get("out_of_place")), "inp": cell_view(row.get("in_place"))}
            for row in b.get("rows") or [] if isinstance(row, dict)]
    env = b.get("env") if isinstance(b.get("env"), dict) else {}
    return {
        "label": r["label"], "file": r["file"], "best": r["best"],
        "op": text(b.get("op")), "dtype": text(b.get("dtype")), "backend": text(b.get("backend")),
        "source": text(b.get("source")), "created_at": text(b.get("created_at")),
        "launcher": launcher_text(b),
        "world_size": text(b.get("world_size")), "nodes": text(b.get("nodes")),
        "ranks_per_node": text(b.get("ranks_per_node")),
        "iters": text(b.get("iters")), "warmup": text(b.get("warmup")),
        "time_basis": text(b.get("time_basis")),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items() if v) or "-",
        "peak": gbps(b.get("peak_busbw_gbps")), "avg": gbps(b.get("avg_busbw_gbps")),
        "link_rate": gbps(b.get("link_rate_gbps")),
        "wrong": text(b.get("wrong_total")),
        "env": [{"name": str(k), "value": str(v)} for k, v in env.items()],
        "candidate_env": [{"name": str(k), "value": str(v)}
                          for k, v in (b.get("candidate_env") or {}).items()],
        "rows": rows, "transport": transport_view(b.get("transport"), b.get("backend")),
        "expected": expected_view(expected_for(b, nodes or [])),
    }
