"""The report's view of ``bench --pairwise`` documents: verdicts, heatmap, per-node chart."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ncclcheck.heatmap import heatmap, node_chart
from ncclcheck.report.cells import text
from ncclcheck.report.expected import pairwise_expected_view


def _g(value: Any) -> str:
    return f"{value:.4g}" if _num(value) is not None else "-"


def _num(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def pairwise_view(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """One hunt as plain data for the templates (the SVGs are escaped markup already)."""
    fleet = doc.get("fleet") or {}
    sched = doc.get("schedule") or {}
    method = doc.get("method") or {}
    median = _num(fleet.get("median_gbps"))
    slow_nodes = _dicts(doc["slow_nodes"])
    slow = [v["host"] for v in slow_nodes]
    return {
        "name": name,
        "node_count": len(doc["hosts"]),
        "pair_count": len(doc.get("pairs") or []),
        "rounds": len(sched.get("rounds") or []) + len(sched.get("confirm_rounds") or []),
        "kind": text(sched.get("kind")),
        "size_bytes": method.get("size_bytes"),
        "pair_s": method.get("pair_s"),
        "out_of_time": [" <-> ".join(v.get("hosts") or []) for v in doc.get("out_of_time") or []],
        "backend": text(method.get("backend")),
        "fleet_median": _g(median),
        "slow_nodes": [{"host": v["host"],
                        "score": f"{v['score']:.0%}" if _num(v.get("score")) is not None
                        else "-",
                        "level": _g(v.get("level_gbps")), "pairs": v.get("pair_count"),
                        "why": text(v.get("why")),
                        "evidence": ", ".join(f"{text(p.get('peer'))} {_g(p.get('gbps'))}"
                                              for p in _dicts(v.get("pairs"))[:8])}
                       for v in slow_nodes],
        "slow_links": [{"hosts": " <-> ".join(v["hosts"]), "gbps": _g(v.get("gbps")),
                        "ratio": f"{v['ratio']:.0%}" if isinstance(v.get("ratio"), (int, float))
                        else "-", "expected": _g(v.get("expected_gbps")),
                        "why": text(v.get("why"))} for v in doc["slow_links"]],
        "failed": [f["host"] for f in doc.get("failed") or []],
        "expected": pairwise_expected_view(doc.get("expected")),
        "missing": len(doc.get("missing_pairs") or []),
        "heatmap": Markup(heatmap(doc["hosts"], doc["matrix"]["gbps"],
                                  median, slow,
                                  title=f"pair bandwidth, {name}",
                                  links=[v["hosts"] for v in doc["slow_links"]])),
        "node_chart": Markup(node_chart(_dicts(doc.get("nodes")), _num(fleet.get("node_cut")),
                                        title=f"node scores, {name}")),
    }
