"""The bench document's ``expected`` object: the class, its range, the ratio and the verdict.

    {"class": "nvlink-h100-8", "title": "...", "range": [440, 490], "collectives": [...],
     "holds_for": "...", "min_bytes": 1073741824, "measured_gbps": 338.8, "size_bytes": ...,
     "ratio": 0.72, "verdict": "normal" | "low" | "above the table" | null,
     "sources": ["https://..."], "limits": ["P2P off (...)", ...], "missing": [...],
     "notes": [...]}

The measured figure is the peak busbw over the sizes the class holds for (``min_bytes`` and up;
all sizes when none reaches it, and a limit says so). ``ratio`` = measured / the range's top.
Within the range (5% above its top allowed) is ``normal``; below is ``low``, with ``limits``;
above is ``above the table``. On two nodes Tree and NVLSTree beat the network's ring figure
(sjeaugey, NVIDIA/nccl-tests#196; AddyLaddy, NVIDIA/nccl#812): the top becomes what an algbw at
the network's rate gives, times 2(n-1)/n.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.expected import classify as cl, limits as lim, table

TOLERANCE = 1.05
TWO_NODE_NOTE = ("two nodes: Tree/NVLSTree can exceed the ring figure (NVIDIA/nccl-tests#196), "
                 "so the top is the network rate as algbw, times 2(n-1)/n")


def measured(doc: dict[str, Any], min_bytes: int) -> tuple[float | None, int | None, int | None]:
    """(peak busbw over sizes >= min_bytes, its size, the largest size) of a document's rows."""
    best, size, largest = None, None, None
    rows = doc.get("rows") or []
    sizes = [r.get("size_bytes") or 0 for r in rows]
    largest = max(sizes) if sizes else None
    floor = min_bytes if largest is not None and largest >= min_bytes else 0
    for row in rows:
        if (row.get("size_bytes") or 0) < floor:
            continue
        for key in ("out_of_place", "in_place"):
            cell = row.get(key) or {}
            bw = cell.get("busbw_gbps")
            if isinstance(bw, (int, float)) and (best is None or bw > best):
                best, size = float(bw), row.get("size_bytes")
    return best, size, largest


def judge(value: float | None, low: float, high: float) -> str | None:
    """normal, low, or above the table.

    >>> judge(100, 200, 240), judge(230, 200, 240), judge(300, 200, 240), judge(None, 1, 2)
    ('low', 'normal', 'above the table', None)
    """
    if value is None:
        return None
    if value < low:
        return "low"
    return "above the table" if value > high * TOLERANCE else "normal"


def envelope(ids: list[str], nics: int = 8) -> tuple[float, float]:
    """The widest range over network classes (per-NIC ones at ``nics``)."""
    ranges = [table.node_range(table.by_id(i), nics=nics) for i in ids]
    return min(r[0] for r in ranges if r), max(r[1] for r in ranges if r)


def intra_node_top(sc: dict[str, Any], model: str | None) -> tuple[str, float] | None:
    """(class, top) of the NVLink class inside one node, which bounds a multi-node figure."""
    names = sc["gpu_names"]
    if not names or not model or (sc["per_node"] or 0) < 2:
        return None
    found, _ = cl.node_class(sc, model, names)
    if not found or not found.startswith("nvlink-"):
        return None
    return found, float(table.by_id(found)["busbw_gbps"][1])


def expect(doc: dict[str, Any], facts: list[dict[str, Any]] | None = None,
           link_rate_gbps: float | None = None) -> dict[str, Any]:
    """The ``expected`` object for one bench document."""
    sc = cl.scene(doc, facts, link_rate_gbps)
    found = cl.classify(sc)
    out: dict[str, Any] = {"class": found["class"], "title": None, "range": None,
                           "collectives": [], "holds_for": None, "min_bytes": None,
                           "measured_gbps": None, "size_bytes": None, "ratio": None,
                           "verdict": None, "sources": [], "limits": [],
                           "missing": list(found["missing"]), "notes": []}
    ids = [found["class"]] if found["class"] else (found["envelope"] or [])
    if not ids:
        return out
    entries = [table.by_id(i) for i in ids]
    if found["class"]:
        entry = entries[0]
        rng = table.node_range(entry, nics=found["nics"], rate_gbps=found["rate_gbps"])
        out["title"] = entry["title"]
        if found.get("rate_gbps"):
            out["notes"].append(f"rate {found['rate_gbps'] * 8000:g} Mbit/s "
                                f"({found['rate_gbps']:.4g} GB/s), from {found.get('rate_from')}")
        if found["nics"]:
            out["notes"].append(f"{found['nics']} NIC(s) per node")
            out["notes"] += lim.fewer_nics_note(found["nics"], sc["per_node"])
    else:
        rng = envelope(ids)
        out["class"] = f"any network, {sc['per_node']} x {found['model']} per node"
        out["title"] = ("network not named: the range spans the classes " + ", ".join(ids))
    out["collectives"] = sorted({c for e in entries for c in e["collectives"]})
    out["holds_for"] = "; ".join(e["holds_for"] for e in entries[:1])
    out["min_bytes"] = min(e["min_bytes"] for e in entries)
    out["sources"] = [u for e in entries for u in table.source_urls(e)]
    if rng is None:
        return out
    low, high = rng
    if sc["nodes"] == 2 and entries[0]["kind"] not in ("nvlink", "pcie") and sc["world"]:
        high *= 2 * (sc["world"] - 1) / sc["world"]
        out["notes"].append(TWO_NODE_NOTE)
    cap = intra_node_top(sc, found["model"])
    if sc["nodes"] >= 2 and cap and high > cap[1]:
        high, low = cap[1], min(low, cap[1])
        out["notes"].append(f"capped at {cap[1]:g} GB/s, the top of {cap[0]} (the nodes' NVLink)")
    out["range"] = [round(low, 6), round(high, 6)]
    if doc.get("op") not in out["collectives"]:
        out["notes"].append(f"the table holds for {', '.join(out['collectives'])}; "
                            f"{doc.get('op')} is judged against it as a bound")
    value, size, largest = measured(doc, out["min_bytes"])
    out["measured_gbps"], out["size_bytes"] = value, size
    if value is None:
        return out
    out["ratio"] = round(value / high, 4) if high else None
    out["verdict"] = judge(value, low, high)
    if out["verdict"] == "low":
        out["limits"] = (lim.transport_limits(sc) + lim.p2p_limits(sc) + lim.nic_limits(sc)
                         + lim.shaped_limits(sc) + lim.ranks_share_gpu(sc)
                         + lim.size_limit(largest, entries[0]))
        if not out["limits"]:
            out["limits"] = ["none found in the records" + ("" if sc["facts"] else
                             "; give the nodes' facts (--probe FACTS) to look further")]
    return out
