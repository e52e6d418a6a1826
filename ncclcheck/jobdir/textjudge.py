"""The verdict from text alone (no Flight Recorder dump): torch's watchdog lines and NCCL RAS.

- Watchdog lines (``[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80078,
  OpType=BROADCAST, NumelIn=5056, ...)``) give the collective each rank timed out in. At the
  lowest sequence id, a rank in another op than a strict majority is a ``mismatch``; with no
  majority (two ranks, two ops) nobody is named and the disagreement is reported.
- RAS: INCOMPLETE lists ranks it has no data from (``missing``, with GPU, pid and node); MISMATCH
  lists the smaller group of ranks by operation count: named ``stuck`` when they are behind,
  and only a note when they are ahead (NVIDIA/nccl#1911: the ranks holding the job are then the
  ones it does not list).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.jobdir.text import JobText


def ras_notes(text: JobText, culprits: list[dict[str, Any]]) -> list[str]:
    """Where RAS says something else than the verdict, and why."""
    named = {c["rank"] for c in culprits}
    out = []
    for c in text.ras.comms:
        listed = sorted(r for r, *_ in c.ranks)
        behind = c.listed_behind()
        if behind is False:
            out.append(f"RAS ({c.at}) lists ranks {', '.join(map(str, listed))} in MISMATCH, but "
                       f"they are ahead ({' vs '.join(f'{n} ranks at {op}' for n, op in c.counts)}):"
                       " RAS names the smaller group, and the ranks holding the job are the ones "
                       "it does not list")
        elif listed and culprits and not set(listed) & named:
            out.append(f"RAS ({c.at}) reports {c.status} for ranks "
                       f"{', '.join(map(str, listed))}: RAS counts operations per communicator "
                       "and does not see which call a rank waits in")
    return out


def judge_text(text: JobText, logged: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    """``{desyncs, culprits, network}`` as :func:`~.verdict.judge` returns, from text.

    ``logged``: the ranks whose NCCL lines were read; one of them with no watchdog timeout
    while the others timed out in the same collective never entered it (or failed before)."""
    culprits: list[dict[str, Any]] = []
    desyncs: list[dict[str, Any]] = []
    seen = {r: t.watchdog for r, t in text.ranks.items() if t.watchdog}
    if seen:
        seq = min(s for s, _, _ in seen.values())
        at_seq = {r: (op, ev) for r, (s, op, ev) in seen.items() if s == seq}
        counts = Counter(op for op, _ in at_seq.values())
        top = counts.most_common()
        major = top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else None
        desyncs.append({"pg": "?", "seq": seq, "op": major or "/".join(sorted(counts)),
                        "sizes": "?", "dtypes": "?", "entered": sorted(at_seq),
                        "completed": [], "ops": {str(r): op for r, (op, _) in at_seq.items()}})
        quiet = sorted(logged - set(seen)) if len(at_seq) >= 2 and major else []
        if len(quiet) < len(at_seq):
            culprits += [{"rank": r, "pg": "?", "kind": "missing", "evidence": [],
                          "detail": f"its NCCL log was read, and it has no watchdog timeout at "
                                    f"{major} #{seq} where {len(at_seq)} ranks timed out: it never "
                                    "entered it, or failed before (see its findings)"}
                         for r in quiet]
        if major:
            culprits += [{"rank": r, "pg": "?", "kind": "mismatch", "evidence": [ev],
                          "detail": f"timed out in {op} #{seq} where the others are in {major}",
                          "called": op}
                         for r, (op, ev) in sorted(at_seq.items()) if op != major]
    for c in text.ras.comms:
        kind = "missing" if c.status == "INCOMPLETE" else (
            "stuck" if c.listed_behind() else None)
        for r, gpu, pid, node, at in c.ranks if kind else ():
            if r not in {x["rank"] for x in culprits}:
                culprits.append({"rank": r, "pg": c.hash, "kind": kind, "evidence": [at],
                                 "detail": f"RAS {c.status}", "ras": {"gpu": gpu, "pid": pid,
                                                                      "host": node}})
    return {"desyncs": desyncs, "culprits": culprits, "network": []}
