"""The recommendation document (``"schema": "ncclcheck/recommendation"``)::

    {"hosts": [...], "failed": [{"host", "reason"}], "env": {VAR: value},
     "reasons": {VAR: [{"rule", "severity", "message", "why", "docs", "hosts"}]},
     "findings": [...], "skipped": [...], "errors": [...],
     "conflicts": [{"var", "values": {"rule" | "rule@host,...": value}, "why", "reasons"}],
     "ties": [{"var", "candidates", "chosen", "decided_by", "measurements", "decide_with"}],
     "withheld": [{"var", "value", "rule", "why"}], "refused": [{"var", "value", "why"}],
     "env_overrides": [{"var", "host", "value", "recommended"}],
     "bench_used": [{"file", "label", "op", "peak_busbw_gbps", "env"}], "sources": [...]}
"""

from __future__ import annotations

from typing import Any

from ncclcheck import schema
from ncclcheck.envformat import split_safe
from ncclcheck.recommend.merge import merge
from ncclcheck.recommend.ties import candidate_files, decide_ties

RECOMMENDATION = "ncclcheck/recommendation"


def env_overrides(nodes: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, str]]:
    """Variables a node's environment already sets to another value: they win over the file."""
    from ncclcheck.rules.base import fact

    out = []
    for node in nodes:
        current = fact(node, "env.nccl") or {}
        if not isinstance(current, dict):
            continue
        for var, value in env.items():
            if var in current and current[var] != value:
                out.append({"var": var, "host": str(node.get("hostname")),
                            "value": current[var], "recommended": value})
    return out


def recommend(cluster: dict[str, Any], runs: list[dict[str, Any]] | None = None,
              sources: list[str] | None = None) -> dict[str, Any]:
    """The recommendation document for a cluster document and optional bench runs."""
    from ncclcheck.cluster import differences, gc_paused
    from ncclcheck.rules import CLUSTER_RULES, NODE_RULES
    from ncclcheck.rules.common import facts_frozen
    from ncclcheck.rules.engine import evaluate

    nodes = list(cluster.get("nodes") or [])
    if not nodes:
        from ncclcheck.errors import BadInput, NcclcheckError

        failed = "; ".join(f"{f.get('host')}: {f.get('reason')}" for f in cluster.get("failed") or [])
        if not failed:  # a document that holds no node at all: bad input (exit 2), not a run
            raise BadInput("no node's facts to recommend from: the input holds no node")
        raise NcclcheckError(f"no node's facts to recommend from (every host failed: "
                             f"{failed[:300]})")
    hosts = [str(n.get("hostname")) for n in nodes]
    # rules over 1,000 nodes allocate a lot and free it all by refcount; and they share the
    # interface selection and per-node port lists, worked out once while the facts hold still
    with gc_paused(), facts_frozen():
        diffs = differences(nodes)
        result = evaluate(NODE_RULES + CLUSTER_RULES, nodes)
    merged = merge(result["findings"], result["skipped"], hosts)
    env, reasons = merged["env"], merged["reasons"]
    runs = runs or []
    decide_ties(merged["ties"], runs, env, reasons)
    for tie in merged["ties"]:
        files = list(candidate_files(tie, env))
        # the files exist only once --candidates-dir wrote them (write_candidates says where)
        tie["decide_with"] = (f"recommend --candidates-dir DIR writes {', '.join(files)}; then "
                              f"ncclcheck bench --hostfile HOSTS --compare DIR/{tie['var']}-*.env")
        tie["files"] = files
    safe, refused = split_safe(env)
    for item in refused:
        reasons.pop(item["var"], None)
    order = [v for r in (list(NODE_RULES) + list(CLUSTER_RULES)) for v in r.sets]
    ordered = dict(sorted(safe.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order
                                                        else len(order), kv[0])))
    return schema.envelope(
        RECOMMENDATION, created_at=schema.now_utc(), hosts=hosts,
        failed=list(cluster.get("failed") or []), env=ordered,
        reasons={v: reasons[v] for v in ordered}, findings=result["findings"],
        skipped=result["skipped"], errors=result["errors"], conflicts=merged["conflicts"],
        ties=merged["ties"], withheld=merged["withheld"], refused=refused,
        env_overrides=env_overrides(nodes, ordered),
        bench_used=[{k: r.get(k) for k in ("file", "label", "op", "peak_busbw_gbps", "env")}
                    for r in runs],
        differences=diffs, sources=sources or [])
