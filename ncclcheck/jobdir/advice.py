"""The class of a failure, its next step, and where torchrun's "Root Cause" disagrees.

- ``mismatch``: a program bug (ranks called different collectives, or sizes/dtypes): both stacks;
- ``rank``: a missing or stuck rank, its own code (data loader, I/O, a branch): its stack;
- ``dead``: a process ended: exit code or signal (137 = SIGKILL, often the OOM killer; 139 =
  SIGSEGV) and its last lines;
- ``straggler``: one rank slow, peers waited;
- ``network``: every rank entered the collective and none completed: measure the links between
  the hosts involved with ``ncclcheck bench --pairwise`` (nccl dumps: only when some rank's GPU
  started it, and there are peers);
- ``stream``: every rank entered it and no GPU started it (nccl's state "scheduled"): work queued
  before it on the stream held it (seen on an H200: an all_reduce behind a long kernel,
  tests/fixtures/device/h200/fr/);
- ``none``: nothing desynchronised.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.jobdir.fr import frames_at
from ncclcheck.jobdir.textjudge import ras_notes

_EXIT_MEANING = {137: "SIGKILL (often the kernel's OOM killer: check dmesg)",
                 -9: "SIGKILL (often the kernel's OOM killer: check dmesg)",
                 139: "SIGSEGV (a segmentation fault)", -11: "SIGSEGV (a segmentation fault)",
                 134: "SIGABRT", -6: "SIGABRT", 135: "SIGBUS", -7: "SIGBUS"}


def _exit_text(c: dict[str, Any]) -> str:
    e = c.get("exit") or {}
    code, sig = e.get("exitcode"), e.get("signal")
    meaning = _EXIT_MEANING.get(code) if code is not None else None
    if code is not None:
        return f"exit code {code}" + (f", {meaning}" if meaning else (f", {sig}" if sig else ""))
    return sig or e.get("reason") or "no exit status seen"


def _stack(reader: Any, c: dict[str, Any], seq: int) -> list[str]:
    """Where the rank waited (its own stack, for stuck/missing), else the call in its dump."""
    t = reader.text.ranks.get(c["rank"])
    if t is not None and t.stack and c["kind"] != "mismatch":
        return list(t.stack)
    for d in reader.dumps:
        pg = d.pgs.get(c["pg"]) if d.rank == c["rank"] else None
        if pg is not None:
            return list(frames_at(d.source, c["pg"], min(max(seq, pg.first), max(pg.last, 1))))
    return []


def _majority_stack(reader: Any, desync: dict[str, Any], skip: set[int]) -> list[str]:
    for d in reader.dumps:
        pg = d.pgs.get(desync["pg"])
        if pg is not None and d.rank not in skip and pg.at(desync["seq"]) >= 0:
            return list(frames_at(d.source, desync["pg"], desync["seq"]))
    return []


def _who(c: dict[str, Any]) -> str:
    bits = [f"rank {c['rank']}"]
    if c.get("host"):
        bits.append(f"on {c['host']}")
    if c.get("local_rank") is not None:
        bits.append(f"local rank {c['local_rank']}")
    if c.get("gpu") is not None:
        bits.append(f"GPU {c['gpu']}")
    if c.get("pid"):
        bits.append(f"pid {c['pid']}")
    return " ".join(bits)


def _what(d: dict[str, Any]) -> str:
    return (f"{d['op']} #{d['seq']}" + (f" of process group {d['pg']!r}" if d["pg"] != "?" else "")
            + (f" (sizes {d['sizes']})" if d["sizes"] != "?" else ""))


def explain(v: dict[str, Any], reader: Any, nccl_ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``job`` part of the document: class, verdict line, next step, stacks, disagreements."""
    culprits = v["culprits"]
    desync = next((d for d in v["desyncs"] if culprits and d["pg"] == culprits[0]["pg"]),
                  v["desyncs"][0] if v["desyncs"] else None)
    kinds = {c["kind"] for c in culprits}
    stacks: dict[str, list[str]] = {}
    seq = desync["seq"] if desync else 0
    if "mismatch" in kinds:
        cls = "mismatch"
        odd = [c for c in culprits if c["kind"] == "mismatch"]
        for c in odd:
            stacks[f"rank {c['rank']}"] = _stack(reader, c, seq)
        stacks["the others"] = _majority_stack(reader, desync, {c["rank"] for c in odd}) \
            if desync else []
        step = ("a program bug: the ranks called different collectives (or sizes/dtypes) at the "
                "same point; compare the two stacks below")
    elif "dead" in kinds:
        cls = "dead"
        step = "; ".join(f"rank {c['rank']} ended: {_exit_text(c)}" for c in culprits
                         if c["kind"] == "dead") + ": read its last lines below"
    elif kinds & {"missing", "stuck"}:
        cls = "rank"
        for c in culprits:
            stacks[f"rank {c['rank']}"] = _stack(reader, c, seq)
        step = ("the rank's own code held it back (a data loader, I/O, a branch that skips the "
                "collective): look where its stack below waits")
    elif "straggler" in kinds:
        cls = "straggler"
        step = "one rank is slow and its peers wait: profile that rank (data loading, its GPU)"
    elif v["network"]:
        cls = "network"
        step = "every rank entered the collective and none completed: suspect the network"
    elif desync and desync.get("started") == [] and desync.get("entered") and \
            not desync.get("completed"):
        cls = "stream"
        step = ("no rank's GPU started the collective (Flight Recorder state 'scheduled'): work "
                "queued before it on the same stream held it (a long or hung kernel, a host-side "
                "wait); the network never saw it: look at what ran before it")
    else:
        cls = "none"
        step = ""
    if cls == "none" and desync and len(set((desync.get("ops") or {}).values())) > 1:
        cls = "mismatch"
        step = ("the ranks wait in different collectives: a program bug (or a rank that skipped "
                "one); Flight Recorder dumps (TORCH_NCCL_DUMP_ON_TIMEOUT=1) would show the calls")
    unplaced = [str(c["rank"]) for c in culprits if not c.get("host")]
    if unplaced and reader.text.srun_tasks and not reader.text.launch.steps:
        # srun's error lines name failed tasks only: a rank that exited 0 is on no node
        step += (f"; no file names the node of rank {', '.join(unplaced)}: run srun with -v (or "
                 "SLURM_DEBUG=1) and keep its output, whose launch lines place every task")
    hosts = sorted({h for h in (n.get("host") for n in nccl_ranks) if h}
                   | {t.host for t in reader.text.ranks.values() if t.host})
    out: dict[str, Any] = {"class": cls, "next_step": step, "stacks": stacks,
                           "disagreements": disagreements(reader, culprits, desync)
                           + ras_notes(reader.text, culprits)}
    if cls == "network":
        out["suspect_hosts"] = hosts
        out["pairwise"] = (f"printf '%s\\n' {' '.join(hosts) or 'HOST1 HOST2'} > suspects && "
                           "ncclcheck bench --pairwise --hostfile suspects -e 64M")
    if culprits:
        out["verdict"] = (f"{_what(desync)} desynchronised: " if desync else "") + "; ".join(
            f"{_who(c)} {c['kind']}" for c in culprits[:8]) + (
            f" (+{len(culprits) - 8} more)" if len(culprits) > 8 else "")
    elif cls == "network":
        out["verdict"] = f"every rank entered {_what(desync)} and none completed: the network"
    elif cls == "stream":
        out["verdict"] = (f"every rank entered {_what(desync)} and no GPU started it: earlier work "
                          "on the stream held it, not the network")
    elif reader.dumps:
        out["verdict"] = (f"no rank at fault: {len(reader.dumps)} Flight Recorder dumps agree, "
                          "every collective they hold completed")
    elif desync and desync.get("ops"):
        out["verdict"] = (f"the ranks timed out in different collectives at #{desync['seq']}: "
                          + ", ".join(f"rank {r} {op}" for r, op in sorted(
                              desync["ops"].items(), key=lambda x: int(x[0])))
                          + " (no majority: a program bug, or a rank that skipped one)"
                          if len(set(desync["ops"].values())) > 1 else
                          f"every rank seen timed out in {desync['op']} #{desync['seq']}: no "
                          "rank stands out in the text (Flight Recorder dumps would say more)")
    elif reader.text.ras.comms:
        out["verdict"] = ("no rank named from the RAS output alone: "
                          + ", ".join(f"{c.status} on communicator {c.hash}"
                                      for c in reader.text.ras.comms[:4]))
    else:
        out["verdict"] = "no Flight Recorder dumps: ranks judged from the text only"
    return out


def disagreements(reader: Any, culprits: list[dict[str, Any]],
                  desync: Any = None) -> list[str]:
    """Where torchrun's "Root Cause" points elsewhere than the verdict, and why (a rank gloo
    aborted on a size mismatch, ``desync["consequences"]``, is one that followed from it)."""
    named = {c["rank"] for c in culprits}
    after = set((desync or {}).get("consequences") or ())
    out = []
    for r, t in sorted(reader.text.ranks.items()):
        if t.root_cause and culprits and r not in named:
            why = ("one gloo aborted when it received another size (a consequence of the "
                   "mismatch)" if r in after else "which in a hang is a rank that timed out waiting")
            out.append(f"torchrun's Root Cause names rank {r} (exit code {t.exitcode}): it is the "
                       f"first process that exited, {why}, not the one that held the job "
                       f"({', '.join(map(str, sorted(named)))})")
    return out
