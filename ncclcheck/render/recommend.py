"""The explanation of a recommendation, for stderr: what is set and why, what is not, findings.

stdout carries only the env file (``ncclcheck recommend > nccl.env``); everything here goes to
the error console. ``explain=True`` adds each rule's full rationale, citation and fix.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ncclcheck.recommend.text import group_findings
from ncclcheck.recommend.ties import tie_line

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _hosts(hosts: list[str] | None, limit: int = 4) -> str:
    hosts = list(hosts or [])
    return ", ".join(hosts[:limit]) + (f" +{len(hosts) - limit}" if len(hosts) > limit else "")


def render_explanation(console: Console, doc: dict[str, Any], explain: bool = False) -> None:
    """Print the variables with their reasons, then conflicts, ties, findings and skipped rules."""
    hosts = doc.get("hosts") or []
    console.print(Text(f"recommendation for {len(hosts)} node(s): {_hosts(hosts, 8)}", style="bold"))
    for item in doc.get("failed") or []:
        console.print(Text(f"  not checked: {item.get('host')}: {item.get('reason')}", style="red"))
    if doc.get("env"):
        console.print(Text("set", style="bold"))
        for var, value in doc["env"].items():
            rules = ", ".join(dict.fromkeys(str(r.get("rule", ""))
                                            for r in doc["reasons"].get(var) or []))
            # the assignment is one unbroken line (users copy it); the rules go under it
            console.print(Text(f"  {var}={value}"), soft_wrap=True)
            console.print(Text(f"    set by {rules or '-'}"
                               + ("" if explain else "  (--explain says why)"), style="dim"))
    else:
        console.print(Text("set: nothing (NCCL's defaults fit these nodes)"))
    for c in doc.get("conflicts") or []:
        console.print(Text(f"CONFLICT {c['var']} not set: {c['why']}", style="bold red"))
        for reason in c.get("reasons") or []:
            console.print(Text(f"  {reason}", style="red"))
    for w in doc.get("withheld") or []:
        console.print(Text(f"WITHHELD {w['var']}={w['value']} ({w['rule']}): {w['why']}",
                           style="yellow"))
    for r in doc.get("refused") or []:
        console.print(Text(f"REFUSED {r['var']}: {r['why']}", style="bold red"))
    for t in doc.get("ties") or []:
        if t.get("decided_by"):
            console.print(Text(f"TIE {t['var']} decided by bench: {t.get('verdict')}", style="green"))
        else:
            console.print(Text(f"{tie_line(t)}; decide with: {t['decide_with']}",
                               style="yellow"))
    overrides: dict[tuple[str, str, str], list[str]] = {}
    for o in doc.get("env_overrides") or []:
        overrides.setdefault((o["var"], o["value"], o["recommended"]), []).append(o["host"])
    for (var, value, recommended), where in overrides.items():
        console.print(Text(f"note: {var}={value} in the environment of {_hosts(where, 4)} wins "
                           f"over the file's {recommended}; unset it there", style="yellow"))
    findings = group_findings(f for f in doc.get("findings") or [] if not f.get("env"))
    if findings:  # blocks, not table cells: the message gets the whole width
        console.print(Text("findings", style="bold"))
        for f in findings:
            console.print(Text.assemble((f"{f['severity']:<8}",
                                         SEVERITY_STYLE.get(f["severity"], "")), " ",
                                        (str(f["rule"]), "bold"),
                                        f"  on {_hosts(f.get('hosts'))}"))
            body = Table.grid(padding=(0, 1))
            body.add_column(width=8)
            body.add_column()
            body.add_row("", Text(str(f["message"])))
            console.print(body)
    skipped = doc.get("skipped") or []
    if skipped:
        rules = sorted({s["rule"] for s in skipped})
        console.print(Text(f"skipped (facts missing): {', '.join(rules)}"
                           + ("" if explain else "  (--explain says why)"), style="dim"))
    for e in doc.get("errors") or []:
        console.print(Text(f"rule error {e['rule']}: {e['error']}", style="bold red"))
    if explain:
        render_reasons(console, doc)


def render_reasons(console: Console, doc: dict[str, Any]) -> None:
    """The full reasons: per variable and per finding, the rule's why, citation and fix."""
    console.print(Text("\nwhy", style="bold"))
    seen: set[str] = set()
    for var, reasons in (doc.get("reasons") or {}).items():
        console.print(Text(f"{var}={doc['env'][var]}", style="bold"))
        for r in reasons:
            console.print(Text(f"  {r['rule']} [{r.get('severity')}]: {r.get('message')}"))
            if r["rule"] not in seen:
                seen.add(r["rule"])
                console.print(Text(f"    why: {r.get('why')}"))
                console.print(Text(f"    see: {r.get('docs')}", style="dim"), soft_wrap=True)
    for f in group_findings(f for f in doc.get("findings") or [] if not f.get("env")):
        console.print(Text(f"{f['rule']} [{f['severity']}] on {_hosts(f.get('hosts'), 8)}",
                           style=SEVERITY_STYLE.get(f["severity"], "")))
        console.print(Text(f"  {f['message']}"))
        console.print(Text(f"  fix: {f.get('fix')}"))
        if f["rule"] not in seen:
            seen.add(f["rule"])
            console.print(Text(f"  why: {f.get('why')}"))
            console.print(Text(f"  see: {f.get('docs')}", style="dim"), soft_wrap=True)
    for s in doc.get("skipped") or []:
        console.print(Text(f"skipped {s['rule']} on {_hosts(s.get('hosts'), 8)}: {s['reason']}",
                           style="dim"))
    for t in doc.get("ties") or []:
        for m in t.get("measurements") or []:
            console.print(Text(f"measured {t['var']}={m['value']}: {m['peak_busbw_gbps']:g} GB/s "
                               f"({m['label']}, {m['file']})"))


def render_rules(console: Console, rules: list[Any], explain: bool = False) -> None:
    """``ncclcheck rules``: the registry as a table (``explain``: with why and citation)."""
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("scope", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("title / sets", overflow="fold", min_width=24)
    for rule in rules:
        what = Text(rule.title)
        if rule.sets:
            what.append("\nsets " + ", ".join(rule.sets), style="dim")
        table.add_row(Text(rule.id), Text(rule.scope), Text(rule.severity.value,
                                                             style=SEVERITY_STYLE[rule.severity.value]),
                      what)
    console.print(table)
    if explain:
        for rule in rules:
            console.print(Text(f"\n{rule.id}: {rule.title}", style="bold"))
            console.print(Text(f"  reads: {', '.join(rule.reads)}  sets: {', '.join(rule.sets) or '-'}"))
            console.print(Text(f"  why: {rule.why}"))
            console.print(Text(f"  fix: {rule.fix}"))
            console.print(Text(f"  see: {rule.docs}", style="dim"), soft_wrap=True)


def render_verify(console: Console, result: dict[str, Any]) -> None:
    """What ``--verify`` found: the library, how the file was read, the bootstrap interface."""
    boot = result.get("bootstrap") or {}
    uid = result.get("unique_id_address") or {}
    head = (f"verify with {result.get('library') or 'no libnccl'} "
            f"(NCCL {result.get('nccl_version') or '?'}, {result.get('method') or '-'}): ")
    if result.get("ok"):
        console.print(Text(head + f"NCCL read every variable and bootstraps on "
                                  f"{boot.get('interface')} {uid.get('address')}:{uid.get('port')}",
                           style="green"))
    else:
        console.print(Text(head + "FAILED", style="bold red"))
    for problem in result.get("problems") or []:
        console.print(Text(f"  {problem}", style="red"))
    for warning in result.get("warnings") or []:
        console.print(Text(f"  warning: {warning}", style="yellow"))
    if result.get("ok"):
        return
    for line in result.get("log_tail") or []:
        console.print(Text(f"  | {line}", style="dim"))
