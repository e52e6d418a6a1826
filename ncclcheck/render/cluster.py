"""Render a cluster document: which nodes answered, which failed and why, and what differs."""

from __future__ import annotations

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
    render_node_findings(console, nodes)


def render_node_findings(console: Console, nodes: list[dict[str, Any]]) -> None:
    """Each node finding as a single-node probe prints it (severity, rule, title; the message;
    the fix; the citation), once per rule, with the nodes each message and fix holds on."""
    from ncclcheck.render.facts import SEVERITY_STYLE

    rules: dict[tuple[str, str], dict[str, Any]] = {}
    total = 0
    for node in nodes:
        for f in node.get("findings") or []:
            if not isinstance(f, dict):
                continue
            total += 1
            key = (str(f.get("severity", "?")), str(f.get("rule", "?")))
            entry = rules.setdefault(key, {"title": f.get("title") or "", "docs": f.get("docs"),
                                           "said": {}, "hosts": []})
            entry["hosts"].append(str(node.get("hostname")))
            said = (str(f.get("message", "")), str(f.get("fix", "")))
            entry["said"].setdefault(said, []).append(str(node.get("hostname")))
    if not rules:
        return
    order = {"error": 0, "warning": 1, "info": 2}
    console.print(Text(f"node findings ({total})", style="bold"))
    for (severity, rule), entry in sorted(rules.items(),
                                          key=lambda kv: (order.get(kv[0][0], 3), kv[0][1])):
        n = len(entry["hosts"])
        console.print(Text.assemble((f"{severity:<8}", SEVERITY_STYLE.get(severity, "")), " ",
                                    (rule, "bold"), f"  {entry['title']}".rstrip(),
                                    (f"  ({n} node{'s' if n != 1 else ''})", "dim")))
        body = Table.grid(padding=(0, 1))
        body.add_column(width=5, style="dim")
        body.add_column(overflow="fold")
        fixes = {fix for _, fix in entry["said"]}
        for (message, fix), hosts in entry["said"].items():
            shown = ", ".join(hosts[:6]) + (f" +{len(hosts) - 6}" if len(hosts) > 6 else "")
            body.add_row("", Text.assemble((f"{shown}: ", "bold"), message))
            if len(fixes) > 1:
                body.add_row("fix", Text(fix, style="bold"))
        if len(fixes) == 1:
            body.add_row("fix", Text(next(iter(fixes)), style="bold"))
        console.print(body)
        if entry["docs"]:
            console.print(Text(f"see   {entry['docs']}", style="dim"), soft_wrap=True)
