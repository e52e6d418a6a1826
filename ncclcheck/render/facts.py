"""Render a facts document as rich tables: one panel per section, then the findings."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ncclcheck.render.sections import VIEWS
from ncclcheck.render.sections_net import NET_VIEWS
from ncclcheck.render.units import cell_text

STATUS_STYLE = {"ok": "green", "unavailable": "yellow", "error": "bold red"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MAX_ROWS = 64


def fmt(value: Any) -> str:
    """A cell's text: lists joined, None as '-', floats trimmed, nested parts left out
    (:func:`ncclcheck.render.units.cell_text`).

    >>> fmt(None), fmt([1, "a"]), fmt(0.5), fmt(True)
    ('-', '1, a', '0.5', 'yes')
    """
    return cell_text(value, flat=True)


def table_of_rows(title: str, rows: list[dict[str, Any]]) -> Table:
    """A table whose columns are the scalar keys the rows share."""
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and not isinstance(value, (dict, list)) or (
                    key not in columns and isinstance(value, list)
                    and all(not isinstance(v, (dict, list)) for v in value)):
                columns.append(key)
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for col in columns:
        table.add_column(Text(col), overflow="fold")
    for row in rows[:MAX_ROWS]:
        table.add_row(*(Text(fmt(row.get(c))) for c in columns))
    if len(rows) > MAX_ROWS:
        table.caption = f"{len(rows) - MAX_ROWS} more rows in --json"
    return table


def scalar_like(value: Any) -> bool:
    """A value that fits in one cell: a scalar, or a flat list or dict of scalars."""
    if isinstance(value, list):
        return all(not isinstance(v, (dict, list)) for v in value)
    if isinstance(value, dict):
        return all(not isinstance(v, dict) and scalar_like(v) for v in value.values())
    return True


def blocks(name: str, data: Any) -> list[Any]:
    """Renderables for one value: scalars as a key/value grid, lists of dicts as tables."""
    out: list[Any] = []
    if isinstance(data, dict):
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        nested: list[tuple[str, Any]] = []
        for key, value in data.items():
            if scalar_like(value):
                grid.add_row(Text(str(key)), Text(fmt(value)))
            else:
                nested.append((key, value))
        if grid.row_count:
            out.append(grid)
        for key, value in nested:
            if isinstance(value, list):
                rows = [v if isinstance(v, dict) else {"value": v} for v in value]
                out.append(table_of_rows(f"{name}.{key}", rows))
            elif value and all(isinstance(v, dict) for v in value.values()):
                out.append(table_of_rows(f"{name}.{key}",
                                         [{"name": k, **v} for k, v in value.items()]))
            else:
                out.append(Text(f"{name}.{key}", style="bold italic"))
                out.extend(blocks(f"{name}.{key}", value))
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        out.append(table_of_rows(name, data))
    elif data is not None:
        out.append(Text(fmt(data)))
    return out


def render_section(console: Console, name: str, sec: dict[str, Any]) -> None:
    """One section: status in the title, errors in red, then its data."""
    status = sec.get("status", "?")
    title = Text.assemble((name, "bold"), "  ", (status, STATUS_STYLE.get(status, "")),
                          f"  {sec.get('duration_s', 0) * 1000:.0f} ms")
    parts: list[Any] = [Text(e, style="red" if status == "error" else "yellow")
                        for e in sec.get("errors") or []]
    data = sec.get("data")
    view = VIEWS.get(name) or NET_VIEWS.get(name)
    try:
        if view is None or not isinstance(data, dict):
            raise TypeError(name)
        parts.extend(view(data))
    except Exception:  # unexpected data: show it generically rather than fail
        parts.extend(blocks(name, data))
    console.print(Panel(Group(*parts) if parts else Text("-"), title=title, title_align="left"))


def render_findings(console: Console, findings: list[dict[str, Any]]) -> None:
    """Findings, worst first: severity, rule and title, then what was seen, the fix, the citation.

    Blocks rather than a table, so that a narrow terminal wraps the prose and never breaks the
    citation's URL (it is printed whole, to be clicked or copied).
    """
    if not findings:
        console.print(Text("No findings.", style="green"))
        return
    console.print(Text(f"Findings ({len(findings)})", style="bold"))
    for f in (f for f in findings if isinstance(f, dict)):
        severity = str(f.get("severity", "?"))
        console.print(Text.assemble((f"{severity:<8}", SEVERITY_STYLE.get(severity, "")), " ",
                                    (str(f.get("rule", "?")), "bold"),
                                    f"  {f.get('title') or ''}".rstrip()))
        body = Table.grid(padding=(0, 1))
        body.add_column(width=5, style="dim")
        body.add_column(overflow="fold")
        body.add_row("", Text(str(f.get("message", ""))))
        body.add_row("fix", Text(str(f.get("fix", "")), style="bold"))
        hosts = f.get("hosts") if isinstance(f.get("hosts"), list) else []
        if len(hosts) > 1:
            body.add_row("nodes", Text(", ".join(map(str, hosts)), style="dim"))
        console.print(body)
        console.print(Text(f"see   {f.get('docs', '')}", style="dim"), soft_wrap=True)


def render_facts(console: Console, doc: dict[str, Any]) -> None:
    """The whole facts document for a terminal."""
    console.print(Text.assemble(("ncclcheck probe", "bold"), f"  {doc.get('hostname')}  ",
                                (doc.get("collected_at", ""), "dim")))
    for name, sec in (doc.get("sections") or {}).items():
        render_section(console, name, sec)
    render_findings(console, doc.get("findings") or [])
