"""Many Flight Recorder dumps read by worker processes: bounded, ordered, nothing left behind.

Unpickling is most of a dump's time and runs in C under each process's own lock, so
:func:`read_ahead` forks a few workers (one per CPU this process may use, at most
:data:`MAX_WORKERS`; :func:`~ncclcheck.logparse.parallel.cpus`). Each is handed chunks of dumps
as it drains (two chunks in flight), reads them with the reader one process uses
(:func:`~.inputs.read_dump`: the restricted unpickler, nothing in a dump runs) and sends back for
each, over its own pipe, only what the verdict keeps:
the compact columns as bytes and the signatures and member lists it met for the first time, as a
pickle of plain data (tuples, strings, bytes, numbers) that this side reads with the same
restricted unpickler. The messages are taken in the dumps' order (one that comes early waits for
those before it), so signatures are numbered as one process numbers them and the document is the
same. A worker holds one dump at a time, and this process keeps only what the verdict keeps.

On a refused dump the workers are stopped (the refusal is raised where the dump comes in
order). A worker that fails (killed, out of memory) or meets an error the reader does not expect
stops the pool too: the dumps no worker gave are read in this process as if there had been no
pool, so the outcome is the same. Workers ignore Ctrl-C (this process handles it), take
SIGTERM's default, die with this process (``PR_SET_PDEATHSIG``), and are terminated and reaped
before :func:`read_ahead` returns or raises. Linux only (fork; elsewhere one process reads).
"""

from __future__ import annotations

import os
import pickle
import sys
from array import array
from typing import Any, Callable, Iterator, Optional

from ncclcheck.errors import BadInput
from ncclcheck.jobdir.fr import PgTrace, RankTrace
from ncclcheck.jobdir.job import JobReader
from ncclcheck.jobdir.unpickle import UnsafePickle, safe_loads
from ncclcheck.logparse.parallel import cpus, signals_blocked, worker_start

#: a worker's RSS is ~35 MiB of the interpreter (shared with this process, but counted in each)
#: plus its dump; 8 of them read 4,096 dumps in seconds and keep the tree under 1 GiB
MAX_WORKERS = 8
#: memory a worker keeps when freed, for its next dump (glibc's trim and mmap thresholds)
KEEP_BYTES = 64 << 20


def _pack(trace: RankTrace, members: dict[tuple, int], new_members: list[tuple]) -> tuple:
    """A trace as plain data; ``members`` numbers the member lists sent already (the new ones
    are added to ``new_members``)."""
    pgs = []
    for name, pg in trace.pgs.items():
        key = pg.members
        m = -1
        if key is not None:
            m = members.get(key, -1)
            if m < 0:
                m = members[key] = len(members)
                new_members.append(key)
        pgs.append((name, pg.desc, m, pg.first, pg.sig.tobytes(), bytes(pg.done),
                    bytes(pg.began), pg.record.tobytes(), pg.wait_ms.tobytes(),
                    pg.last_completed))
    return (trace.file, trace.rank, trace.version, trace.backend, trace.entries,
            trace.reliable, trace.source, tuple(pgs))


def _worker(tasks: Any, results: Any, dumps: list[str], read: Callable[..., Any],
            parent: int) -> None:
    """In a worker: for each chunk of indices into ``dumps`` it is given, one message per dump
    (``read``: :func:`~.inputs.read_dump`)."""
    libc = worker_start(parent)
    if libc is False:
        return
    try:
        # glibc maps a large buffer (a dump's bytes) and unmaps it when freed, so every dump
        # faulted its pages in again (~440 faults a dump: a tenth of a worker's CPU): freed
        # memory is kept for the next dump instead, up to :data:`KEEP_BYTES`
        libc.mallopt(-1, KEEP_BYTES)                                  # M_TRIM_THRESHOLD
        libc.mallopt(-3, KEEP_BYTES // 2)                             # M_MMAP_THRESHOLD
    except AttributeError:                     # no libc (None), or no mallopt (not glibc)
        pass
    job = JobReader()
    sent_sigs = 0
    members: dict[tuple, int] = {}
    while True:
        chunk = tasks.recv()
        if chunk is None:
            break
        for i in chunk:
            new_members: list[tuple] = []
            before = len(job.bad)
            try:
                stats = read(job, dumps[i])
            except BadInput as exc:
                msg: tuple = ("error", str(exc), 0)
            except Exception as exc:  # noqa: BLE001 - read again by the parent, which raises it
                msg = ("again", f"{type(exc).__name__}: {exc}"[:200], 0)
            else:
                if stats is None:
                    msg = ("text", None, 0)
                elif len(job.bad) > before:
                    msg = ("bad", job.bad[-1], stats.bytes)
                else:
                    msg = ("trace", _pack(job.dumps.pop(), members, new_members), stats.bytes)
            new_sigs = tuple(job.sigs.values[sent_sigs:])
            sent_sigs = len(job.sigs.values)
            results.send_bytes(pickle.dumps((i, *msg, new_sigs, tuple(new_members)),
                                            pickle.HIGHEST_PROTOCOL))
            if msg[0] in ("error", "again"):
                return


class _Remote:
    """One worker: its pipes, the dumps given to it and not answered yet, and its numbering of
    signatures and member lists (as sent, in its order) mapped to this job's."""

    def __init__(self, ctx: Any, dumps: list[str], read: Callable[..., Any]) -> None:
        self.tasks, tasks = ctx.Pipe(duplex=False)[::-1]
        self.recv, results = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker, args=(tasks, results, dumps, read, os.getpid()),
                                daemon=True)
        self.proc.start()
        tasks.close()
        results.close()
        self.waiting = 0
        self.gone = False
        self.sigs: dict[int, int] = {-1: -1}   # worker's signature id -> this job's (-1: none)
        self.same = True                        # ... all the same number
        self.members: list[tuple[int, ...]] = []

    def give(self, chunk: list[int]) -> bool:
        """Hand ``chunk`` over; False when the worker is gone (it returns after an error or an
        unexpected exception, and may have done so while its earlier messages are still being
        read here): it is given nothing more."""
        if self.gone:
            return False
        try:
            self.tasks.send(chunk)
        except OSError:                         # EPIPE: nothing reads its task pipe any more
            self.gone = True
            return False
        self.waiting += len(chunk)
        return True

    def take(self) -> tuple:
        """The next message, as sent. Raises EOFError, OSError or UnsafePickle when the worker
        is gone or sent something unexpected."""
        msg = safe_loads(self.recv.recv_bytes())
        self.waiting -= 1
        return msg

    def outcome(self, job: JobReader, msg: tuple) -> tuple[str, Any, int]:
        """(kind, trace or message, bytes) of a message, taken in this worker's order."""
        _, kind, got, size, new_sigs, new_members = msg
        for v in new_sigs:
            theirs = len(self.sigs) - 1
            self.sigs[theirs] = job.sigs(tuple(v))
            self.same = self.same and self.sigs[theirs] == theirs
        self.members.extend(tuple(m) for m in new_members)
        return kind, self._unpack(got) if kind == "trace" else got, size

    def _unpack(self, got: tuple) -> RankTrace:
        file, rank, version, backend, entries, reliable, source, pgs = got
        out: dict[str, PgTrace] = {}
        for name, desc, m, first, sig, done, began, record, wait, last_completed in pgs:
            pg = PgTrace(name, desc, self.members[m] if m >= 0 else None)
            pg.first, pg.last_completed = first, last_completed
            ids = array("i")
            ids.frombytes(sig)
            pg.sig = ids if self.same else array("i", map(self.sigs.__getitem__, ids))
            pg.done, pg.began = bytearray(done), bytearray(began)
            pg.record.frombytes(record)
            pg.wait_ms.frombytes(wait)
            pg.stack = array("i", [-1]) * len(ids)
            out[name] = pg
        return RankTrace(file, rank, version, backend, out, entries, reliable, source)

    def stop(self) -> None:
        for conn in (self.tasks, self.recv):
            conn.close()
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()


def _receive(remotes: list[_Remote], dumps: list[str]) -> Iterator[tuple[_Remote, tuple]]:
    """Each message the workers give, as it comes: chunks handed out as workers drain, two in
    flight each; ends after a refusal or an unexpected error, or when a worker fails."""
    from multiprocessing.connection import wait

    size = max(1, min(16, len(dumps) // (len(remotes) * 4)))
    todo = [list(range(i, min(i + size, len(dumps)))) for i in range(0, len(dumps), size)]
    todo.reverse()

    def hand(r: _Remote) -> None:               # a chunk a gone worker could not take stays
        if todo and r.give(todo[-1]):
            todo.pop()

    for r in remotes:
        for _ in range(2):
            hand(r)
    by_conn = {r.recv: r for r in remotes}
    left = len(dumps)
    while left:
        busy = [r.recv for r in remotes if r.waiting]
        if not busy:                            # every worker gone: the rest in this process
            return
        for conn in wait(busy):
            r = by_conn[conn]
            try:
                msg = r.take()
            except (EOFError, OSError, UnsafePickle):
                return                          # a worker failed: the rest in this process
            left -= 1
            yield r, msg
            if msg[1] in ("error", "again"):
                return
            if r.waiting <= size:
                hand(r)


def read_ahead(job: JobReader, dumps: list[str], workers: int,
               read: Callable[..., Any]) -> None:
    """Read ``dumps`` with ``read`` (:func:`~.inputs.read_dump`, handed over at the fork) in
    ``workers`` forked processes into ``job.prefetched`` (path -> outcome, as ``read`` takes
    it), taken in their order as they come (signatures are numbered as one process numbers
    them); stops at the first refusal. Dumps no worker gave are left out: they are read in
    this process."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    remotes: list[_Remote] = []
    early: dict[int, tuple[_Remote, tuple]] = {}     # come before an earlier dump
    members: dict[tuple[int, ...], tuple[int, ...]] = {}
    nxt = 0
    try:
        with signals_blocked():
            for _ in range(workers):
                remotes.append(_Remote(ctx, dumps, read))
        for r, msg in _receive(remotes, dumps):
            early[msg[0]] = (r, msg)
            while nxt in early:
                if not _settle(job, dumps[nxt], *early.pop(nxt), members):
                    return
                nxt += 1
    finally:
        for r in remotes:
            r.stop()
    for i in sorted(early):                     # after a worker failed: those it left out
        if not _settle(job, dumps[i], *early[i], members):
            return


def _settle(job: JobReader, path: str, r: _Remote, msg: tuple,
            members: dict[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Take one message (each worker's in its own order); False: read no further."""
    kind, trace, size = r.outcome(job, msg)
    if kind == "again":
        return False
    if kind == "trace":                         # one tuple per distinct member list
        for pg in trace.pgs.values():
            if pg.members is not None:
                pg.members = members.setdefault(pg.members, pg.members)
    job.prefetched[path] = (kind, trace, size)
    return kind != "error"


def pool_size(dumps: int, minimum: int) -> Optional[int]:
    """Workers for ``dumps`` dumps: None (read them in this process) under ``minimum``, on one
    CPU, or off Linux (no fork where it is unsafe, no PR_SET_PDEATHSIG)."""
    if dumps < minimum or not sys.platform.startswith("linux"):
        return None
    n = min(cpus(), MAX_WORKERS, dumps)
    return n if n >= 2 else None
