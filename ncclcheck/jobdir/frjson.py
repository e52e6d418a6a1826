"""A JSON Flight Recorder dump's columns, read without building its entries (issue 22, scale).

``json.loads`` builds each of a dump's 2,000 entries as a dict of 22 keys: ~12 ms of CPU for a
1 MB dump, and about as long again to compact and free them (4,096 JSON dumps took 118 CPU-s).
torch writes the JSON with nlohmann::json's ``dump()`` (``_dump_fr_trace_json()``, shown in
:mod:`.fr`): no spaces, keys sorted, so the entries of one dump differ mostly in their digits.
:func:`columns` reads the usual dump -- ASCII, no backslash, one group, collectives in order, no
p2p -- with C-speed bytes operations:

- the entries array is cut at ``},{`` and each digit turned into ``1`` (the entry's *shape*).
  The entries of one shape hold each value at the same offsets, and an entry is valid JSON
  exactly when its shape is and none of its numbers starts with a ``0`` followed by a digit (the
  one thing of a number's grammar a shape does not keep: checked per entry at the first digits
  the shape points to). A key's digits are masked too: ``is_p2p`` is checked per entry;
- each distinct shape (a few per dump, the same in every rank's dump: kept in :data:`_PLANS`) is
  read once by ``json.loads`` and its values' offsets found and checked against it;
- each entry's values are cut at its shape's offsets (``operator.itemgetter`` of slices), the
  numbers read by ``int``, the other values decoded by ``json.loads`` once per distinct text;
- the dump around its entries (the entries replaced by ``[]``) is read by ``json.loads``.

What it gives is what :func:`~.fr.parse_dump` takes from ``json.loads``'s document; any other
dump (a p2p entry, two groups, a gap, a backslash, non-ASCII, a space between an entry's keys)
gives None and is read whole (tests/jobdir/test_frjson.py compares the two readings).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from array import array
from typing import Any, Optional

from ncclcheck.jobdir.frcolumns import sig_of, state_columns

_MASK = bytes.maketrans(b"0123456789", b"1111111111")
_INT = re.compile(rb"-?1+")                     # an integer, in a shape
#: where a number's integer part of 2 digits or more starts (strings skipped): a "0" there is
#: no JSON, the one thing a shape does not tell
_LEAD = re.compile(rb'"[^"]*"|(?<![1.eE+\-])-?(1)1')
_CALL = getattr(operator, "call", None) or (lambda f, x: f(x))   # operator.call: 3.11+
#: the values read, in the order :func:`_plan`'s getter gives them
FIELDS = ("collective_seq_id", "record_id", "state", "process_group", "profiling_name",
          "input_sizes", "input_dtypes", "output_sizes", "time_discovered_started_ns",
          "time_discovered_completed_ns")
_NUMBERS = ("collective_seq_id", "record_id")
_TIMES = FIELDS[-2:]
_P2P = "is_p2p".translate(str.maketrans("0123456789", "1" * 10))
MAX_PLANS = 4096        #: shapes kept (one per digit count of the numbers, op and state)
MAX_NEW = 64            #: shapes of one dump not seen before: more, and the dump is read whole
#: shape -> (getter of :data:`FIELDS`, offsets of the first digits of its numbers); None: such
#: an entry is not read here
_PLANS: dict[bytes, Any] = {}


def _value_end(s: bytes, i: int) -> int:
    """The end of the JSON value at ``s[i]`` (no backslash in ``s``)."""
    if s[i] == 0x22:                                       # "
        return s.index(b'"', i + 1) + 1
    if s[i] in b"[{":
        depth = 0
        while True:
            c = s[i]
            if c == 0x22:
                i = s.index(b'"', i + 1)
            elif c in b"[{":
                depth += 1
            elif c in b"]}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    while s[i] not in b",]}":
        i += 1
    return i


def _plan(shape: bytes) -> Any:
    """The getter of :data:`FIELDS` from an entry (without its braces) of ``shape`` (with
    them), or None: not valid JSON, a key twice, a value unlike the usual one."""
    try:
        doc = json.loads(shape)
        spans: dict[str, tuple[int, int]] = {}
        i = 1
        while True:
            j = shape.index(b'"', i + 1)
            key = shape[i + 1:j].decode()
            if shape[i] != 0x22 or shape[j + 1] != 0x3a or key in spans:     # " :
                return None
            a = j + 2
            b = _value_end(shape, a)
            spans[key] = (a, b)
            if shape[b] == 0x7d and b == len(shape) - 1:                    # }
                break
            if shape[b] != 0x2c:                                             # ,
                return None
            i = b + 1
        if not isinstance(doc, dict) or list(doc) != list(spans) or any(
                json.loads(shape[a:b]) != doc[k] for k, (a, b) in spans.items()):
            return None
    except (ValueError, IndexError):
        return None
    # a key's digits are masked too: "is_p2p" reads "is_p1p" here, once in the shape (and
    # :func:`columns` counts the real key once per entry)
    p2p = shape.find(b'"%s":' % _P2P.encode())
    if doc.get(_P2P) is not False or shape.count(b'"%s":' % _P2P.encode()) != 1 \
            or b'"entries"' in shape \
            or any(k not in spans for k in FIELDS[:8]) \
            or not all(_INT.fullmatch(shape[slice(*spans[k])]) for k in _NUMBERS) \
            or not all(k not in spans or doc[k] is None or _INT.fullmatch(shape[slice(*spans[k])])
                       for k in _TIMES):
        return None
    # offsets into the entry without its opening brace; an absent time: the empty slice
    leads = [m.start(1) - 1 for m in _LEAD.finditer(shape) if m.start(1) >= 0]
    return (operator.itemgetter(*(slice(spans[k][0] - 1, spans[k][1] - 1) if k in spans
                                  else slice(0, 0) for k in FIELDS), slice(p2p + 4, p2p + 5)),
            tuple(leads))


class Columns:
    """The usual JSON dump, as :func:`~.fr.parse_dump` reads it: the dump around its entries
    (``doc``), how many, the group and first sequence id, and the columns :func:`fill` takes."""

    def __init__(self, doc: dict[str, Any], rows: list[tuple[bytes, ...]], first: int,
                 group: list[Any], record: array) -> None:
        self.doc, self.first, self.group, self.record = doc, first, group, record
        self.n = len(rows)
        _, _, self.state, _, self.name, self.isz, self.idt, self.osz, self.start, \
            self.end, _ = zip(*rows)
        self.values: dict[bytes, Any] = {}

    def value(self, raw: bytes) -> Any:
        """A value's text decoded (once per distinct text)."""
        got = self.values.get(raw, self)
        if got is self:
            got = self.values[raw] = json.loads(raw)
        return got

    def head_name(self) -> Any:
        """The first entry's ``profiling_name``."""
        return self.value(self.name[0])

    def fill(self, pg: Any, sigs: Any, reliable: bool) -> None:
        """:func:`~.frcolumns.fill`'s columns of ``pg`` (no gap: the entries are in order)."""
        n = self.n
        texts = {raw: self.value(raw) for raw in set(self.state)}
        states = list(map(texts.__getitem__, self.state))
        pg.record = self.record
        pg.sig = array("i", self._sig_ids(sigs))
        pg.done, pg.began = state_columns(states)
        pg.stack = array("i", [-1]) * n
        pg.wait_ms = array("d", list(map(self._ms, self.start, self.end)) if reliable
                           else [-1.0] * n)

    def _ms(self, start: bytes, end: bytes) -> float:
        # :func:`~.frcolumns._ms` on the texts: an absent time (b"") or null is no time
        if start and end and start != b"null" and end != b"null":
            s, e = int(start), int(end)
            if s > 0 and e >= s:
                return (e - s) / 1e6
        return -1.0

    def _sig_ids(self, sigs: Any) -> list[int]:
        # :func:`~.frcolumns.sig_ids` on the texts: a run of equal texts is a run of equal
        # values, looked up by the same key (the values' repr)
        fields = list(zip(self.name, self.isz, self.idt, self.osz))
        keyed = sigs.keyed
        starts = [0, *itertools.compress(range(1, len(fields)),
                                         map(operator.ne, fields[1:], fields[:-1])), len(fields)]
        out: list[int] = []
        for lo, hi in zip(starts, starts[1:]):
            values = tuple(map(self.value, fields[lo]))
            key = repr(values)
            got = keyed.get(key)
            if got is None:
                got = keyed[key] = sigs(sig_of(dict(zip(FIELDS[4:8], values))))
            out += [got] * (hi - lo)
        return out


def columns(data: bytes) -> Optional[Columns]:
    """The usual JSON dump's :class:`Columns`; None for any other (read it whole).

    >>> e = ('{"collective_seq_id":%d,"input_dtypes":["Float"],"input_sizes":[[8]],'
    ...      '"is_p2p":false,"output_sizes":[[8]],"process_group":["0","default_pg"],'
    ...      '"profiling_name":"gloo:all_reduce","record_id":%d,"state":"scheduled"}')
    >>> text = '{"entries":[%s,%s],"version":"2.10"}' % (e % (9, 8), e % (10, 9))
    >>> c = columns(text.encode())
    >>> c.first, c.n, c.group, c.record.tolist(), c.head_name()
    (9, 2, ['0', 'default_pg'], [8, 9], 'gloo:all_reduce')
    >>> columns(text.replace('"record_id":9', '"record_id":09').encode()) is None   # no JSON
    True
    """
    if data[:1] != b"{" or not data.isascii() or b"\\" in data:
        return None
    start = data.find(b'"entries":[{') + 10           # its '['
    end = data.rfind(b"}]") + 2                        # after its ']'
    if start < 10 or end < start + 4:
        return None
    rest = data[:start] + b"[]" + data[end:]           # (no shape holds "entries")
    try:
        doc = json.loads(rest) if rest.count(b'"entries"') == 1 else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("entries") != [] or "version" not in doc:
        return None
    body = data[start + 2:end - 2]
    entries = body.split(b"},{")
    shapes = list(map(bytes.translate, entries, itertools.repeat(_MASK)))
    # runs of one shape (neighbours mostly share it: compared at C speed, one looked up a run)
    cuts = [0, *itertools.compress(range(1, len(shapes)),
                                   map(operator.ne, shapes[1:], shapes[:-1])), len(shapes)]
    runs = [(lo, hi, shapes[lo]) for lo, hi in zip(cuts, cuts[1:])]
    new = {s for _, _, s in runs if s not in _PLANS}
    if len(new) > MAX_NEW:
        return None
    if len(_PLANS) + len(new) > MAX_PLANS:
        _PLANS.clear()
    for s in new:
        _PLANS[s] = _plan(b"{" + s + b"}")
    plans: list[Any] = []
    for lo, hi, s in runs:
        plan = _PLANS[s]
        if plan is None:
            return None
        # the first digit of each number, in every entry of the run: the entries of one shape
        # are as long, so the run joined holds them at one stride
        joined = b",".join(entries[lo:hi])
        stride = len(s) + 1
        if any(0x30 in joined[p::stride] for p in plan[1]):
            return None                                  # a number "01": no JSON
        plans += [plan[0]] * (hi - lo)
    rows = list(map(_CALL, plans, entries))
    if list(map(operator.itemgetter(-1), rows)).count(b"2") != len(rows):
        return None                                    # is_p1p in the shape, not is_p2p
    seqs = list(map(int, map(operator.itemgetter(0), rows)))
    first = seqs[0]
    pgs = list(map(operator.itemgetter(3), rows))
    if first <= 0 or seqs != list(range(first, first + len(seqs))) \
            or pgs.count(pgs[0]) != len(pgs):
        return None
    group = json.loads(pgs[0])
    try:
        if type(group) is not list or len(group) < 2:
            return None
        hash(group[0])
        record = array("i", map(int, map(operator.itemgetter(1), rows)))
    except (TypeError, OverflowError):
        return None
    return Columns(doc, rows, first, group, record)
