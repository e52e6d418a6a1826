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
import functools
import json
import os
import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Optional

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


def parse_dump(doc: dict[str, Any], path: str, sigs: Intern, stacks: Intern) -> RankTrace:
    """Compact a dump (:func:`load_bytes`) into a :class:`RankTrace`; p2p entries are skipped."""
    config = doc.get("pg_config") if isinstance(doc.get("pg_config"), dict) else {}
    pgs: dict[str, PgTrace] = {}
    backend = ""
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for entry in doc["entries"]:
        try:
            seq = entry["collective_seq_id"]
            if entry["is_p2p"] or seq <= 0:
                continue
            pg = entry["process_group"][0]
        except (KeyError, TypeError, IndexError):
            if not isinstance(entry, dict) or entry.get("is_p2p"):
                continue
            seq = entry.get("collective_seq_id")
            if not isinstance(seq, int) or seq <= 0:
                continue
            pg = _pg_name(entry)[0]
        by_seq = rows.get(pg)
        if by_seq is None:
            by_seq = rows[pg] = {}
        if seq not in by_seq:
            by_seq[seq] = entry
        if not backend:
            backend = str(entry.get("profiling_name", "")).partition(":")[0]
    reliable = backend == "nccl"
    for name, by_seq in rows.items():
        desc = _pg_name(next(iter(by_seq.values())))[1]
        # gloo writes pg_config under an empty name (torch 2.13): one config fits the one group
        cfg = config.get(name) or (next(iter(config.values())) if len(config) == 1 else {})
        pg = PgTrace(name, desc, _members(cfg.get("ranks")) if isinstance(cfg, dict) else None)
        pg.first = min(by_seq)
        n = max(by_seq) - pg.first + 1
        sig = [-1] * n
        record = [-1] * n
        done = bytearray(b"\x01" * n)          # a gap: nothing to judge, count it as done
        began = bytearray(b"\x01" * n)
        wait = [-1.0] * n
        get = by_seq.get
        for i in range(n):
            e = get(pg.first + i)
            if e is None:
                continue
            name_ = e.get("profiling_name", "?")
            sig[i] = sigs((str(name_).partition(":")[2] or "?", repr(e.get("input_sizes")),
                           repr(e.get("input_dtypes")), repr(e.get("output_sizes"))))
            record[i] = int(e.get("record_id", -1))
            done[i] = e.get("state") == "completed"
            began[i] = e.get("state") in ("started", "completed")
            if reliable:
                wait[i] = _ms(e)
        pg.sig, pg.record, pg.done, pg.began = array("i", sig), array("i", record), done, began
        pg.stack, pg.wait_ms = array("i", [-1] * n), array("d", wait)
        pgs[name] = pg
    return RankTrace(path, rank_from_name(path), str(doc.get("version")), backend, pgs,
                     len(doc["entries"]), reliable)


def frames_at(path: str, pg: str, seq: int) -> tuple[str, ...]:
    """The Python stack of the entry ``seq`` of group ``pg`` in the dump at ``path`` (read
    again: only the few stacks shown are kept), torch's own frames left out."""
    try:
        with open(path, "rb") as f:
            doc = load_bytes(f.read())
    except (OSError, NotADump, Exception):  # noqa: BLE001 - a stack is a courtesy
        return ()
    for e in doc["entries"]:
        if isinstance(e, dict) and not e.get("is_p2p") and e.get("collective_seq_id") == seq \
                and _pg_name(e)[0] == pg:
            return _frames(e.get("frames"))
    return ()
