"""The job verdict of a diagnosis for a terminal: who, what kind, the next step, stacks, evidence."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

KIND_STYLE = {"mismatch": "bold red", "dead": "bold red", "stuck": "bold yellow",
              "missing": "bold yellow", "straggler": "yellow"}
MAX_CULPRITS = 32


def culprits_table(culprits: list[dict[str, Any]]) -> Table:
    """One row per culprit: rank, kind, host, local rank, GPU, pid, why, evidence."""
    table = Table(title="Culprits", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("rank", "kind", "host", "local", "GPU", "pid", "why", "evidence"):
        table.add_column(col, overflow="fold")
    for c in culprits[:MAX_CULPRITS]:
        why = c.get("detail") or ""
        if c.get("exit") and (c["exit"].get("exitcode") is not None or c["exit"].get("signal")):
            e = c["exit"]
            why = f"exit code {e.get('exitcode')}" + (f" ({e['signal']})" if e.get("signal") else "")
        table.add_row(str(c["rank"]), Text(c["kind"], style=KIND_STYLE.get(c["kind"], "")),
                      *("-" if c.get(k) is None else str(c[k])
                        for k in ("host", "local_rank", "gpu", "pid")),
                      why, "\n".join(c.get("evidence") or [])[:600])
    if len(culprits) > MAX_CULPRITS:
        table.caption = f"{len(culprits) - MAX_CULPRITS} more in --json"
    return table


def render_job(console: Console, doc: dict[str, Any]) -> None:
    """The verdict first, then culprits, the next step, stacks and where torchrun disagrees."""
    job = doc["job"]
    culprits = doc.get("culprits") or []
    console.print(Text(job["verdict"], style="bold red" if culprits else (
        "bold yellow" if job["class"] == "network" else "bold green")))
    if culprits:
        console.print(culprits_table(culprits))
    if job.get("next_step"):
        console.print(Text.assemble(("next: ", "dim"), (job["next_step"], "bold")))
    if job.get("pairwise"):
        console.print(Text("  " + job["pairwise"], style="bold green"))
    for who, frames in (job.get("stacks") or {}).items():
        console.print(Text(f"stack of {who}:", style="dim"))
        for f in frames or ["(no stack recorded)"]:
            console.print(Text("  " + f))
    for c in culprits:
        for line in c.get("last_lines") or []:
            console.print(Text(f"  rank {c['rank']}: {line}", style="italic"))
    for line in job.get("disagreements") or []:
        console.print(Text("note: " + line, style="yellow"))
