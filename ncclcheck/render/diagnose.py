"""Render an ``ncclcheck/diagnosis`` document for a terminal: verdict, hosts, ranks, findings."""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from ncclcheck.render.units import Breakable

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MAX_RANK_ROWS = 32
MAX_HOST_ROWS = 64
MAX_ENV_ROWS = 40


def ranges(numbers: Iterable[int]) -> str:
    """Compress sorted integers into ranges.

    >>> ranges([0, 1, 2, 3, 5, 7, 8]), ranges([])
    ('0-3,5,7-8', '-')
    """
    nums = sorted(set(numbers))
    if not nums:
        return "-"
    out: list[str] = []
    start = prev = nums[0]
    for n in nums[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(out)


def _join(values: Iterable[Any], limit: int = 3) -> str:
    vals = [str(v) for v in values if v is not None and v != ""]
    if not vals:
        return "-"
    return ", ".join(vals[:limit]) + (f" +{len(vals) - limit}" if len(vals) > limit else "")


def hosts_table(hosts: dict[str, dict[str, Any]]) -> Table:
    """One row per host: ranks, NCCL, driver, network, bootstrap, HCAs, GDR, init."""
    table = Table(title="Hosts", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("host", "procs", "ranks", "NCCL", "driver", "network", "bootstrap", "HCAs",
                "GDR", "init"):
        table.add_column(col, overflow="fold")
    for name, h in list(hosts.items())[:MAX_HOST_ROWS]:
        done, total = (h["init_complete"].split("/") + ["0"])[:2]
        init_style = "green" if done == total and done != "0" else ("yellow" if done != "0" else "")
        table.add_row(name, str(h["processes"]), ranges(h["ranks"]), _join(h["nccl_versions"]),
                      _join(h["cuda_drivers"]), _join(h["networks"]), _join(h["bootstrap"], 2),
                      _join(h["ib_devices"], 4), _join(h["gdr"]),
                      Text(h["init_complete"], style=init_style))
    if len(hosts) > MAX_HOST_ROWS:
        table.caption = f"{len(hosts) - MAX_HOST_ROWS} more hosts in --json"
    return table


def ranks_table(ranks: list[dict[str, Any]]) -> Table:
    """One row per process (for small jobs)."""
    table = Table(title="Ranks", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("rank", "host:pid", "GPU", "NCCL", "network", "channels", "trees", "transports",
                "GDR", "init"):
        table.add_column(col, overflow="fold")
    for r in ranks[:MAX_RANK_ROWS]:
        table.add_row(
            "-" if r["rank"] is None else str(r["rank"]), r["key"], _join(r["cuda_devices"]),
            r["nccl_version"] or "-", r["network"] or "-",
            "-" if r["channels"] is None else str(r["channels"]),
            "-" if r["trees"] is None else str(r["trees"]),
            _join(r["transports"].keys(), 4), r["gdr"] or "-",
            Text("complete", style="green") if r["init_complete"] else
            Text("started" if r["communicators"] else "-"))
    if len(ranks) > MAX_RANK_ROWS:
        table.caption = f"{len(ranks) - MAX_RANK_ROWS} more ranks in --json"
    return table


def env_settings(ranks: list[dict[str, Any]]) -> list[tuple[str, str, int, list[str]]]:
    """``(variable, value, processes, hosts)`` for every NCCL variable the ranks report as set.

    >>> env_settings([{"env": {"NCCL_IB_HCA": "mlx5_0"}, "host": "a"},
    ...               {"env": {"NCCL_IB_HCA": "mlx5_1"}, "host": "b"}, {"env": {}, "host": "c"}])
    [('NCCL_IB_HCA', 'mlx5_0', 1, ['a']), ('NCCL_IB_HCA', 'mlx5_1', 1, ['b'])]
    """
    seen: dict[tuple[str, str], list[Any]] = {}
    for r in ranks:
        for name, value in (r.get("env") or {}).items():
            entry = seen.setdefault((name, value), [0, []])
            entry[0] += 1
            host = r.get("host") or r.get("node")
            if host and host not in entry[1]:
                entry[1].append(host)
    return [(name, value, n, sorted(hosts)) for (name, value), (n, hosts) in sorted(seen.items())]


def env_table(ranks: list[dict[str, Any]], total: int) -> Table:
    """The variables NCCL reports as set (``NCCL_X set by environment to ...``), and where."""
    table = Table(title="NCCL variables (as NCCL reports them)", title_justify="left",
                  show_edge=False, pad_edge=False)
    for col in ("variable", "value", "processes", "hosts"):
        table.add_column(col, overflow="fold")
    rows = env_settings(ranks)
    names = [name for name, *_ in rows]
    for name, value, n, hosts in rows[:MAX_ENV_ROWS]:
        differs = names.count(name) > 1          # ranks disagree on this variable
        table.add_row(Text(name, style="yellow" if differs else ""), value, f"{n}/{total}",
                      _join(hosts, 4))
    if len(rows) > MAX_ENV_ROWS:
        table.caption = f"{len(rows) - MAX_ENV_ROWS} more settings in --json"
    return table


def finding_panel(f: dict[str, Any]) -> Panel:
    """A finding: message, cause, fix, where, evidence, citation."""
    style = SEVERITY_STYLE.get(f["severity"], "")
    body = Text()
    body.append(f["message"] + "\n", style="bold")
    body.append("cause: ", style="dim")
    body.append(f["cause"] + "\n")
    body.append("fix:   ", style="dim")
    body.append(f["fix"] + "\n", style="bold green")
    where = []
    if f.get("hosts"):
        where.append("hosts " + _join(f["hosts"], 6))
    if f.get("ranks"):
        where.append("ranks " + ranges(f["ranks"]))
    where.append(f"{f['count']} occurrence{'s' if f['count'] != 1 else ''}")
    body.append("where: ", style="dim")
    body.append("; ".join(where) + "\n")
    for ev in f.get("evidence") or []:
        body.append(f"  {ev['file']}:{ev['line']}: ", style="dim")
        body.append(ev["text"][:220] + "\n", style="italic")
    title = Text.assemble((f["severity"].upper(), style), "  ", (f["id"], "bold"), "  ",
                          f["title"])
    # the citation wraps only after a '/' or between citations, never inside a name
    see = Breakable(f"see:   {f['docs']}", style="dim")
    return Panel(Group(body, see), title=title, title_align="left", border_style=style or "white")


def render_diagnosis(console: Console, doc: dict[str, Any]) -> None:
    """The whole diagnosis for a terminal (a job's verdict first, when dumps or job lines
    were read)."""
    if doc.get("job"):
        from ncclcheck.render.jobverdict import render_job

        render_job(console, doc)
    inputs = doc.get("inputs") or []
    total = sum(i.get("bytes", 0) for i in inputs)
    console.print(Text.assemble(
        ("ncclcheck diagnose", "bold"), "  ",
        (", ".join(i["name"] + (" (gzip)" if i.get("gzip") else "") for i in inputs[:4])
         + (f" +{len(inputs) - 4}" if len(inputs) > 4 else ""), ""),
        (f"  {total / 1e6:.1f} MB, {sum(i.get('lines', 0) for i in inputs)} lines", "dim")))
    for i in inputs:
        if i.get("error"):
            console.print(Text(f"{i['name']}: {i['error']} after {i.get('lines', 0)} lines; the "
                               "diagnosis covers what was read", style="yellow"))
    summary = doc.get("summary") or {}
    verdict_style = "bold green" if doc.get("healthy") else (
        "bold red" if (summary.get("findings") or {}).get("error") else "bold yellow")
    console.print(Text(summary.get("verdict", ""), style=verdict_style))
    if doc.get("hosts"):
        console.print(hosts_table(doc["hosts"]))
    ranks = doc.get("ranks") or []
    if 0 < len(ranks) <= MAX_RANK_ROWS:
        console.print(ranks_table(ranks))
    if any(r.get("env") for r in ranks):
        console.print(env_table(ranks, len(ranks)))
    findings = doc.get("findings") or []
    if findings:
        console.print(Group(*(finding_panel(f) for f in findings)))
    else:
        console.print(Text("No findings.", style="green"))
    if doc.get("parser"):
        console.print(Text(f"parser: {doc['parser']['errors']} lines could not be parsed "
                           f"(first: {doc['parser']['first_error']})", style="yellow"))
