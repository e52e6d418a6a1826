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
import json
import os
import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ncclcheck.jobdir import frjson
from ncclcheck.jobdir.frcolumns import fill, one_run, pg_name, rows_by_seq
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


def parse_dump(doc: dict[str, Any], path: str, sigs: Intern, stacks: Intern) -> RankTrace:
    """Compact a dump (:func:`load_bytes`) into a :class:`RankTrace`; p2p entries are skipped.

    The usual dump (:func:`one_run`) is taken whole; others are walked once (:func:`rows_by_seq`).
    Whole columns are taken at C speed where the window has no gap (:func:`fill`)."""
    config = _config(doc)
    entries = doc["entries"]
    groups: list[tuple[Any, int, list[Any]]] = []      # (name, first seq, entries by seq)
    whole = one_run(entries)
    if whole is not None:
        groups.append((whole[0], whole[1], entries))
    else:
        for name, by_seq in rows_by_seq(entries).items():
            first = min(by_seq)
            n = max(by_seq) - first + 1
            if len(by_seq) == n and list(by_seq) == list(range(first, first + n)):
                picked: list[Any] = list(map(entries.__getitem__, by_seq.values()))
            else:
                picked = [entries[by_seq[s]] if s in by_seq else None
                          for s in range(first, first + n)]
            groups.append((name, first, picked))
    backend = ""
    for _, _, picked in groups:
        head = next(e for e in picked if e is not None)
        backend = str(head.get("profiling_name", "")).partition(":")[0]
        break
    reliable = backend == "nccl"
    pgs: dict[str, PgTrace] = {}
    for name, first, picked in groups:
        pg = _pg(name, pg_name(next(e for e in picked if e is not None))[1], config, first)
        fill(pg, picked, sigs, reliable)
        pgs[str(name)] = pg
    return RankTrace(path, rank_from_name(path), str(doc.get("version")), backend, pgs,
                     len(entries), reliable)


def _config(doc: dict[str, Any]) -> Any:
    return doc.get("pg_config") if isinstance(doc.get("pg_config"), dict) else {}


def _pg(name: Any, desc: str, config: Any, first: int) -> PgTrace:
    # gloo writes pg_config under an empty name (torch 2.13): one config fits the one group
    cfg = config.get(name) or (next(iter(config.values())) if len(config) == 1 else {})
    pg = PgTrace(str(name), desc, _members(cfg.get("ranks")) if isinstance(cfg, dict) else None)
    pg.first = first
    return pg


def parse_bytes(data: bytes, path: str, sigs: Intern, stacks: Intern) -> RankTrace:
    """:func:`parse_dump` of :func:`load_bytes` of ``data``; the usual JSON dump is read from
    its bytes without building its entries (:func:`~.frjson.columns`: the same trace).

    Raises:
        UnsafePickle: a pickle that names a callable.
        NotADump: anything else that is not a dump.
    """
    cols = frjson.columns(data) if data[:1] == b"{" else None
    if cols is None:
        doc = load_bytes(data)
        trace = parse_dump(doc, path, sigs, stacks)
        del doc                                 # freed while the caller's no_gc holds
        return trace
    head = cols.head_name()
    backend = str(head).partition(":")[0]
    name = cols.group[0]
    pg = _pg(name, str(cols.group[1]), _config(cols.doc), cols.first)
    cols.fill(pg, sigs, backend == "nccl")
    return RankTrace(path, rank_from_name(path), str(cols.doc.get("version")), backend,
                     {str(name): pg}, cols.n, backend == "nccl")


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
                    and e.get("collective_seq_id") == seq and pg_name(e)[0] == pg:
                found = _frames(e.get("frames"))
                break
        del doc
    return found
