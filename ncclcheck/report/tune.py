"""A tune document: the candidates side by side, the decision, and the env file it wrote."""

from __future__ import annotations

from typing import Any

from ncclcheck.report.cells import text


def gbps(value: Any) -> str:
    """A figure with four significant digits (tune links may run at 0.05 GB/s).

    >>> gbps(0.047981), gbps(338.8234), gbps(None)
    ('0.04798', '338.8', '-')
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}"
    return "-"


def _status(cand: dict[str, Any], winner: str, won: bool = True) -> tuple[str, str]:
    """(one word for the table, the full reason for the notes under it): ``winner`` only when
    it beat the baseline beyond the noise; the env written when nothing did is ``kept``."""
    if cand.get("id") == winner:
        return ("winner", "") if won else ("kept", "written: nothing beat the baseline")
    if not cand.get("measure"):
        return "not measured", f"not measured: {text(cand.get('not_measured'))}"
    if cand.get("stopped"):
        why = text(cand.get("stopped"))
        return why.split(":", 1)[0], why
    return "", ""


def _env_text(env: Any) -> str:
    if not isinstance(env, dict) or not env:
        return "(nothing set: NCCL's defaults)"
    return " ".join(f"{k}={v}" for k, v in env.items())


def tune_view(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The candidates of one tune document as table rows (figures in GB/s busbw).

    >>> v = tune_view({"winner": {"id": "b", "why": "faster", "significant": True},
    ...     "candidates": [{"id": "a", "label": "A", "stage": 1, "env": {}, "measure": True,
    ...                     "figures": [1.0, 1.1], "spread": {"median_gbps": 1.05,
    ...                     "min_gbps": 1.0, "max_gbps": 1.1}, "vs_baseline": 1.0},
    ...                    {"id": "b", "label": "B", "stage": 1, "env": {"X": "=b"}, "measure": True,
    ...                     "figures": [2.0, 2.2], "spread": {"median_gbps": 2.1,
    ...                     "min_gbps": 2.0, "max_gbps": 2.2}, "vs_baseline": 2.0}]}, "t.json")
    >>> [(r["label"], r["median"], r["ratio"], r["status"]) for r in v["candidates"]]
    [('A', '1.05', '1.00', ''), ('B', '2.1', '2.00', 'winner')]
    >>> v = tune_view({**{"winner": {"id": "b", "why": "no win", "significant": False}},
    ...                "candidates": [{"id": "b", "label": "B", "measure": True}]}, "t.json")
    >>> v["candidates"][0]["status"], v["candidates"][0]["winner"]
    ('kept', False)
    """
    winner = doc.get("winner") if isinstance(doc.get("winner"), dict) else {}
    won = bool(winner.get("significant"))
    rows = []
    for cand in doc.get("candidates") or []:
        if not isinstance(cand, dict):
            continue
        sp = cand.get("spread") if isinstance(cand.get("spread"), dict) else {}
        figures = [f for f in cand.get("figures") or [] if isinstance(f, (int, float))]
        ratio = cand.get("vs_baseline")
        rows.append({
            "label": text(cand.get("label") or cand.get("id")), "stage": text(cand.get("stage")),
            "env": _env_text(cand.get("env")),
            "figures": " ".join(gbps(f) for f in figures) or "-",
            "median": gbps(sp.get("median_gbps")) if sp else "-",
            "range": f"{gbps(sp.get('min_gbps'))}-{gbps(sp.get('max_gbps'))}" if sp else "-",
            "ratio": f"{ratio:.2f}" if isinstance(ratio, (int, float)) else "-",
            "status": _status(cand, str(winner.get("id")), won)[0],
            "note": _status(cand, str(winner.get("id")), won)[1],
            "winner": won and cand.get("id") == winner.get("id")})
    ver = doc.get("verify") if isinstance(doc.get("verify"), dict) else None
    verify = ""
    if ver:
        boot = ver.get("bootstrap") if isinstance(ver.get("bootstrap"), dict) else {}
        verify = (f"libnccl {text(ver.get('nccl_version'))} on {text(ver.get('where'))} reads "
                  f"it and bootstraps on {text(boot.get('interface'))}" if ver.get("ok") else
                  "verify failed: " + "; ".join(str(p) for p in ver.get("problems") or []))
    budget = doc.get("budget") if isinstance(doc.get("budget"), dict) else {}
    settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
    return {"name": name, "hosts": [str(h) for h in doc.get("hosts") or []],
            "backend": text(doc.get("backend")), "transport": text(doc.get("transport")),
            "candidates": rows, "decision": text(winner.get("why")),
            "notes": [f"{r['label']}: {r['note']}" for r in rows if r["note"]],
            "significant": bool(winner.get("significant")),
            "env": _env_text(doc.get("env")), "verify": verify,
            "budget": text(budget.get("stopped")) if budget.get("stopped") else "",
            "rules": [text(settings.get(k)) for k in ("early_stop_rule", "same_run_rule", "significance_rule")
                      if settings.get(k)]}
