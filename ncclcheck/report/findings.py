"""Findings from facts (probe rules), recommendations and diagnoses, merged, by severity."""

from __future__ import annotations

import os
from typing import Any

from ncclcheck.report.cells import link, text

SEVERITIES = ("error", "warning", "info")


def evidence_items(evidence: Any) -> list[dict[str, str]]:
    """A finding's evidence as name/value pairs: facts (a dict) or log lines (a list).

    >>> evidence_items({"mtu": 1500}), evidence_items([{"file": "a.log", "line": 3, "text": "x"}])
    ([{'name': 'mtu', 'value': '1500'}], [{'name': 'a.log:3', 'value': 'x'}])
    """
    if isinstance(evidence, dict):
        return [{"name": str(k), "value": text(v)} for k, v in evidence.items()]
    out = []
    for item in evidence if isinstance(evidence, list) else []:
        if isinstance(item, dict):
            where = ":".join(str(item[k]) for k in ("file", "line") if item.get(k) is not None)
            out.append({"name": os.path.basename(where) or "evidence",
                        "value": str(item.get("text") or text(item))})
        else:
            out.append({"name": "evidence", "value": text(item)})
    return out


def doc_refs(docs: Any) -> list[dict[str, str]]:
    """Citations (``"url; src/file.cc; url"``) as text with a link where it is a web address.

    >>> doc_refs("https://a/b; src/net.cc")
    [{'text': 'https://a/b', 'url': 'https://a/b'}, {'text': 'src/net.cc', 'url': ''}]
    """
    parts = docs if isinstance(docs, list) else str(docs or "").split(";")
    return [{"text": p, "url": link(p)} for p in (str(x).strip() for x in parts) if p]


def finding_view(f: dict[str, Any], source: str) -> dict[str, Any]:
    """One finding from any document (probe, recommend, diagnose), in one shape."""
    severity = f.get("severity") if f.get("severity") in SEVERITIES else "info"
    return {
        "id": str(f.get("rule") or f.get("id") or "finding"),
        "title": str(f.get("title") or f.get("rule") or f.get("id") or ""),
        "severity": severity,
        "message": str(f.get("message") or ""),
        "cause": str(f.get("cause") or ""),
        "fix": str(f.get("fix") or ""),
        "why": str(f.get("why") or ""),
        "docs": doc_refs(f.get("docs")),
        "hosts": [str(h) for h in f.get("hosts") or []],
        "ranks": [str(r) for r in f.get("ranks") or []],
        "count": f.get("count") if isinstance(f.get("count"), int) else None,
        "env": [{"name": str(k), "value": str(v)} for k, v in (f.get("env") or {}).items()],
        "evidence": evidence_items(f.get("evidence")),
        "sources": [source],
    }


def merge_findings(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (id, message): hosts, ranks and sources joined; worst first.

    >>> a = finding_view({"rule": "x", "severity": "warning", "message": "m", "hosts": ["n1"]},
    ...                  "probe")
    >>> b = finding_view({"rule": "x", "severity": "warning", "message": "m", "hosts": ["n2"]},
    ...                  "recommend")
    >>> [(f["hosts"], f["sources"]) for f in merge_findings([a, b])]
    [(['n1', 'n2'], ['probe', 'recommend'])]
    """
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for f in found:
        key = (f["id"], f["message"])
        if key not in merged:
            merged[key] = {**f, "hosts": list(f["hosts"]), "ranks": list(f["ranks"]),
                           "sources": list(f["sources"])}
            continue
        into = merged[key]
        for field in ("hosts", "ranks", "sources"):
            into[field].extend(v for v in f[field] if v not in into[field])
        if SEVERITIES.index(f["severity"]) < SEVERITIES.index(into["severity"]):
            into["severity"] = f["severity"]
    out = list(merged.values())
    for f in out:
        f["hosts"].sort()
    out.sort(key=lambda f: (SEVERITIES.index(f["severity"]), f["id"], f["message"]))
    return out


def cluster_findings(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the cluster rules find over several nodes' facts (an MTU or version that differs,
    ...), as ``recommend`` prints them, for a report given facts without a recommendation;
    findings that only set a variable are the recommendation's business."""
    if len(nodes) < 2:
        return []
    from ncclcheck.rules import CLUSTER_RULES
    from ncclcheck.rules.engine import evaluate

    try:
        found = evaluate(CLUSTER_RULES, nodes)["findings"]
    except Exception:  # odd facts: the report still renders what the documents hold
        return []
    return [f for f in found if isinstance(f, dict) and not f.get("env")]


def hunt_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A fleet hunt's verdicts (slow nodes, slow links, failed nodes) as findings, so the
    findings list and its counts agree with the verdicts shown under them."""
    out = []
    for v in doc.get("slow_nodes") or []:
        out.append({"rule": "pairwise-slow-node", "title": "A node slower than the fleet",
                    "severity": "warning", "message": str(v.get("why") or ""),
                    "hosts": [v.get("host")],
                    "fix": "check its NICs, cables and link rate (ethtool, ibstat), then bench "
                           "it against a known-good node"})
    for v in doc.get("slow_links") or []:
        out.append({"rule": "pairwise-slow-link", "title": "A link slower than both its nodes",
                    "severity": "warning", "message": str(v.get("why") or ""),
                    "hosts": list(v.get("hosts") or []),
                    "fix": "check the path between the two nodes (switch ports, cables, routes)"})
    for v in doc.get("failed") or []:
        out.append({"rule": "pairwise-failed-node", "title": "A node failed during the hunt",
                    "severity": "error", "hosts": [v.get("host")],
                    "message": f"{v.get('host')} failed during the hunt (its rank, agent or "
                               f"ssh{': ' + str(v['reason']) if v.get('reason') else ''}); its "
                               "pairs are missing, never slow",
                    "fix": "run ncclcheck probe on it"})
    return out


def findings_view(docs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Findings from facts (probe rules, and the cluster rules over several nodes),
    recommendations, diagnoses and fleet hunts, by severity."""
    found = [finding_view(f, "probe") for facts in nodes for f in facts.get("findings") or []
             if isinstance(f, dict)]
    found += [finding_view(f, "probe") for f in cluster_findings(nodes)]
    for d in docs:
        if d["kind"] == "pairwise":
            found += [finding_view(f, "bench --pairwise") for f in hunt_findings(d["doc"])]
    for d in docs:
        source = {"recommendation": "recommend", "diagnosis": "diagnose"}.get(d["kind"])
        if source:
            found.extend(finding_view(f, source) for f in d["doc"].get("findings") or []
                         if isinstance(f, dict))
    merged = merge_findings(found)
    groups = [{"severity": s, "entries": [f for f in merged if f["severity"] == s]}
              for s in SEVERITIES]
    return {"groups": [g for g in groups if g["entries"]], "total": len(merged),
            "counts": {s: sum(1 for f in merged if f["severity"] == s) for s in SEVERITIES}}
