"""``bench --pairwise``: every pair against the per-link expectation (pure).

The pairs are sendrecv between two nodes, one rank each: the figure is what one link between
them carries. The expectation is the class of that link: TCP at the shaped rate (``--link-rate``
or the fastest rate ``tc`` shapes the fleet's links to, recorded by the agents' hello), range
:func:`ncclcheck.expected.table.node_range`. A pair below it is ``low``, and the limits name the
end whose link is shaped below the others. :func:`judge_pairs` is what the hunt calls; it returns
the document's ``expected`` object::

    {"class": "tcp-shaped", "title": ..., "range": [0.011, 0.0255], "rate_gbps": 0.025,
     "sources": [...], "counts": {"normal": 20, "low": 7, "above the table": 0},
     "pairs": [{"hosts": ["node1", "node5"], "gbps": 0.0048, "ratio": 0.19, "verdict": "low",
                "limits": ["node5 eth0: shaped to 40Mbit by tc (tbf), ..."]}],   # not normal only
     "missing": []}
"""

from __future__ import annotations

from typing import Any

from ncclcheck.expected import table
from ncclcheck.expected.verdict import judge

#: Pairs listed in the document (not normal ones only); the counts cover all.
MAX_LISTED = 200


def link_limits(links: dict[str, list[dict[str, Any]]], hosts: list[str],
                rate_gbps: float) -> list[str]:
    """The ends of a pair whose link is shaped below ``rate_gbps``."""
    out = []
    for host in hosts:
        for link in links.get(host) or []:
            if link.get("rate_bps") and link["rate_bps"] / 8e9 < rate_gbps * 0.9:
                out.append(f"{host} {link.get('ifname')}: shaped to {link.get('rate_text')} by tc "
                           f"({link.get('qdisc')}), below the {rate_gbps * 8000:g} Mbit/s expected")
    return out


def judge_pairs(doc: dict[str, Any], link_rate_gbps: float | None = None) -> dict[str, Any]:
    """The ``expected`` object of a pairwise document (its ``pairs`` and ``launch.links``)."""
    launch = doc.get("launch") if isinstance(doc.get("launch"), dict) else {}
    links = launch.get("links") or {}
    rates = [l["rate_bps"] for ls in links.values() for l in ls or [] if l.get("rate_bps")]
    rate = link_rate_gbps or (max(rates) / 8e9 if rates else None)
    entry = table.by_id("tcp-shaped")
    out: dict[str, Any] = {"class": None, "title": None, "range": None, "rate_gbps": rate,
                           "sources": [], "counts": {}, "pairs": [], "missing": []}
    if rate is None:
        out["missing"] = ["the per-link rate: --link-rate GB/s (no link is shaped by tc)"]
        return out
    low, high = table.node_range(entry, rate_gbps=rate)
    out.update({"class": entry["id"], "title": entry["title"], "range": [low, high],
                "sources": table.source_urls(entry),
                "rate_from": "--link-rate" if link_rate_gbps else "tc qdisc"})
    counts = {"normal": 0, "low": 0, "above the table": 0}
    for pair in doc.get("pairs") or []:
        value = pair.get("gbps")
        verdict = judge(value, low, high)
        if verdict is None:
            continue
        counts[verdict] += 1
        if verdict != "normal" and len(out["pairs"]) < MAX_LISTED:
            hosts = list(pair.get("hosts") or [])
            out["pairs"].append({"hosts": hosts, "gbps": value, "ratio": round(value / high, 4),
                                 "verdict": verdict,
                                 "limits": (link_limits(links, hosts, rate) if verdict == "low"
                                            else [])})
    out["counts"] = counts
    return out
