"""Many Flight Recorder dumps read by worker processes: bounded, ordered, nothing left behind.

Unpickling is most of a dump's time and runs in C under each process's own lock, so
:func:`read_ahead` forks a few workers (one per CPU this process may run on, at most
:data:`MAX_WORKERS`). Worker ``k`` of ``n`` reads dumps ``k, k+n, k+2n...`` in turn, each with the
same reader as one process (:func:`~.inputs.read_dump`: the restricted unpickler, nothing in a
dump runs), and sends back for each, over its own pipe, only what the verdict keeps: the compact
columns as bytes, the signatures and member lists it met for the first time, as a pickle of plain
data (tuples, strings, bytes, numbers) that this side reads with the same restricted unpickler.
Reading the pipes in turn gives the dumps in their order whatever the timing; a worker waits
while its pipe is full, so at most one dump per worker, and its message, is held beyond what the
verdict keeps.

On a refused dump the workers are stopped (the refusal is raised where the dump comes in
order). A worker that fails (killed, out of memory) or meets an error the reader does not expect
stops the pool too: its dumps, and those after it, are read in this process as if there had been
no pool, so the outcome is the same. Workers ignore Ctrl-C (this process handles it), die with
it (``PR_SET_PDEATHSIG``), and are terminated and reaped before :func:`read_ahead` returns or
raises.
"""

from __future__ import annotations

import os
import pickle
import signal
from array import array
from typing import Any, Optional

from ncclcheck.errors import BadInput
from ncclcheck.jobdir.fr import PgTrace, RankTrace
from ncclcheck.jobdir.job import JobReader
from ncclcheck.jobdir.unpickle import UnsafePickle, safe_loads

MAX_WORKERS = 16


def cpus() -> int:
    """CPUs this process may run on (its affinity; else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


def _worker(conn: Any, paths: list[str], parent: int) -> None:
    """In a worker: each path's outcome, one message per path, in order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:                                       # die with the parent, however it ends
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        return
    from ncclcheck.jobdir.inputs import read_dump

    job = JobReader()
    sent_sigs = 0
    members: dict[tuple, int] = {}
    for path in paths:
        new_members: list[tuple] = []
        before = len(job.bad)
        try:
            stats = read_dump(job, path)
        except BadInput as exc:
            msg: tuple = ("error", str(exc), 0)
        except Exception as exc:  # noqa: BLE001 - read again in the parent, which raises it
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
        conn.send_bytes(pickle.dumps((*msg, new_sigs, tuple(new_members)),
                                     pickle.HIGHEST_PROTOCOL))
        if msg[0] in ("error", "again"):
            break
    conn.close()


class _Remote:
    """One worker and what it sent so far (its signature and member numbering)."""

    def __init__(self, ctx: Any, paths: list[str]) -> None:
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker, args=(send, paths, os.getpid()), daemon=True)
        self.proc.start()
        send.close()
        self.sigs: list[int] = []              # worker's signature id -> this job's
        self.members: list[tuple[int, ...]] = []

    def take(self, job: JobReader) -> tuple[str, Any, int]:
        """The next outcome: (kind, trace or message, bytes). Raises EOFError, OSError or
        UnsafePickle when the worker is gone or sent something unexpected."""
        kind, got, size, new_sigs, new_members = safe_loads(self.recv.recv_bytes())
        self.sigs.extend(job.sigs(tuple(v)) for v in new_sigs)
        self.members.extend(tuple(m) for m in new_members)
        if kind == "trace":
            got = self._unpack(got)
        return kind, got, size

    def _unpack(self, got: tuple) -> RankTrace:
        file, rank, version, backend, entries, reliable, source, pgs = got
        out: dict[str, PgTrace] = {}
        for name, desc, m, first, sig, done, began, record, wait, last_completed in pgs:
            pg = PgTrace(name, desc, self.members[m] if m >= 0 else None)
            pg.first, pg.last_completed = first, last_completed
            ids = array("i")
            ids.frombytes(sig)
            pg.sig = array("i", map(self.sigs.__getitem__, ids)) if ids else ids
            pg.done, pg.began = bytearray(done), bytearray(began)
            pg.record.frombytes(record)
            pg.wait_ms.frombytes(wait)
            pg.stack = array("i", [-1]) * len(ids)
            out[name] = pg
        return RankTrace(file, rank, version, backend, out, entries, reliable, source)

    def stop(self) -> None:
        self.recv.close()
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()


def read_ahead(job: JobReader, dumps: list[str], workers: int) -> None:
    """Read ``dumps`` in ``workers`` forked processes into ``job.prefetched`` (path -> outcome,
    as :func:`~.inputs.read_dump` takes it), in order; stops at the first refusal. Dumps a
    worker could not give are left out: they are read in this process."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    remotes: list[_Remote] = []
    # blocked in the workers from their start until they ignore it: Ctrl-C is this process's
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            for k in range(workers):
                remotes.append(_Remote(ctx, dumps[k::workers]))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        members: dict[tuple[int, ...], tuple[int, ...]] = {}
        for i, path in enumerate(dumps):
            try:
                kind, got, size = remotes[i % workers].take(job)
            except (EOFError, OSError, UnsafePickle, ValueError, TypeError):
                return                          # a worker failed: the rest in this process
            if kind == "again":
                return
            if kind == "trace":                 # one tuple per distinct member list
                for pg in got.pgs.values():
                    if pg.members is not None:
                        pg.members = members.setdefault(pg.members, pg.members)
            job.prefetched[path] = (kind, got, size)
            if kind == "error":
                return
    finally:
        for r in remotes:
            r.stop()


def pool_size(dumps: int, minimum: int) -> Optional[int]:
    """Workers for ``dumps`` dumps: None (read them in this process) under ``minimum`` or on
    one CPU or where ``fork`` is not offered (macOS's default, Windows)."""
    import multiprocessing

    n = min(cpus(), MAX_WORKERS, dumps)
    if dumps < minimum or n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return n
