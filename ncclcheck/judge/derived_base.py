"""What the whole-log checks share: raising a finding over processes, and counting words."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ncclcheck.logparse.proc import FindingAcc, Proc
from ncclcheck.logparse.state import LogState
from ncclcheck.signatures import BY_ID
from ncclcheck.signatures.base import Detail


def _raise(state: LogState, sig_id: str, message: str, procs: Iterable[Proc],
           evidence: Iterable[Optional[dict[str, Any]]], severity: str = "", cause: str = "",
           fix: str = "", title: str = "") -> FindingAcc:
    """Add a whole-log finding (or extend the line finding with the same id); ``cause`` and
    ``fix`` replace the signature's own words when this check knows better, ``title`` the
    signature's title when the finding comes from something else than the log line the title
    describes (a pasted table, issue 27 item 12)."""
    sig = BY_ID[sig_id]
    acc = state.findings.get(sig_id)
    if acc is None:
        acc = state.findings[sig_id] = FindingAcc(sig)
        acc.message = message
        acc.title = title or None
    elif acc.message is None and acc.detail is not None and not acc.detail.message:
        acc.message = message
    procs = list(procs)
    evs = [e for e in evidence if e]
    acc.add(Detail(severity=severity or sig.severity, cause=cause, fix=fix), None, None, None)
    for ev in evs:
        if ev not in acc.evidence and len(acc.evidence) < 5:
            acc.evidence.append(ev)
    for p in procs:
        if (p.host or p.node) and len(acc.hosts) < 256:
            acc.hosts.add(p.host or p.node)  # type: ignore[arg-type]
        r = p.display_rank()
        if r is not None and len(acc.ranks) < 256:
            acc.ranks.add(r)
    return acc


def plural(n: int, word: str) -> str:
    """``1 process``, ``3 processes``.

    >>> plural(1, "process"), plural(3, "process"), plural(2, "line")
    ('1 process', '3 processes', '2 lines')
    """
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{n} {word}s"


def multi_node(state: LogState) -> bool:
    """Whether the log shows traffic between nodes: two hosts, nNodes > 1 or a NET connection."""
    hosts = {p.host or p.node for p in state.procs.values() if p.host or p.node}
    if len(hosts) > 1:
        return True
    return any((p.nnodes or 0) > 1 or any(t.startswith("NET/") for t in p.transports)
               for p in state.procs.values())


def _by_host(procs: Iterable[Proc]) -> str:
    hosts = sorted({p.host or p.node or "?" for p in procs})
    return ", ".join(hosts[:4]) + (", ..." if len(hosts) > 4 else "")
