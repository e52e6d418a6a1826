"""Text for ``bench --pairwise``: the verdicts with their evidence, then the pair matrix.

A recorded sample (8 namespace nodes at 200 Mbit/s, node5 at 40)::

    pairwise: 8 nodes, 28 pairs in 7 rounds (sendrecv 2 MiB each way, gloo); fleet median 0.02391 GB/s
    slow nodes:
      node5  score 20%  median 0.004812 GB/s over 7 pairs (fleet 0.02391; slow below 75%)
             pairs: node1 0.004801, node2 0.004795, ...
    slow links: none
    pair bandwidth (GB/s):
             node1   node2 ...
"""

from __future__ import annotations

from typing import Any

#: Beyond this many nodes the matrix is left to the JSON and the report's heatmap.
MATRIX_MAX = 32


def fmt(value: Any) -> str:
    """A bandwidth with 4 significant digits; ``-`` for none.

    >>> fmt(0.024312), fmt(None), fmt(12.5)
    ('0.02431', '-', '12.5')
    """
    return "-" if value is None else f"{value:.4g}"


def render_pairwise(doc: dict[str, Any]) -> str:
    """The verdicts, each with its evidence, then the N x N matrix (or a per-node list)."""
    hosts = doc["hosts"]
    method, sched, fleet = doc["method"], doc["schedule"], doc["fleet"]
    pairs = doc["pairs"]
    rounds = len(sched["rounds"]) + len(sched.get("confirm_rounds") or [])
    size = method["size_bytes"]
    size_text = ((f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size} B") if size
                 else f"{method.get('pair_s') or '?'} s per pair at a probed size")
    lines = [f"pairwise: {len(hosts)} nodes, {len(pairs)} pairs in {rounds} rounds "
             f"({sched['kind']}; sendrecv {size_text} each way, {method.get('backend')}); "
             f"fleet median {fmt(fleet.get('median_gbps'))} GB/s"]
    if doc.get("failed"):
        lines.append("failed nodes (their pairs are missing, not slow): "
                     + ", ".join(f["host"] for f in doc["failed"]))
    lines.append("slow nodes:" + ("" if doc["slow_nodes"] else " none"))
    for v in doc["slow_nodes"]:
        lines.append(f"  {v['host']}  score {v['score']:.0%}  median {fmt(v['level_gbps'])} GB/s "
                     f"over {v['pair_count']} pairs (fleet {fmt(v['fleet_median_gbps'])}; "
                     f"slow below {v['cut']:.0%})")
        shown = ", ".join(f"{p['peer']} {fmt(p['gbps'])}" for p in v["pairs"][:8])
        more = v["pair_count"] - min(8, len(v["pairs"]))
        lines.append(f"      pairs: {shown}" + (f", ... ({more} more)" if more > 0 else ""))
    lines.append("slow links:" + ("" if doc["slow_links"] or doc.get("out_of_time") else " none"))
    for v in doc["slow_links"]:
        a, b = v["hosts"]
        la, lb = v["levels_gbps"]
        lines.append(f"  {a} <-> {b}  {fmt(v['gbps'])} GB/s = {v['ratio']:.0%} of "
                     f"{fmt(v['expected_gbps'])} (medians {a} {fmt(la)}, {b} {fmt(lb)}; "
                     f"slow below {v['cut']:.0%})")
    for v in doc.get("out_of_time") or []:
        lines.append(f"  {' <-> '.join(v['hosts'])}  ran out of time: {v['why']}")
    if doc.get("missing_pairs"):
        lines.append(f"missing pairs: {len(doc['missing_pairs'])} ("
                     + ", ".join("<->".join(p) for p in doc["missing_pairs"][:6])
                     + (", ..." if len(doc["missing_pairs"]) > 6 else "") + ")")
    from ncclcheck.render.expected import pairwise_lines

    lines.extend(pairwise_lines(doc.get("expected")))
    lines.extend(matrix_lines(doc))
    return "\n".join(lines) + "\n"


def matrix_lines(doc: dict[str, Any]) -> list[str]:
    """The pair matrix in GB/s, or for big fleets each node's median and pair count."""
    hosts, rows = doc["hosts"], doc["matrix"]["gbps"]
    if len(hosts) > MATRIX_MAX:
        out = [f"per node ({len(hosts)} nodes; the matrix is in --json and the report):"]
        for node in doc["nodes"]:
            out.append(f"  {node['host']:<20} {node['status']:<8} median "
                       f"{fmt(node['level_gbps']):>9} GB/s over {node['pairs']} pairs")
        return out
    width = max(9, max(len(h) for h in hosts) + 1)
    out = ["pair bandwidth (GB/s):", " " * width + "".join(f"{h:>{width}}" for h in hosts)]
    for i, (host, row) in enumerate(zip(hosts, rows)):
        out.append(f"{host:<{width}}" + "".join(
            f"{('.' if i == j else fmt(v)):>{width}}" for j, v in enumerate(row)))
    return out
