"""Which rank stalled the job: the first desynchronised collective per process group, culprits.

Per process group, the first collective (by sequence id) that not every member completed; at it,
each member is one of:

- ``mismatch``: entered another collective, or the same one with other sizes or dtypes (the
  odd one out against the most common signature);
- ``missing``: has a dump, never entered it (moved on, or finished);
- ``stuck``: never entered it and was alive and waiting elsewhere (its stack, or the launcher
  had to SIGTERM it without it timing out), or entered it and never completed while peers did;
- ``dead``: no dump, and an exit code or signal says it ended (peers may have seen the
  connection close);
- ``straggler``: everything completed, but from nccl's start/complete times its peers waited
  for it (its own wait far the shortest).

Everyone entered it with one signature and nothing completed: no rank is to blame; the network
is the suspect. torchfrtrace's "missing ranks"/"Culprit rank" checks are the model
(torch/distributed/flight_recorder/components/builder.py, utils.py match_one_event).
"""

from __future__ import annotations

from collections import Counter
from statistics import median
from typing import Any, Optional

from ncclcheck.jobdir.fr import Intern, PgTrace, RankTrace
from ncclcheck.jobdir.text import JobText

VICTIM_SIGNALS = {"SIGTERM"}
STRAGGLER_RATIO = 0.2       #: its mean wait under this share of the others' median
STRAGGLER_MIN_MS = 50.0     #: and at least this much shorter


def _frontier(pg: PgTrace) -> int:
    """The last sequence id up to which this rank completed everything."""
    gap = pg.done.find(0)
    seq = pg.first - 1 + (len(pg.done) if gap < 0 else gap)
    return max(seq, pg.last_completed if pg.last_completed <= pg.last else seq)


def _exit_info(r: int, text: JobText) -> Optional[dict[str, Any]]:
    t = text.ranks.get(r)
    if t is not None and (t.exitcode is not None or t.signal):
        return {"exitcode": t.exitcode, "signal": t.signal, "evidence": t.exit_evidence}
    if not text.torchrun_summary and r in text.srun_tasks:
        host, reason, code, sig, at = text.srun_tasks[r]
        return {"exitcode": code, "signal": sig, "evidence": at, "reason": reason}
    return None


def _victim_exit(info: Optional[dict[str, Any]]) -> bool:
    return bool(info) and (info["signal"] in VICTIM_SIGNALS or info["exitcode"] in (-15, 143))


def closed_by(quiet: list[int], text: JobText) -> dict[int, tuple[str, str]]:
    """Rank -> (address, evidence) for the ranks in ``quiet`` (no dump, no exit seen) whose
    peers saw their connection close (gloo's "Connection closed by peer [addr]:port"): the ones
    the artifacts place at that address; where nothing places it, the one quiet rank."""
    out: dict[int, tuple[str, str]] = {}
    for addr, at in text.closed_peers.items():
        placed = text.addresses.get(addr)
        for r in quiet if placed is not None else quiet[:1] if len(quiet) == 1 else ():
            if placed is None or r in placed:
                out.setdefault(r, (addr, at))
    return out


def _diff(a: tuple, b: tuple) -> str:
    names = ("op", "sizes", "dtypes", "output sizes")
    return ", ".join(f"{n} {x} vs {y}" for n, x, y in zip(names, a, b) if x != y)


def _first_diff(a: PgTrace, b: PgTrace, lo: int, hi: int) -> int:
    """The first sequence id in ``lo..hi`` where ``a`` and ``b`` hold different signatures
    (``hi + 1``: none), by bisecting on slice equality (compared at C speed)."""
    def same(n: int) -> bool:
        return a.sig[lo - a.first:lo - a.first + n] == b.sig[lo - b.first:lo - b.first + n]
    left, right = 0, hi - lo + 1
    if same(right):
        return hi + 1
    while left < right:
        mid = (left + right + 1) // 2
        if same(mid):
            left = mid
        else:
            right = mid - 1
    return lo + left


def _pad(pg: PgTrace, hi: int) -> None:
    while pg.first + len(pg.sig) <= hi:
        pg.sig.append(-1), pg.stack.append(-1), pg.record.append(-1)
        pg.done.append(0), pg.wait_ms.append(-1.0)


def desync_seq(traces: dict[int, PgTrace], reliable: bool, failed: bool) -> Optional[int]:
    """The first collective not every rank entered alike (or, with nccl's completion states,
    not every rank completed); the last one when all agree but the job failed; else None."""
    lasts = {r: pg.last for r, pg in traces.items()}
    hi = max(lasts.values())
    lo = max(pg.first for pg in traces.values())
    for pg in traces.values():
        _pad(pg, hi)
    ref = traces[max(lasts, key=lasts.__getitem__)]
    seq = min([_first_diff(pg, ref, lo, hi) for pg in traces.values()]
              + [v + 1 for v in lasts.values() if v < hi])
    if reliable:
        seq = min([seq] + [_frontier(pg) + 1 for pg in traces.values()])
    if seq <= hi:
        return seq
    return hi if failed and hi > 0 else None


def judge_pg(name: str, traces: dict[int, PgTrace], members: list[int], sigs: Intern,
             text: JobText, files: dict[int, str], reliable: bool
             ) -> tuple[Optional[dict[str, Any]], list[dict[str, Any]], bool]:
    """``(first_desync, culprits, network)`` of one process group."""
    lasts = {r: pg.last for r, pg in traces.items()}
    nodump = [r for r in members if r not in traces]
    failed = bool(nodump) or any(t.timed_out or (t.exitcode not in (None, 0))
                                 for t in text.ranks.values()) or bool(text.srun_tasks)
    if not traces:
        return None, [], False
    found = desync_seq(traces, reliable, failed)
    if found is None:
        return None, [], False
    seq = found
    entered = {r: traces[r].at(seq) for r in traces if traces[r].at(seq) >= 0}
    counts = Counter(entered.values())
    # a tie (gloo aborted a peer, 1 vs 1) goes to the signature the job called most often
    usual = {s: sum(pg.sig.count(s) for pg in traces.values()) for s in counts}
    major = max(counts, key=lambda s: (counts[s], usual[s],
                                       -min(r for r, v in entered.items() if v == s))) \
        if counts else None
    msig = sigs.values[major] if major is not None else ("?", "", "", "")
    desync = {"pg": name, "seq": seq, "op": msig[0], "sizes": msig[1], "dtypes": msig[2],
              "entered": sorted(entered),
              "completed": sorted(r for r in entered if reliable and traces[r].completed(seq))}
    if reliable:
        desync["started"] = sorted(r for r in entered if traces[r].started(seq))
    anyone_done = bool(desync["completed"])
    closed = closed_by([r for r in members if r not in traces and _exit_info(r, text) is None],
                       text)
    culprits: list[dict[str, Any]] = []
    for r in sorted(set(members) | set(traces)):
        pg = traces.get(r)
        info = _exit_info(r, text)
        t = text.ranks.get(r)
        c: dict[str, Any] = {"rank": r, "pg": name, "evidence": []}
        if pg is None:
            if info and not _victim_exit(info):
                c.update(kind="dead", exit=info, evidence=[info["evidence"]])
            elif r in closed:
                addr, at = closed[r]
                c.update(kind="dead", address=addr, evidence=[at],
                         exit={"exitcode": None, "signal": None, "evidence": at,
                               "reason": f"its peers saw its connection close ({addr})"},
                         detail=f"no dump, and its peers saw its connection ({addr}) close")
            else:
                c.update(kind="missing", detail="no dump and no exit seen from this rank")
                if info:
                    c["evidence"] = [info["evidence"]]
        elif r in entered and entered[r] != major:
            c.update(kind="mismatch", detail=_diff(sigs.values[entered[r]], msig),
                     called=sigs.values[entered[r]][0])
        elif r in entered:
            if anyone_done and not pg.completed(seq):
                c.update(kind="stuck", detail="entered it and never completed while peers did")
            else:
                continue
        elif lasts[r] < seq:
            waiting = t is not None and (bool(t.stack) or (_victim_exit(info) and not t.timed_out))
            c.update(kind="stuck" if waiting else "missing",
                     detail=(f"never entered it (last entered seq {lasts[r]})"
                             + (", alive elsewhere when stopped" if waiting else "")))
        else:
            continue
        if pg is not None:
            i = min(max(seq, pg.first), max(pg.last, pg.first)) - pg.first
            c["evidence"].insert(0, f"{files.get(r, '?')} (record {pg.record[i]}, "
                                    f"seq {pg.first + i})")
        culprits.append(c)
    if any(c["kind"] == "mismatch" for c in culprits):
        # gloo aborts a receiver that got another size (GLOO_ENFORCE "Is there a distributed
        # collective mismatch"): its SIGABRT follows from the mismatch, it did not cause it
        for c in culprits:
            if c["kind"] == "dead" and (c["exit"].get("signal") == "SIGABRT"
                                        or c["exit"].get("exitcode") in (-6, 134)):
                c["kind"] = "consequence"
        desync["consequences"] = [c["rank"] for c in culprits if c["kind"] == "consequence"]
        culprits = [c for c in culprits if c["kind"] != "consequence"]
    # A collective no GPU started (every nccl entry still "scheduled") waited behind earlier
    # work on its stream: the network never saw it. One rank has no network to blame either.
    network = (not culprits and len(entered) == len(members) and not anyone_done
               and len(set(entered.values())) == 1 and len(members) > 1
               and (not reliable or bool(desync["started"])))
    return desync, culprits, network


def stragglers(name: str, traces: dict[int, PgTrace]) -> list[dict[str, Any]]:
    """Ranks the others waited for, from nccl's started->completed times of shared collectives."""
    waits: dict[int, list[float]] = {r: [] for r in traces}
    if len(traces) < 3:
        return []
    lo = max(pg.first for pg in traces.values())
    hi = min(pg.first + len(pg.wait_ms) for pg in traces.values())
    for seq in range(lo, hi):
        row = {r: pg.wait_ms[seq - pg.first] for r, pg in traces.items()}
        if all(v >= 0 for v in row.values()):
            for r, v in row.items():
                waits[r].append(v)
    if not all(waits.values()):
        return []
    means = {r: sum(v) / len(v) for r, v in waits.items()}
    r = min(means, key=means.__getitem__)
    others = median(v for k, v in means.items() if k != r)
    if means[r] < STRAGGLER_RATIO * others and others - means[r] >= STRAGGLER_MIN_MS:
        return [{"rank": r, "pg": name, "kind": "straggler", "evidence": [],
                 "detail": f"its peers waited {others:.0f} ms per collective (median) for it; "
                           f"it waited {means[r]:.0f} ms"}]
    return []


def judge(dumps: list[RankTrace], sigs: Intern, text: JobText,
          world: Optional[list[int]] = None) -> dict[str, Any]:
    """The verdict over every dump and the text: per pg desyncs, culprits, the class."""
    by_pg: dict[str, dict[int, PgTrace]] = {}
    files = {d.rank: d.file for d in dumps if d.rank is not None}
    members: dict[str, set[int]] = {}
    best: dict[int, RankTrace] = {}
    for d in dumps:                       # one dump per rank: the fullest (pickle and JSON twins)
        if d.rank is not None and (d.rank not in best or d.entries > best[d.rank].entries):
            best[d.rank] = d
    dumps = list(best.values())
    for d in dumps:
        if d.rank is None:
            continue
        for name, pg in d.pgs.items():
            traces = by_pg.setdefault(name, {})
            traces[d.rank] = pg
            members.setdefault(name, set()).update(pg.members or ())
    desyncs, culprits, network = [], [], []
    for name in sorted(by_pg, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
        traces = by_pg[name]
        m = sorted(members[name] or set(traces) | set(world or ()))
        reliable = any(d.reliable for d in dumps if d.rank in traces)
        desync, found, net = judge_pg(name, traces, m, sigs, text, files, reliable)
        if desync:
            desyncs.append(desync)
        if net:
            network.append(desync)
        found = found or ([] if desync else stragglers(name, traces))
        seen = {c["rank"] for c in culprits}
        culprits.extend(c for c in found if c["rank"] not in seen)
    return {"desyncs": desyncs, "culprits": culprits, "network": network}
