"""A Flight Recorder dump's entries into the per-sequence columns of a :class:`~.fr.PgTrace`.

A dump holds thousands of entries (:mod:`.fr` shows one); only the columns the verdict needs are
kept: the signature (interned), completed/started, record id and nccl's wait. The usual dump
(one group, collectives in order, no p2p) is recognised and its columns taken at C speed
(``operator.itemgetter`` mapped over the entries, ``list.count``, ``map(operator.ne, ...)``);
any other dump takes one Python pass, and a malformed one the tolerant per-entry reading.
"""

from __future__ import annotations

import itertools
import operator
from array import array
from typing import Any, Optional


def pg_name(entry: dict[str, Any]) -> tuple[str, str]:
    """An entry's process group: its name and description."""
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
_BEGUN = ("started", "completed")


def state_columns(states: list[str]) -> tuple[bytearray, bytearray]:
    """``(done, began)``: one byte per entry of its ``state`` ("scheduled", "started",
    "completed"), the whole column at once where every entry has one state (gloo: "scheduled"
    throughout).

    >>> state_columns(["completed", "started", "scheduled"])
    (bytearray(b'\\x01\\x00\\x00'), bytearray(b'\\x01\\x01\\x00'))
    """
    n = len(states)
    if states.count(states[0]) == n:
        return bytearray((states[0] == "completed",)) * n, bytearray((states[0] in _BEGUN,)) * n
    return (bytearray(map(operator.eq, states, itertools.repeat("completed"))),
            bytearray(map(operator.contains, itertools.repeat(_BEGUN), states)))


def sig_of(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    """What ranks must agree on at one collective: op, input sizes and dtypes, output sizes."""
    return (str(entry.get("profiling_name", "?")).partition(":")[2] or "?",
            repr(entry.get("input_sizes")), repr(entry.get("input_dtypes")),
            repr(entry.get("output_sizes")))


def one_run(entries: list[Any]) -> Optional[tuple[Any, int]]:
    """The usual dump -- one group, collectives in order, no p2p -- recognised at C speed
    (``itemgetter`` over every entry): its group's name and first sequence id; None otherwise."""
    try:
        seqs = list(map(_SEQ, entries))
        if not seqs or type(seqs[0]) is not int or seqs[0] <= 0 or any(map(_P2P, entries)) \
                or seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            return None
        groups = list(map(_PG, entries))
        if type(groups[0]) not in (tuple, list) or len(groups[0]) < 2 \
                or groups.count(groups[0]) != len(groups):
            return None
        hash(groups[0][0])                         # a name that cannot be a key: TypeError
        return groups[0][0], seqs[0]
    except (KeyError, TypeError):
        return None


def rows_by_seq(entries: list[Any]) -> dict[Any, dict[int, int]]:
    """Per group name, sequence id -> index of its first entry (collectives only): one Python
    pass; an entry short of a key, or not a dict, sends the whole dump through the tolerant
    per-entry reading."""
    rows: dict[Any, dict[int, int]] = {}
    try:
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
        rows.setdefault(pg_name(entry)[0], {}).setdefault(seq, i)
    return rows


_SIG = operator.itemgetter("profiling_name", "input_sizes", "input_dtypes", "output_sizes")


def sig_ids(picked: list[dict[str, Any]], sigs: Any) -> list[int]:
    """The interned signature of each entry (``sigs``: an :class:`~.fr.Intern`). Neighbours
    mostly repeat one signature: runs of equal fields are found in C
    (``map(operator.ne, ...)``), and each run costs one key (its fields' ``repr``), interned
    once per job."""
    if not picked:
        return []
    try:
        fields: list[Any] = list(map(_SIG, picked))
    except (KeyError, TypeError):
        fields = [sig_of(e) for e in picked]
    keyed = sigs.keyed
    starts = [0, *itertools.compress(range(1, len(fields)),
                                     map(operator.ne, fields[1:], fields[:-1])), len(fields)]
    out: list[int] = []
    for lo, hi in zip(starts, starts[1:]):
        key = repr(fields[lo])
        got = keyed.get(key)
        if got is None:
            got = keyed[key] = sigs(sig_of(picked[lo]))
        out += [got] * (hi - lo)
    return out


def fill(pg: Any, picked: list[Optional[dict[str, Any]]], sigs: Any,
          reliable: bool) -> None:
    """The per-sequence arrays of ``pg`` from its entries (None: a gap in the window)."""
    n = len(picked)
    present = [e for e in picked if e is not None]
    ids = sig_ids(present, sigs)
    if len(present) == n:                  # no gap: whole columns at C speed
        try:
            states = list(map(_STATE, present))
            pg.record = array("i", map(_RECORD, present))
            pg.sig = array("i", ids)
            pg.done, pg.began = state_columns(states)
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
