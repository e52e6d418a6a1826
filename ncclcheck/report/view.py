"""The whole report as plain data: what the templates render, and nothing else."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck import __version__, schema
from ncclcheck.report.advice import recommendation_view
from ncclcheck.report.cells import gbps, text, version_key
from ncclcheck.report.findings import findings_view
from ncclcheck.report.pairwise import pairwise_view
from ncclcheck.report.nodes import (collect_nodes, expected_transport, hostname_of, node_views,
                                    section_data)
from ncclcheck.report.runs import bench_runs, charts_view, run_view
from ncclcheck.report.transport import diagnosis_view, transport_summary
from ncclcheck.report.tune import tune_view

def overview(nodes: list[dict[str, Any]], failed: list[dict[str, str]],
             runs: list[dict[str, Any]], diagnoses: list[dict[str, Any]],
             findings: dict[str, Any]) -> dict[str, Any]:
    """The cluster at a glance."""
    gpus = [section_data(f, "gpu") for f in nodes]
    gpu_total = sum(int(g.get("count") or 0) for g in gpus)
    models = Counter(str(x.get("name") or "GPU").replace("NVIDIA ", "")
                     for g in gpus for x in g.get("gpus") or [])
    versions: list[str] = []
    for f in nodes:
        for v in section_data(f, "nccl").get("versions") or []:
            if str(v) not in versions:
                versions.append(str(v))
    for r in runs:
        t = r["bench"].get("transport") or {}
        for v in [*(t.get("nccl_versions") or []), (r["bench"].get("versions") or {}).get("nccl")]:
            if v and str(v) not in versions:
                versions.append(str(v))
    for d in diagnoses:                      # what the ranks of a diagnosed log printed
        versions.extend(v for v in d["nccl_versions"] if v not in versions)
    seen: dict[str, list[str]] = {}
    for r in runs:
        t, backend = r["bench"].get("transport"), r["bench"].get("backend")
        if isinstance(t, dict) or backend == "gloo":
            seen.setdefault(transport_summary(t if isinstance(t, dict) else {}, backend),
                            []).append(r["label"])
    for d in diagnoses:
        if d["transport"]:
            seen.setdefault(d["transport"]["summary"], []).append(d["name"])
    used = [{"text": summary, "label": ", ".join(labels)} for summary, labels in seen.items()]
    host_names = [hostname_of(f) for f in nodes]
    for r in runs:
        for h in r["bench"].get("nodes") or []:
            if str(h) not in host_names:
                host_names.append(str(h))
    for d in diagnoses:
        host_names.extend(h for h in d["host_names"] if h not in host_names)
    versions.sort(key=version_key)
    drivers = sorted({str(g.get("driver_version")) for g in gpus if g.get("driver_version")},
                     key=version_key)
    return {
        "nodes": host_names, "node_count": len(host_names), "failed": failed,
        "gpu_total": gpu_total,
        "gpu_models": [{"name": n, "count": c} for n, c in models.most_common()],
        "nccl_versions": versions, "drivers": drivers,
        "transport_used": used,
        "transport_expected": "" if used else expected_transport(nodes),
        "best_peak": max((gbps(r["bench"].get("peak_busbw_gbps")) for r in runs
                          if isinstance(r["bench"].get("peak_busbw_gbps"), (int, float))),
                         key=float, default="-"),
        "finding_counts": findings["counts"],
        "diagnoses": [{"name": d["name"], "status": d["status"], "healthy": d["healthy"]}
                      for d in diagnoses],
    }


def build_view(docs: list[dict[str, Any]], title: str | None = None,
               generated_at: str | None = None) -> dict[str, Any]:
    """The report's whole content as plain data: what the templates render, and nothing else."""
    nodes, failed = collect_nodes(docs)
    runs = bench_runs(docs)
    findings = findings_view(docs, nodes)
    diagnoses = [diagnosis_view(d["doc"], d["name"]) for d in docs if d["kind"] == "diagnosis"]
    recommendations = [recommendation_view(d["doc"], d["name"]) for d in docs
                       if d["kind"] == "recommendation"]
    ov = overview(nodes, failed, runs, diagnoses, findings)
    tunes = [tune_view(d["doc"], d["name"]) for d in docs if d["kind"] == "tune"]
    ov["nodes"] += [h for t in tunes for h in t["hosts"] if h not in ov["nodes"]]
    for d in docs:  # the hosts of a fleet hunt are nodes of the report too
        if d["kind"] == "pairwise":
            ov["nodes"].extend(h for h in d["doc"]["hosts"] if h not in ov["nodes"])
    ov["node_count"] = len(ov["nodes"])
    default_title = (f"NCCL report: {ov['node_count']} node{'s' if ov['node_count'] != 1 else ''}"
                     + (f" ({', '.join(ov['nodes'][:3])}{', ...' if ov['node_count'] > 3 else ''})"
                        if ov["nodes"] else ""))
    return {
        "title": title or default_title,
        "generated_at": generated_at or schema.now_utc(),
        "ncclcheck_version": __version__,
        "sources": [{"name": d["name"], "kind": d["kind"], "schema": d["doc"]["schema"],
                     "schema_version": d["doc"]["schema_version"],
                     "written_by": text(d["doc"].get("ncclcheck_version")),
                     "created_at": text(d["doc"].get("created_at") or d["doc"].get("collected_at"))}
                    for d in docs],
        "overview": ov,
        "findings": findings,
        "recommendations": recommendations,
        "nodes": node_views(nodes),
        "charts": charts_view(runs) if runs else [],
        "runs": [run_view(r, nodes) for r in runs],
        "diagnoses": diagnoses,
        "tunes": tunes,
        "pairwise": [pairwise_view(d["doc"], d["name"]) for d in docs if d["kind"] == "pairwise"],
    }
