"""``ncclcheck probe``: run every registered probe over one host into a facts document.

The facts document (``"schema": "ncclcheck/facts"``)::

    {"schema": "ncclcheck/facts", "schema_version": 1, "ncclcheck_version": "0.1.0",
     "collected_at": "2026-11-21T12:00:00Z", "hostname": "node-01", "root": "/",
     "sections": {"ib": {"status": "ok", "duration_s": 0.004, "sources": [...],
                         "errors": [], "data": {...}}, ...},
     "findings": [...], "skipped": [...], "rule_errors": [...]}

A section's status is ``ok``, ``unavailable`` (the subsystem is absent: ``errors`` says why) or
``error`` (the probe failed: ``errors`` holds ``"TypeName: message"``). One failing section never
stops the others.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from ncclcheck import schema
from ncclcheck.errors import BadInput
from ncclcheck.host.protocol import Host, Unavailable


def run_section(host: Host, name: str, collect: Any) -> dict[str, Any]:
    """Run one probe and wrap its outcome; never raises."""
    start_sources = len(host.sources)
    errors: list[str] = []
    started = time.perf_counter()
    status, data = "ok", None
    try:
        data = collect(host, errors)
    except Unavailable as exc:
        status = "unavailable"
        errors.append(str(exc))
    except Exception as exc:  # a broken probe is data in the output, never a crash
        status = "error"
        errors.append(f"{type(exc).__name__}: {exc}")
    sources = compact_sources(list(dict.fromkeys(host.sources[start_sources:])))
    return {"status": status, "duration_s": round(time.perf_counter() - started, 4),
            "sources": sources, "errors": errors, "data": data}


def compact_sources(sources: list[str]) -> list[str]:
    """Files grouped by directory as ``dir/{a,b}`` (sorted), then commands and queries in order.

    >>> compact_sources(["/sys/a/x", "$ ip -j addr", "/sys/b/z", "/sys/a/y"])
    ['/sys/a/{x,y}', '/sys/b/z', '$ ip -j addr']
    """
    files = sorted(s for s in sources if s.startswith("/"))
    sources = files + [s for s in sources if not s.startswith("/")]
    out: list[str] = []
    group: list[str] = []
    parent = None

    def flush() -> None:
        if group:
            out.append(f"{parent}/{group[0]}" if len(group) == 1
                       else f"{parent}/{{{','.join(group)}}}")
            group.clear()

    for src in sources:
        head, sep, name = src.rpartition("/")
        if not src.startswith("/") or not sep:
            flush()
            parent = None
            out.append(src)
            continue
        if head != parent:
            flush()
            parent = head
        group.append(name)
    flush()
    return out


def open_host(root: str = "/", replay: str | None = None) -> Host:
    """The host to probe: a recorded folder (``--replay``) or the machine under ``root``."""
    import os

    from ncclcheck.host.live import LiveHost
    from ncclcheck.host.recorded import RecordedHost

    if replay:
        try:
            return RecordedHost(replay)
        except FileNotFoundError as exc:
            raise BadInput(str(exc)) from None
    if not os.path.isdir(root):
        raise BadInput(f"--root {root}: not a directory")
    return LiveHost(root)


def select(only: Iterable[str] | None) -> list[str]:
    """Validate ``--only`` names against the registry."""
    from ncclcheck.probes import PROBES

    if not only:
        return list(PROBES)
    wanted = [n.strip() for n in only if n.strip()]
    unknown = [n for n in wanted if n not in PROBES]
    if unknown:
        raise BadInput(f"unknown section {', '.join(unknown)} (known: {', '.join(PROBES)})")
    return [n for n in PROBES if n in wanted]


def collect_facts(host: Host, only: Iterable[str] | None = None,
                  findings: bool = True) -> dict[str, Any]:
    """Probe ``host`` into a facts document, with its local findings."""
    from ncclcheck.probes import PROBES

    sections = {name: run_section(host, name, PROBES[name]) for name in select(only)}
    host_data = sections.get("host", {}).get("data") or {}
    doc = schema.envelope(
        "ncclcheck/facts",
        collected_at=schema.now_utc(),
        hostname=host_data.get("hostname") or _hostname(host),
        root=getattr(host, "root", "/"),
        sections=sections,
    )
    if findings:
        doc.update(local_findings(doc))
    return doc


def local_findings(doc: dict[str, Any]) -> dict[str, Any]:
    """Run the node-scope rules over one facts document."""
    from ncclcheck.rules import NODE_RULES
    from ncclcheck.rules.engine import evaluate

    result = evaluate(NODE_RULES, [doc])
    return {"findings": result["findings"], "skipped": result["skipped"],
            "rule_errors": result["errors"]}


def _hostname(host: Host) -> str:
    text = host.read("proc/sys/kernel/hostname") or host.read("etc/hostname") or ""
    return text.strip() or "unknown"


def judge_as_cluster(nodes: list[dict[str, Any]]) -> None:
    """Judge the peer rules of each node again as one of ``len(nodes)``: a node probed alone
    (over ssh, srun) cannot know it has peers, so its firewall or loopback name was judged as
    a lone machine's. Changes the documents' ``findings`` in place; one node: nothing to do."""
    from ncclcheck.rules import NODE_RULES
    from ncclcheck.rules.common import cluster_of
    from ncclcheck.rules.engine import evaluate

    peer = [r for r in NODE_RULES if r.peers]
    ids = {r.id for r in peer}
    if len(nodes) < 2:
        return
    order = ["error", "warning", "info"]
    with cluster_of(len(nodes)):
        for node in nodes:
            if not isinstance(node.get("findings"), list):
                continue
            kept = [f for f in node["findings"] if f.get("rule") not in ids]
            again = evaluate(peer, [node])["findings"]
            node["findings"] = sorted(kept + again, key=lambda f: (
                order.index(f["severity"]) if f.get("severity") in order else 3, f.get("rule", "")))
