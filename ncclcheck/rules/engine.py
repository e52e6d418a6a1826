"""Run rules over facts documents: skip what lacks facts, contain errors, collect findings."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from ncclcheck.rules.base import Finding, Rule, hostname, section
from ncclcheck.rules.common import cluster_of, gate_peers


@lru_cache(maxsize=512)
def _parse_read(declared: str) -> tuple[bool, str, str, tuple[str, ...]]:
    """``"ib.devices?"`` -> (optional, path, section, keys), parsed once per read."""
    path = declared.rstrip("?")
    name, _, rest = path.partition(".")
    return declared.endswith("?"), path, name, tuple(rest.split(".")) if rest else ()


def missing_reads(rule: Rule, facts: dict[str, Any]) -> str | None:
    """Why a rule cannot run on ``facts`` (a section not ok, or a key absent), or None.

    A read ending in ``?`` is optional: a section whose status is ``unavailable`` (the subsystem
    is absent, which is itself a fact: "this node has no RDMA device") or a missing key does not
    stop the rule. A section that was not collected or whose probe failed still does.
    """
    for declared in rule.reads:
        optional, path, name, keys = _parse_read(declared)
        sec = (facts.get("sections") or {}).get(name)
        if not sec:
            return f"{name} not collected"
        if optional and sec.get("status") == "unavailable":
            continue
        if sec.get("status") != "ok":
            errs = "; ".join(sec.get("errors") or []) or sec.get("status", "?")
            return f"{name} {sec.get('status')}: {errs}"
        node: Any = section(facts, name)
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                if optional:
                    break
                return f"{path} missing"
            node = node[key]
    return None


def finding_doc(rule: Rule, f: Finding, hosts: Iterable[str]) -> dict[str, Any]:
    """The JSON form of a finding, carrying its rule's metadata."""
    return {
        "rule": rule.id, "title": rule.title,
        "severity": (f.severity or rule.severity).value,
        "message": f.message, "fix": f.fix or rule.fix, "why": rule.why, "docs": rule.docs,
        "env": dict(f.env), "evidence": dict(f.evidence), "hosts": sorted(set(f.hosts or hosts)),
    }


def evaluate(rules: Iterable[Rule], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Run node rules on each node and cluster rules on all; return findings, skips, errors.

    A rule that raises becomes an entry in ``errors``; it never stops the others.
    """
    findings: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    with cluster_of(len(nodes)):
        _run(list(rules), nodes, findings, skipped, errors)
    findings.sort(key=lambda d: (-["info", "warning", "error"].index(d["severity"]), d["rule"]))
    return {"findings": findings, "skipped": skipped, "errors": errors}


def _run(rules: list[Rule], nodes: list[dict[str, Any]], findings: list[dict[str, Any]],
         skipped: list[dict[str, Any]], errors: list[dict[str, Any]]) -> None:
    for rule in rules:
        targets = [[n] for n in nodes] if rule.scope == "node" else [nodes]
        for group in targets:
            names = [hostname(n) for n in group]
            reasons = {hostname(n): r for n in group if (r := missing_reads(rule, n))}
            if rule.scope == "node" and reasons:
                skipped.append({"rule": rule.id, "hosts": names, "reason": reasons[names[0]]})
                continue
            runnable = [n for n in group if hostname(n) not in reasons]
            if rule.scope == "cluster":
                if reasons:
                    skipped.append({"rule": rule.id, "hosts": sorted(reasons),
                                    "reason": "; ".join(f"{h}: {r}" for h, r in reasons.items())})
                if not runnable:
                    continue
            try:
                out = rule.check(runnable[0] if rule.scope == "node" else runnable)
                if rule.peers and rule.scope == "node":
                    out = gate_peers(out, runnable[0], rule.severity)
            except Exception as exc:  # a broken rule is reported, never fatal
                errors.append({"rule": rule.id, "hosts": names,
                               "error": f"{type(exc).__name__}: {exc}"})
                continue
            findings.extend(finding_doc(rule, f, names) for f in out)
