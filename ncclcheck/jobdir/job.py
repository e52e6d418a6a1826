"""One failed job's artifacts joined: dumps and text in, the verdict part of a diagnosis out.

:class:`JobReader` takes each file as :func:`sniff` recognises it by content (a Flight Recorder
pickle or JSON dump, else text) and :meth:`JobReader.result` returns ``culprits``,
``first_desync``, ``progress`` and ``job`` (class, next step, stacks, disagreements) for the
``ncclcheck/diagnosis`` document.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

from ncclcheck.jobdir.fr import Intern, NotADump, RankTrace, no_gc, parse_bytes
from ncclcheck.jobdir.text import JobText, TextScanner
from ncclcheck.jobdir.unpickle import MAX_PICKLE_BYTES
from ncclcheck.jobdir.verdict import judge
from ncclcheck.jobdir.advice import explain
from ncclcheck.jobdir.textjudge import judge_text

MAX_PROGRESS = 4096


def sniff(head: bytes) -> str:
    """``"fr"`` for a Flight Recorder dump (pickle, or JSON holding its keys), else ``"text"``.

    >>> sniff(b"\\x80\\x04\\x95"), sniff(b'{"comm_lib_version":"","entries":['), sniff(b"NCCL INFO")
    ('fr', 'fr', 'text')
    """
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "fr"
    if head.lstrip()[:1] == b"{" and (b'"entries"' in head or b'"pg_config"' in head):
        return "fr"
    return "text"


class JobReader:
    """Collects dumps and text scanners of one job."""

    def __init__(self) -> None:
        self.sigs = Intern()
        self.stacks = Intern()
        self.dumps: list[RankTrace] = []
        self.text = JobText()
        self.bad: list[str] = []
        #: path -> (kind, trace or message, bytes) read ahead by :func:`~.inputs.prefetch`
        self.prefetched: dict[str, tuple[str, Any, int]] = {}

    def add_dump(self, path: str, data: bytes, source: str = "") -> None:
        """Read one dump's bytes (``UnsafePickle`` propagates: the caller refuses the input)."""
        if len(data) > MAX_PICKLE_BYTES:
            self.bad.append(f"{path}: over {MAX_PICKLE_BYTES >> 20} MiB, not read")
            return
        with no_gc():
            try:
                trace = parse_bytes(data, path, self.sigs, self.stacks)
            except NotADump as exc:
                self.bad.append(f"{path}: {exc}")
                return
        trace.source = source or path
        self.dumps.append(trace)

    def scanner(self, name: str, labelled: bool = False) -> TextScanner:
        """A line scanner for one text input (``labelled``: srun --label'd lines)."""
        return TextScanner(self.text, name, labelled)

    def found_anything(self) -> bool:
        """Did any input hold a dump or a job-level line?"""
        self.text.resolve()
        return bool(self.dumps or self.text.torchrun_summary or self.text.srun_tasks
                    or self.text.ras.comms or any(t.watchdog for t in self.text.ranks.values()))

    def result(self, nccl_ranks: list[dict[str, Any]]) -> dict[str, Any]:
        """The document parts; ``nccl_ranks`` is the diagnosis' ``ranks`` (host, pid, GPU)."""
        self.text.resolve()
        place(self.text, nccl_ranks)
        world = sorted(self.text.ranks) if self.text.torchrun_summary else None
        v = judge(self.dumps, self.sigs, self.text, world) if self.dumps else \
            judge_text(self.text, {n["rank"] for n in nccl_ranks if isinstance(n.get("rank"), int)})
        # the job's ranks: the largest process group (the default one holds them all)
        size = max((len(pg.members) for d in self.dumps for pg in d.pgs.values() if pg.members),
                   default=None)
        for c in v["culprits"]:
            where(c, self.text, nccl_ranks, size)
        progress = []
        for d in sorted((d for d in self.dumps if d.rank is not None), key=lambda d: d.rank)[
                :MAX_PROGRESS]:
            for name, pg in d.pgs.items():
                progress.append({"rank": d.rank, "pg": name, "first": pg.first,
                                 "last_entered": pg.last,
                                 "last_completed": _completed(pg) if d.reliable else None})
        first = v["desyncs"][0] if v["desyncs"] else None
        if first and v["culprits"]:
            pgs = {c["pg"] for c in v["culprits"]}
            first = next((d for d in v["desyncs"] if d["pg"] in pgs), first)
        job = explain(v, self, nccl_ranks)
        return {"culprits": v["culprits"], "first_desync": first, "desyncs": v["desyncs"],
                "progress": progress, "job": job}


def _completed(pg: Any) -> int:
    gap = pg.done.find(0)
    return pg.first - 1 + (len(pg.done) if gap < 0 else gap)


def place(text: JobText, nccl_ranks: list[dict[str, Any]]) -> None:
    """Fill ``text.addresses``: each rank's addresses as the artifacts tell them (NCCL's
    bootstrap, OOB and socket interfaces; a host that the launcher gives as an address)."""
    for n in nccl_ranks:
        r = n.get("rank")
        if not isinstance(r, int):
            continue
        for i in (*(n.get("bootstrap") or ()), n.get("oob"), *(n.get("socket_interfaces") or ())):
            if isinstance(i, dict) and i.get("address"):
                text.addresses.setdefault(str(i["address"]), set()).add(r)
    hosts = {r: t.host for r, t in text.ranks.items() if t.host}
    hosts.update((r, t[0]) for r, t in text.srun_tasks.items() if r not in hosts)
    for r, host in hosts.items():
        try:
            ipaddress.ip_address(host)
        except ValueError:
            continue
        text.addresses.setdefault(host, set()).add(r)


def where(c: dict[str, Any], text: JobText, nccl_ranks: list[dict[str, Any]],
          size: Optional[int] = None) -> None:
    """Fill a culprit's host, local rank, pid and GPU from any artifact that tells them
    (``size``: the job's ranks, where the dumps tell it: srun's launch lines must number them)."""
    r = c["rank"]
    t = text.ranks.get(r)
    host: Optional[str] = t.host if t else None
    local = t.local_rank if t else None
    pid = t.pid if t else None
    gpu = None
    if not text.torchrun_summary and r in text.srun_tasks:
        host = host or text.srun_tasks[r][0]
    launched = None if host or text.torchrun_summary else text.launch.host(r, size)
    if launched:                                 # srun -v: the node of a task that said nothing
        host = launched[0]
        c["evidence"].append(launched[1])
    for n in nccl_ranks:
        if n.get("rank") == r:
            host, pid = host or n.get("host"), pid or n.get("pid")
            gpu = (n.get("cuda_devices") or [None])[0]
            break
    for comm in text.ras.comms:
        for rr, g, p, node, _ in comm.ranks:
            if rr == r:
                host, pid, gpu = host or node, pid or p, gpu if gpu is not None else g
    c.pop("ras", None)
    if host is None and c.get("address"):        # known only by the address its peers saw
        host = c["address"]
    c.update(host=host, local_rank=local, pid=pid, gpu=gpu)
    if t is not None:
        if t.exit_evidence and t.exit_evidence not in c["evidence"]:
            c["evidence"].append(t.exit_evidence)
        if t.stack_evidence:
            c["evidence"].append(t.stack_evidence)
        if c["kind"] == "dead" and t.last:
            c["last_lines"] = [f"{at}: {line}" for at, line in t.last]
            c["evidence"].extend(at for at, _ in t.last if at not in c["evidence"])
