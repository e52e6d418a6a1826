"""The tune document (schema ``ncclcheck/tune``, JSON Schema in :mod:`ncclcheck.tune.schema`)
and the final recommendation the env file is rendered from (pure).

::

    {"schema": "ncclcheck/tune", "schema_version": 1, "ncclcheck_version", "created_at",
     "hosts": [...], "backend": "gloo" | "nccl", "transport": "Socket" | "IB" | "plugin",
     "settings": {"op", "min_bytes", "max_bytes", "warmup", "iters", "repeats", "budget_s",
                  "early_stop_rule", "same_run_rule", "significance_rule",
                  "metric"},
     "candidates": [{"id", "label", "stage", "env", "sources", "measure", "not_measured",
                     "runs": [{"round", "position", "peak_busbw_gbps", "avg_busbw_gbps",
                               "interfaces", "network", "backend", "wall_s", "error",
                               "same_run_as": the id whose run it is, when another ran it}],
                     "figures": [peak busbw per repeat], "spread": {"median_gbps", "min_gbps",
                     "max_gbps", "repeats"} | null, "vs_baseline": ratio | null,
                     "stopped": why | null}],
     "rounds": [{"stage", "round", "order": [ids]}],
     "winner": {"id", "label", "env", "significant", "why"},
     "env": {the env file's variables}, "ties": [...], "findings": [...],
     "verify": {recommend --verify's result, "where"} | null,
     "budget": {"limit_s", "used_s", "stopped": why | null}}
"""

from __future__ import annotations

import statistics
from typing import Any

from ncclcheck import schema
from ncclcheck.tune import plan

TUNE = "ncclcheck/tune"
DOCS = "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"


def final_recommendation(rec: dict[str, Any], winner: dict[str, Any],
                         decision: dict[str, Any]) -> dict[str, Any]:
    """The recommendation document with the winner's env, each changed variable's reason
    saying what was measured (recommend's renderers then write any ``--format``)."""
    final = dict(rec)
    env = (dict(winner["env"]) if decision["significant"] or decision.get("trimmed")
           else dict(rec.get("env") or {}))
    reasons = {k: list(v) for k, v in (rec.get("reasons") or {}).items() if k in env}
    changed = [k for k in env if (rec.get("env") or {}).get(k) != env[k]]
    for var in changed:
        reasons[var] = [{"rule": "tune", "severity": "info",
                         "message": f"measured: {decision['why']}",
                         "why": ("the candidates were measured like nccl-tests (busbw, GB/s = "
                                 "1e9 bytes/s) with repeats in varying order; "
                                 + plan.SIGNIFICANCE_RULE),
                         "docs": DOCS, "hosts": []}] + [
            {**r, "message": f"the facts alone: {r.get('message')}"} for r in reasons.get(var, [])]
    order = list(rec.get("env") or {}) + [k for k in env if k not in (rec.get("env") or {})]
    final["env"] = {k: env[k] for k in order if k in env}
    final["reasons"] = {k: reasons.get(k, []) for k in final["env"]}
    ties = []
    for tie in rec.get("ties") or []:
        tie = dict(tie)
        if tie["var"] in final["env"]:
            tie.update(decided_by="tune", chosen=final["env"][tie["var"]],
                       verdict=decision["why"])
        ties.append(tie)
    final["ties"] = ties
    return final


def candidate_view(cand: dict[str, Any], base: list[float]) -> dict[str, Any]:
    """A candidate as the document holds it: runs, figures, spread and ratio to the baseline."""
    figures = list(cand.get("figures") or [])
    ratio = None
    if figures and base and statistics.median(base):
        ratio = round(statistics.median(figures) / statistics.median(base), 3)
    return {"id": cand["id"], "label": cand["label"], "stage": cand["stage"],
            "env": cand["env"], "sources": cand["sources"], "measure": cand["measure"],
            "not_measured": cand.get("not_measured"), "runs": cand.get("runs") or [],
            "figures": figures, "spread": plan.spread(figures), "vs_baseline": ratio,
            "stopped": cand.get("stopped")}


def tune_document(req: Any, rec: dict[str, Any], nodes: list[dict[str, Any]], backend: str,
                  transport: str, cands: list[dict[str, Any]], rounds: list[dict[str, Any]],
                  decision: dict[str, Any], winner: dict[str, Any], final: dict[str, Any],
                  clock: Any, verify: dict[str, Any] | None) -> dict[str, Any]:
    """The tune document."""
    base = next((c.get("figures") or [] for c in cands if c["id"] == "baseline"), [])
    return schema.envelope(
        TUNE, created_at=schema.now_utc(), hosts=list(rec.get("hosts") or []),
        backend=backend, transport=transport,
        settings={"op": req.op, "min_bytes": req.min_bytes, "max_bytes": req.max_bytes,
                  "warmup": req.warmup, "iters": req.iters, "repeats": req.repeats,
                  "budget_s": clock.budget_s, "metric": "peak busbw per repeat (GB/s)",
                  "early_stop_rule": plan.EARLY_STOP_RULE, "same_run_rule": plan.SAME_RUN_RULE,
                  "significance_rule": plan.SIGNIFICANCE_RULE},
        candidates=[candidate_view(c, base) for c in cands], rounds=rounds,
        winner={"id": winner["id"], "label": winner["label"], "env": final["env"],
                "significant": bool(decision["significant"]), "why": decision["why"],
                "trimmed": list(decision.get("trimmed") or []),
                "list_not_measured": bool(decision.get("list_not_measured"))},
        env=final["env"], ties=final.get("ties") or [],
        findings=[{k: f.get(k) for k in ("rule", "severity", "message", "hosts")}
                  for f in rec.get("findings") or []],
        verify=verify,
        budget={"limit_s": clock.budget_s, "used_s": round(clock.used(), 1),
                "stopped": clock.stopped})
