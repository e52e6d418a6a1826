"""A recommendation: the env file as ``recommend`` writes it, its reasons, what was not set."""

from __future__ import annotations

from typing import Any

from ncclcheck.report.cells import fence_for, link, text

def reason_texts(reasons: Any, var: str) -> list[dict[str, str]]:
    """The reasons given for one variable: what the rule saw (``message``), else its ``why``.

    >>> first, second = reason_texts({"NCCL_A": [
    ...     {"rule": "r", "message": "m", "why": "w", "docs": "https://d"}, "plain"]}, "NCCL_A")
    >>> first, second["text"]
    ({'rule': 'r', 'text': 'm', 'why': 'w', 'docs': 'https://d'}, 'plain')
    """
    items = reasons.get(var) if isinstance(reasons, dict) else [
        r for r in reasons or [] if isinstance(r, dict) and r.get("var") == var]
    if items is None:
        return []
    out = []
    for r in items if isinstance(items, list) else [items]:
        if isinstance(r, dict):
            out.append({"rule": str(r.get("rule") or r.get("id") or ""),
                        "text": str(r.get("message") or r.get("why") or r.get("reason") or ""),
                        "why": str(r.get("why") or "") if r.get("message") else "",
                        "docs": link(r.get("docs"))})
        else:
            out.append({"rule": "", "text": str(r), "why": "", "docs": ""})
    return out


def env_file_text(doc: dict[str, Any], env: dict[str, str],
                  variables: list[dict[str, Any]], hosts: list[str]) -> str:
    """The env file exactly as ``ncclcheck recommend --format env`` writes it; for a document
    that lacks what recommend needs, the same format with the reasons as comments."""
    from ncclcheck.envformat import render_env, split_safe

    try:
        from ncclcheck.recommend.text import render_output

        return render_output(doc, "env")
    except (KeyError, TypeError, ValueError, AttributeError):
        pass
    safe, refused = split_safe(env)
    notes = {v["name"]: [(f"{r['rule']}: " if r["rule"] else "") + r["text"]
                         for r in v["reasons"] if r["text"]] for v in variables}
    header = [f"NCCL settings recommended by ncclcheck for {', '.join(hosts) or 'these nodes'}",
              "Use: set -a; . ./nccl.env; set +a  |  NCCL_CONF_FILE=$PWD/nccl.env"]
    return render_env(safe, notes, header, [f"NOT SET {r['var']}: {r['why']}" for r in refused])


def not_set(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Variables recommend did not write: conflicts, withheld and refused values."""
    out = []
    for kind in ("conflicts", "withheld", "refused"):
        for c in doc.get(kind) or []:
            if not isinstance(c, dict):
                continue
            values = c.get("values")
            wants = ([{"who": str(k), "value": text(v)} for k, v in values.items()]
                     if isinstance(values, dict) else
                     [{"who": str(c.get("rule") or ""), "value": text(c.get("value"))}]
                     if c.get("value") is not None else [])
            out.append({"kind": kind.rstrip("s") if kind != "withheld" else kind,
                        "var": str(c.get("var") or c.get("name") or "?"), "wants": wants,
                        "why": str(c.get("why") or c.get("reason") or "")})
    return out


def tie_text(t: Any) -> str:
    """One tie (several values qualify equally) in words.

    >>> tie_text({"var": "NCCL_NET", "candidates": ["IB", "Socket"], "chosen": "IB",
    ...           "decide_with": "bench --compare a.env b.env"})
    'NCCL_NET: IB or Socket qualify equally; chosen IB; decide with: bench --compare a.env b.env'
    """
    if not isinstance(t, dict):
        return text(t)
    parts = [f"{t.get('var', '?')}: {' or '.join(map(str, t.get('candidates') or []))} "
             f"qualify equally"]
    if t.get("chosen"):
        parts.append(f"chosen {t['chosen']}")
    if t.get("decided_by"):
        parts.append(f"decided by {text(t['decided_by'])}"
                     + (f" ({t['verdict']})" if t.get("verdict") else ""))
    elif t.get("decide_with"):
        parts.append(f"decide with: {t['decide_with']}")
    return "; ".join(parts)


def recommendation_view(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The recommended env file with each variable's reasons; what was not set and why."""
    env = {str(k): str(v) for k, v in (doc.get("env") or {}).items()}
    hosts = [str(h) for h in doc.get("hosts") or []]
    variables = [{"name": var, "value": value, "reasons": reason_texts(doc.get("reasons"), var)}
                 for var, value in env.items()]
    env_text = env_file_text(doc, env, variables, hosts)
    overrides: dict[tuple[str, str], list[str]] = {}
    for o in doc.get("env_overrides") or []:
        if isinstance(o, dict):
            overrides.setdefault((str(o.get("var")), str(o.get("value"))), []).append(
                str(o.get("host")))
    skipped = [{"rule": str(s.get("rule") or "?"), "reason": str(s.get("reason") or "")}
               for s in doc.get("skipped") or [] if isinstance(s, dict)]
    return {"name": name, "hosts": hosts, "variables": variables, "env_file": env_text,
            "fence": fence_for(env_text), "not_set": not_set(doc),
            "ties": [tie_text(t) for t in doc.get("ties") or []],
            "overrides": [{"var": var, "value": value, "hosts": ", ".join(h)}
                          for (var, value), h in overrides.items()],
            "failed": [{"host": str(f.get("host")), "reason": str(f.get("reason") or "")}
                       for f in doc.get("failed") or [] if isinstance(f, dict)],
            "skipped": skipped}
