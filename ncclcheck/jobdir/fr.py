"""PyTorch Flight Recorder dumps (pickle or JSON, format 2.x, nccl and gloo) into compact traces.

A dump (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp, ``dump()`` and ``dump_json()``;
"2.10" in torch 2.13) is::

    {"version": "2.10", "comm_lib_version": "", "pg_status": {"0": {"last_enqueued_collective": 4,
     "last_started_collective": -1, "last_completed_collective": 3}},
     "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},      # gloo: empty name
     "entries": [{"record_id": 3, "pg_id": 0, "process_group": ("0", "default_pg"),
                  "collective_seq_id": 4, "p2p_seq_id": 0, "op_id": 4,
                  "profiling_name": "gloo:all_reduce", "input_sizes": [[8]],
                  "input_dtypes": ["Float"], "output_sizes": [[8]], "output_dtypes": ["Float"],
                  "state": "scheduled", "retired": False, "timeout_ms": 3000,
                  "time_created_ns": 1795706537096465199, "time_discovered_started_ns": None,
                  "time_discovered_completed_ns": None, "is_p2p": False,
                  "frames": [{"name": "all_reduce", "filename": ".../distributed_c10d.py",
                              "line": 3245}, {"name": "<module>", "filename": "job.py",
                                              "line": 11}]}]}

The dump does not hold its own rank: as torch's loader does
(torch/distributed/flight_recorder/components/loader.py ``read_dump``), the rank is the number
at the end of the file name. Only what the verdict needs is kept, as small integers in arrays
(op, sizes and dtypes interned in :class:`Intern`), so thousands of dumps fit in little memory.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import itertools
import json
import operator
import os
import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ncclcheck.jobdir.unpickle import safe_loads

_RANK_SUFFIX = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle|bin))?$")
#: frames of torch itself are left out of the stack shown
_TORCH_FRAME = re.compile(r"/torch/(?:distributed|nn/parallel|_dynamo|utils)/")
MAX_FRAMES = 8


class NotADump(Exception):
    """The data is not a Flight Recorder dump."""


class Intern:
    """Values seen many times (collective signatures, stacks), stored once, named by index."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._ids: dict[Any, int] = {}
        self.keyed: dict[str, int] = {}   #: a cheaper key (the fields' repr) -> index

    def __call__(self, value: Any) -> int:
        got = self._ids.get(value)
        if got is None:
            got = self._ids[value] = len(self.values)
            self.values.append(value)
        return got


@dataclass
class PgTrace:
    """One process group's collectives as one rank saw them (its FR window)."""

    name: str
    desc: str
    members: Optional[tuple[int, ...]] = None
    first: int = 0                                            #: first sequence id held
    sig: array = field(default_factory=lambda: array("i"))     #: per seq: Intern id, -1 none
    done: bytearray = field(default_factory=bytearray)         #: per seq: 1 completed
    #: per seq: 1 when the GPU started it (nccl's state "started" or "completed"); a collective
    #: still "scheduled" waits behind earlier work on its stream, not on a peer
    began: bytearray = field(default_factory=bytearray)
    stack: array = field(default_factory=lambda: array("i"))   #: per seq: Intern id of frames
    record: array = field(default_factory=lambda: array("i"))  #: per seq: record_id
    wait_ms: array = field(default_factory=lambda: array("d"))  #: started->completed, -1 none
    last_completed: int = -1

    @property
    def last(self) -> int:
        """The last sequence id this rank entered (0: none)."""
        for i in range(len(self.sig) - 1, -1, -1):
            if self.sig[i] >= 0:
                return self.first + i
        return 0

    def at(self, seq: int) -> int:
        """Signature id at ``seq``; -1 not entered, -2 before this rank's window."""
        i = seq - self.first
        if i < 0:
            return -2
        return self.sig[i] if i < len(self.sig) else -1

    def started(self, seq: int) -> bool:
        """Did the GPU start ``seq`` on this rank (older than its window counts as started)?"""
        i = seq - self.first
        return i < 0 or seq <= self.last_completed or (i < len(self.began)
                                                         and bool(self.began[i]))

    def completed(self, seq: int) -> bool:
        """Did this rank complete ``seq`` (older than its window counts as completed)?"""
        i = seq - self.first
        if i < 0:
            return True
        if seq <= self.last_completed:
            return True
        return i < len(self.done) and bool(self.done[i])


@dataclass
class RankTrace:
    """One dump: whose it is and its process groups."""

    file: str
    rank: Optional[int]
    version: str
    backend: str
    pgs: dict[str, PgTrace]
    entries: int
    reliable: bool = False      #: nccl's states: "completed" means completed (gloo retires failures)
    source: str = ""            #: the path to open again (``file`` is the name shown)


def rank_from_name(path: str) -> Optional[int]:
    """The rank torch's loader takes from a dump's name: its trailing number.

    >>> rank_from_name("/shared/fr/nccl_trace_rank_12"), rank_from_name("fr_3.json")
    (12, 3)
    >>> rank_from_name("dump") is None
    True
    """
    m = _RANK_SUFFIX.search(os.path.basename(path))
    return int(m.group(1)) if m else None


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic collector while a dump is loaded, compacted and dropped.

    A dump is tens of thousands of small dicts and lists with no cycle among them; with the
    collector on, it walks them again and again while they are built (measured: a third of the
    load time), and once more when it is back on if they are still alive. Freed before the
    collector is back, they leave it nothing to count."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def load_bytes(data: bytes) -> dict[str, Any]:
    """A dump's dictionary from its bytes, JSON or pickle (through the restricted unpickler).

    Raises:
        UnsafePickle: a pickle that names a callable.
        NotADump: anything else that is not a dump.
    """
    if data[:1] == b"\x80":
        doc = safe_loads(data)
    else:
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise NotADump(f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list) \
            or "version" not in doc:
        raise NotADump("no 'version' and 'entries': not a Flight Recorder dump")
    return doc


@functools.lru_cache(maxsize=64)
def _members_of(text: str) -> Optional[tuple[int, ...]]:
    # every rank's dump repeats the group's "[0, 1, ..., 4095]": parsed once, one shared tuple
    try:
        return tuple(int(r) for r in json.loads(text))
    except (ValueError, TypeError):
        try:
            return tuple(int(r) for r in ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError):
            return None


def _members(text: Any) -> Optional[tuple[int, ...]]:
    if isinstance(text, (list, tuple)):
        return tuple(int(r) for r in text)
    return _members_of(str(text))


def _frames(raw: Any) -> tuple[str, ...]:
    out = []
    for f in raw if isinstance(raw, list) else []:
        if isinstance(f, dict):
            name, line = str(f.get("filename", "?")), f.get("line", "?")
            if not _TORCH_FRAME.search(name):
                out.append(f"{name}:{line} in {f.get('name', '?')}")
    return tuple(out[:MAX_FRAMES])


def _pg_name(entry: dict[str, Any]) -> tuple[str, str]:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and len(pg) >= 2:
        return str(pg[0]), str(pg[1])
    return str(entry.get("pg_id", "?")), ""


def _ms(entry: dict[str, Any]) -> float:
    start, end = entry.get("time_discovered_started_ns"), entry.get("time_discovered_completed_ns")
    if isinstance(start, int) and isinstance(end, int) and start > 0 and end >= start:
        return (end - start) / 1e6
    return -1.0


_ROW = operator.itemgetter("collective_seq_id", "is_p2p", "process_group", "state", "record_id")
_SEQ = operator.itemgetter("collective_seq_id")
_P2P = operator.itemgetter("is_p2p")
_PG = operator.itemgetter("process_group")
_STATE = operator.itemgetter("state")
_RECORD = operator.itemgetter("record_id")
_SIG = operator.itemgetter("profiling_name", "input_sizes", "input_dtypes", "output_sizes")
_BEGUN = ("started", "completed")


def _sig_of(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    return (str(entry.get("profiling_name", "?")).partition(":")[2] or "?",
            repr(entry.get("input_sizes")), repr(entry.get("input_dtypes")),
            repr(entry.get("output_sizes")))


def _rows(entries: list[Any]) -> dict[Any, dict[int, int]]:
    """Per group name, sequence id -> index of its first entry (collectives only).

    The usual dump (one group, collectives in order, no p2p) is recognised at C speed
    (``itemgetter`` over every entry); a dump with other groups or p2p entries takes one Python
    pass; an entry short of a key, or not a dict, sends the whole dump through the tolerant
    per-entry reading."""
    rows: dict[Any, dict[int, int]] = {}
    try:
        seqs = list(map(_SEQ, entries))
        groups = list(map(_PG, entries))
        if seqs and not any(map(_P2P, entries)) and type(seqs[0]) is int and seqs[0] > 0 \
                and seqs == list(range(seqs[0], seqs[0] + len(seqs))) \
                and type(groups[0]) in (tuple, list) and groups.count(groups[0]) == len(groups):
            return {groups[0][0]: dict(zip(seqs, range(len(seqs))))}
        for i, (seq, p2p, pgt, _, _) in enumerate(map(_ROW, entries)):
            if p2p or type(seq) is not int or seq <= 0:
                continue
            if type(pgt) is not tuple and type(pgt) is not list:
                raise TypeError("process_group")
            pg = pgt[0]
            by_seq = rows.get(pg)
            if by_seq is None:
                by_seq = rows[pg] = {}
            if seq not in by_seq:
                by_seq[seq] = i
        return rows
    except (KeyError, TypeError, IndexError):
        rows = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        seq = entry.get("collective_seq_id")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0:
            continue
        rows.setdefault(_pg_name(entry)[0], {}).setdefault(seq, i)
    return rows


def _sig_ids(picked: list[dict[str, Any]], sigs: Intern) -> list[int]:
    """The interned signature of each entry. Neighbours mostly repeat one signature: runs of
    equal fields are found in C (``map(operator.ne, ...)``), and each run costs one key (its
    fields' ``repr``), interned once per job."""
    if not picked:
        return []
    try:
        fields: list[Any] = list(map(_SIG, picked))
    except (KeyError, TypeError):
        fields = [_sig_of(e) for e in picked]
    keyed = sigs.keyed
    starts = [0, *itertools.compress(range(1, len(fields)),
                                     map(operator.ne, fields[1:], fields[:-1])), len(fields)]
    out: list[int] = []
    for lo, hi in zip(starts, starts[1:]):
        key = repr(fields[lo])
        got = keyed.get(key)
        if got is None:
            got = keyed[key] = sigs(_sig_of(picked[lo]))
        out += [got] * (hi - lo)
    return out


def _fill(pg: PgTrace, picked: list[Optional[dict[str, Any]]], sigs: Intern,
          reliable: bool) -> None:
    """The per-sequence arrays of ``pg`` from its entries (None: a gap in the window)."""
    n = len(picked)
    present = [e for e in picked if e is not None]
    ids = _sig_ids(present, sigs)
    if len(present) == n:                  # no gap: whole columns at C speed
        try:
            states = list(map(_STATE, present))
            pg.record = array("i", map(_RECORD, present))
            pg.sig = array("i", ids)
            pg.done = bytearray(map(operator.eq, states, itertools.repeat("completed")))
            pg.began = bytearray(map(operator.contains, itertools.repeat(_BEGUN), states))
            pg.stack = array("i", [-1]) * n
            pg.wait_ms = array("d", [_ms(e) for e in present] if reliable else [-1.0] * n)
            return
        except (KeyError, TypeError, OverflowError):
            pass
    sig = [-1] * n
    record = [-1] * n
    done = bytearray(b"\x01" * n)          # a gap: nothing to judge, count it as done
    began = bytearray(b"\x01" * n)
    wait = [-1.0] * n
    k = 0
    for i, e in enumerate(picked):
        if e is None:
            continue
        sig[i] = ids[k]
        k += 1
        state = e.get("state")
        done[i] = state == "completed"
        began[i] = state == "started" or state == "completed"
        rec = e.get("record_id", -1)
        record[i] = rec if type(rec) is int and -2**31 <= rec < 2**31 else -1
        if reliable:
            wait[i] = _ms(e)
    pg.sig, pg.record, pg.done, pg.began = array("i", sig), array("i", record), done, began
    pg.stack, pg.wait_ms = array("i", [-1]) * n, array("d", wait)


def parse_dump(doc: dict[str, Any], path: str, sigs: Intern, stacks: Intern) -> RankTrace:
    """Compact a dump (:func:`load_bytes`) into a :class:`RankTrace`; p2p entries are skipped.

    Each dump is walked once (:func:`_rows`), and whole columns are taken at C speed where the
    window has no gap (:func:`_fill`)."""
    config = doc.get("pg_config") if isinstance(doc.get("pg_config"), dict) else {}
    entries = doc["entries"]
    pgs: dict[str, PgTrace] = {}
    rows = _rows(entries)
    backend = ""
    for by_seq in rows.values():
        backend = str(entries[next(iter(by_seq.values()))].get("profiling_name", "")
                      ).partition(":")[0]
        break
    reliable = backend == "nccl"
    for name, by_seq in rows.items():
        desc = _pg_name(entries[next(iter(by_seq.values()))])[1]
        # gloo writes pg_config under an empty name (torch 2.13): one config fits the one group
        cfg = config.get(name) or (next(iter(config.values())) if len(config) == 1 else {})
        pg = PgTrace(str(name), desc,
                     _members(cfg.get("ranks")) if isinstance(cfg, dict) else None)
        pg.first = min(by_seq)
        n = max(by_seq) - pg.first + 1
        if len(by_seq) == n and list(by_seq) == list(range(pg.first, pg.first + n)):
            picked: list[Any] = list(map(entries.__getitem__, by_seq.values()))
        else:
            picked = [entries[by_seq[s]] if s in by_seq else None
                      for s in range(pg.first, pg.first + n)]
        _fill(pg, picked, sigs, reliable)
        pgs[str(name)] = pg
    return RankTrace(path, rank_from_name(path), str(doc.get("version")), backend, pgs,
                     len(entries), reliable)


def frames_at(path: str, pg: str, seq: int) -> tuple[str, ...]:
    """The Python stack of the entry ``seq`` of group ``pg`` in the dump at ``path`` (read
    again: only the few stacks shown are kept), torch's own frames left out."""
    with no_gc():
        try:
            with open(path, "rb") as f:
                doc = load_bytes(f.read())
        except (OSError, NotADump, Exception):  # noqa: BLE001 - a stack is a courtesy
            return ()
        found: tuple[str, ...] = ()
        for e in doc["entries"]:
            if isinstance(e, dict) and not e.get("is_p2p") \
                    and e.get("collective_seq_id") == seq and _pg_name(e)[0] == pg:
                found = _frames(e.get("frames"))
                break
        del doc
    return found
