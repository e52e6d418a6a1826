"""Merging the variables the findings propose (see :func:`merge`).

Merging never picks in silence:

* every rule and node that proposes a variable agrees: it is set, with each rule's reason;
* they disagree (two rules, or nodes needing different values): a **conflict**; the variable is
  not set and every proposed value is listed with who proposed it;
* a cluster rule could not read the facts of some nodes: its variables are **withheld** (the
  value was not checked against those nodes);
* a rule found several candidates the facts cannot separate (``evidence["candidates"]``): a
  **tie**. The rule's own choice stays, and the tie names the bench run that decides. Bench
  documents given with ``--bench`` decide it: the candidate with the highest measured bus
  bandwidth wins when it beats the others by more than
  :data:`ncclcheck.recommend.ties.NOISE`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _who(finding: dict[str, Any], all_hosts: list[str]) -> str:
    hosts = finding.get("hosts") or []
    if not hosts or sorted(hosts) == sorted(all_hosts):
        return finding["rule"]
    shown = ",".join(hosts[:4]) + (f",+{len(hosts) - 4}" if len(hosts) > 4 else "")
    return f"{finding['rule']}@{shown}"


def _reason(finding: dict[str, Any]) -> dict[str, Any]:
    return {k: finding.get(k) for k in ("rule", "severity", "message", "why", "docs", "hosts")}


def merge(findings: list[dict[str, Any]], skipped: list[dict[str, Any]],
          hosts: list[str]) -> dict[str, Any]:
    """Merge the variables proposed by findings into env, reasons, conflicts, withheld, ties."""
    proposals: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    order: list[str] = []
    for finding in findings:
        for var, value in (finding.get("env") or {}).items():
            if var not in proposals:
                order.append(var)
            proposals[var].append((str(value), finding))
    partial = {s["rule"]: s for s in skipped}
    env: dict[str, str] = {}
    reasons: dict[str, list[dict[str, Any]]] = {}
    conflicts: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    for var in order:
        props = proposals[var]
        values = {v for v, _ in props}
        if len(values) > 1:
            by_who = {_who(f, hosts): v for v, f in props}
            rules = {f["rule"] for _, f in props}
            why = ("rules disagree: " + "; ".join(f"{w} says {v}" for w, v in by_who.items())
                   if len(rules) > 1 else
                   "nodes need different values: " + "; ".join(f"{w.split('@', 1)[-1]} needs {v}"
                                                              for w, v in by_who.items())
                   + " (set it per node, e.g. in each node's /etc/nccl.conf)")
            conflicts.append({"var": var, "values": by_who, "why": why,
                              "reasons": [f"{_who(f, hosts)}: {f['message']}" for _, f in props]})
            continue
        value = values.pop()
        held = [f for _, f in props if f["rule"] in partial]
        if held:
            skip = partial[held[0]["rule"]]
            withheld.append({"var": var, "value": value, "rule": held[0]["rule"],
                             "why": f"facts missing on {', '.join(skip['hosts'][:6])} "
                                    f"({skip['reason'][:200]}): not checked there"})
            continue
        env[var] = value
        reasons[var] = [_reason(f) for _, f in props]
    ties = []
    for finding in findings:
        for var, candidates in ((finding.get("evidence") or {}).get("candidates") or {}).items():
            ties.append({"var": var, "rule": finding["rule"], "candidates": list(candidates),
                         "chosen": env.get(var), "decided_by": None, "measurements": []})
    return {"env": env, "reasons": reasons, "conflicts": conflicts, "withheld": withheld,
            "ties": ties}
