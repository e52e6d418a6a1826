"""The report's view of the expected-bandwidth verdict of each bench run (:mod:`ncclcheck.expected`).

A run written before the verdict existed, or judged without facts, is judged here with the facts
of the report's nodes whose hostnames are the run's nodes.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.report.nodes import hostname_of


def gbps(value: Any) -> str:
    """A bandwidth with 4 significant digits (a shaped link's 0.0255 GB/s stays readable).

    >>> gbps(0.025512), gbps(338.82), gbps(None)
    ('0.02551', '338.8', '-')
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}"
    return "-"


def expected_for(bench: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's ``expected`` object: recomputed with the matching nodes' facts when there are
    any (or when the run has none), else the document's own."""
    from ncclcheck.expected.verdict import expect

    names = {str(n) for n in bench.get("nodes") or []}
    facts = [f for f in nodes if hostname_of(f) in names]
    if facts or not isinstance(bench.get("expected"), dict):
        try:
            return expect(bench, facts, bench.get("link_rate_gbps"))
        except (KeyError, TypeError, ValueError, AttributeError):
            return bench.get("expected") if isinstance(bench.get("expected"), dict) else None
    return bench["expected"]


def expected_view(exp: dict[str, Any] | None) -> dict[str, Any] | None:
    """Strings for the templates; None when there is no verdict object at all."""
    if not isinstance(exp, dict):
        return None
    rng = exp.get("range") if isinstance(exp.get("range"), list) else None
    ratio = exp.get("ratio")
    return {"class": str(exp.get("class") or "-"), "title": str(exp.get("title") or ""),
            "verdict": str(exp.get("verdict") or "no verdict"),
            "pill": {"normal": "ok", "low": "error", "above the table": "warning"}.get(
                exp.get("verdict"), "muted"),
            "range": f"{gbps(rng[0])}-{gbps(rng[1])}" if rng and len(rng) == 2 else "-",
            "ratio": f"{ratio:.0%}" if isinstance(ratio, (int, float)) else "-",
            "measured": gbps(exp.get("measured_gbps")),
            "collectives": ", ".join(map(str, exp.get("collectives") or [])),
            "limits": [str(x) for x in exp.get("limits") or []],
            "missing": [str(x) for x in exp.get("missing") or []],
            "notes": [str(x) for x in exp.get("notes") or []],
            "sources": [str(u) for u in exp.get("sources") or [] if str(u).startswith("https://")]}


def pairwise_expected_view(exp: dict[str, Any] | None) -> dict[str, Any] | None:
    """The per-link expectation of a hunt: class, range, counts, the low pairs."""
    if not isinstance(exp, dict):
        return None
    rng = exp.get("range") if isinstance(exp.get("range"), list) else None
    counts = exp.get("counts") if isinstance(exp.get("counts"), dict) else {}
    return {"class": str(exp.get("class") or "-"),
            "range": f"{gbps(rng[0])}-{gbps(rng[1])}" if rng and len(rng) == 2 else "-",
            "counts": ", ".join(f"{v} {k}" for k, v in counts.items()),
            "missing": [str(x) for x in exp.get("missing") or []],
            "pairs": [{"hosts": " <-> ".join(map(str, p.get("hosts") or [])),
                       "gbps": gbps(p.get("gbps")), "verdict": str(p.get("verdict")),
                       "limits": "; ".join(map(str, p.get("limits") or []))}
                      for p in exp.get("pairs") or [] if isinstance(p, dict)]}
