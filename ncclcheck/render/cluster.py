"""Render a cluster document: which nodes answered, which failed and why, and what differs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

LABELS = {"nccl": "NCCL", "driver": "driver", "cuda": "CUDA (driver)", "torch": "torch",
          "gpu": "GPU model", "mtu": "MTU (socket ifs)", "ib_ports_up": "IB ports up"}


def render_cluster(console: Console, doc: dict[str, Any]) -> None:
    """Print the node count, the failed hosts with reasons, the differences and the findings."""
    nodes, failed = doc.get("nodes") or [], doc.get("failed") or []
    console.print(Text(f"{len(nodes)} node(s) probed, {len(failed)} failed", style="bold"))
    for item in failed:
        console.print(Text(f"  FAILED {item.get('host')}: {item.get('reason')}", style="bold red"))
    diffs = doc.get("differences") or {}
    if nodes and diffs:
        table = Table(show_edge=False, pad_edge=False, title="across nodes", title_justify="left")
        for col in ("fact", "most nodes", "outliers"):
            table.add_column(col, overflow="fold")
        for field, info in diffs.items():
            values = info.get("values") or {}
            common = info.get("common")
            count = len(values.get(common, [])) if common is not None else 0
            odd = info.get("outliers") or []
            host_value = {h: v for v, hs in values.items() for h in hs}
            shown = ", ".join(f"{h}={host_value.get(h)}" for h in odd[:6])
            if len(odd) > 6:
                shown += f" and {len(odd) - 6} more"
            table.add_row(Text(LABELS.get(field, field)),
                          Text(f"{common if common is not None else 'unknown'}"
                               f"{f' ({count}/{len(nodes)})' if common is not None else ''}"),
                          Text(shown or "-", style="bold red" if odd else ""))
        console.print(table)
    counts: Counter = Counter()
    where: dict[str, list[str]] = {}
    for node in nodes:
        for f in node.get("findings") or []:
            key = f"{f.get('severity')} {f.get('rule')}"
            counts[key] += 1
            where.setdefault(key, []).append(str(node.get("hostname")))
    if counts:
        table = Table(show_edge=False, pad_edge=False, title="node findings", title_justify="left")
        for col in ("finding", "nodes"):
            table.add_column(col, overflow="fold")
        for key, n in counts.most_common():
            hosts = where[key]
            table.add_row(Text(key), Text(f"{n}: {', '.join(hosts[:6])}{' ...' if n > 6 else ''}"))
        console.print(table)
