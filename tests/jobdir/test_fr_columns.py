"""A dump's columns are the same whichever path reads it (the usual dump's C-speed path, one
Python pass, the tolerant per-entry reading), in every pickle protocol torch or Python writes, and
the restricted unpickler stays restricted when it reads protocol 2 (torch's own) fast."""

from __future__ import annotations

import io
import json
import os
import pickle

import pytest

from ncclcheck.jobdir.fr import Intern, load_bytes, parse_dump
from ncclcheck.jobdir.frcolumns import sig_of
from ncclcheck.jobdir.unpickle import UnsafePickle, _Restricted, safe_loads
from tests.jobdir.test_jobdir import Boom, dump, entry

FR = os.path.join(os.path.dirname(__file__), "..", "fixtures", "device", "h200", "fr")


def reference(doc):
    """Per group, seq -> (signature, completed, started, record): one entry at a time."""
    out = {}
    for e in doc["entries"]:
        if not isinstance(e, dict) or e.get("is_p2p"):
            continue
        seq = e.get("collective_seq_id")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0:
            continue
        pg = e.get("process_group")
        name = str(pg[0]) if isinstance(pg, (list, tuple)) and len(pg) >= 2 else str(e.get("pg_id"))
        out.setdefault(name, {}).setdefault(
            seq, (sig_of(e), e.get("state") == "completed",
                  e.get("state") in ("started", "completed"), e.get("record_id", -1)))
    return out


def columns(trace, sigs):
    out = {}
    for name, pg in trace.pgs.items():
        got = out[name] = {}
        for i, sig in enumerate(pg.sig):
            if sig >= 0:
                got[pg.first + i] = (sigs.values[sig], bool(pg.done[i]), bool(pg.began[i]),
                                     pg.record[i])
    return out


def nccl(seq, state, op="all_reduce", size=8, **kw):
    return entry(seq, op, size, state, "nccl", **kw)


CASES = {
    # the usual dump: one group, in order; the states change (nccl) and so does a signature
    "usual": [nccl(s, "completed") for s in range(1, 6)]
    + [nccl(6, "started", "broadcast"), nccl(7, "scheduled", size=16)],
    # gloo: one state throughout, one signature
    "gloo": [entry(s) for s in range(3, 9)],
    # a p2p entry among the collectives: one Python pass
    "p2p": [nccl(1, "completed"), nccl(0, "completed", "send", is_p2p=True, p2p_seq_id=1),
            nccl(2, "completed"), nccl(3, "scheduled")],
    # two groups interleaved
    "groups": [nccl(1, "completed"), nccl(1, "completed", process_group=("1", "tp")),
               nccl(2, "scheduled"), nccl(2, "started", "all_gather", process_group=("1", "tp"))],
    # a gap in the window (an entry overwritten), and a repeated sequence id
    "gap": [nccl(1, "completed"), nccl(3, "completed"), nccl(3, "scheduled", "broadcast"),
            nccl(4, "scheduled")],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("form", ["p2", "p4", "json"])
def test_each_path_gives_the_columns_of_one_entry_at_a_time(case, form):
    doc = dump(CASES[case])
    data = json.dumps(doc).encode() if form == "json" else pickle.dumps(
        doc, protocol=int(form[1]))
    sigs = Intern()
    trace = parse_dump(load_bytes(data), "x/nccl_trace_rank_1", sigs, Intern())
    assert columns(trace, sigs) == reference(json.loads(json.dumps(doc)))


def test_a_malformed_entry_takes_the_tolerant_reading_and_loses_nothing_else():
    es = [entry(1), entry(2), entry(3)]
    del es[1]["state"]
    es.append("not an entry")
    sigs = Intern()
    trace = parse_dump(load_bytes(pickle.dumps(dump(es), protocol=2)), "r_0", sigs, Intern())
    assert columns(trace, sigs) == reference(dump(es))
    assert sorted(columns(trace, sigs)["0"]) == [1, 2, 3]


def test_torchs_protocol_2_dumps_are_read_through_one_peek_not_one_read_per_opcode(
        monkeypatch):
    data = pickle.dumps(dump([entry(s) for s in range(1, 200)]), protocol=2)
    assert data[2:3] != b"\x95"                                 # protocol 2 has no frames

    class Counting(io.BytesIO):
        calls = 0

        def read(self, *a):
            Counting.calls += 1
            return super().read(*a)

        def readinto(self, b):
            Counting.calls += 1
            return super().readinto(b)

    _Restricted(Counting(data)).load()
    assert Counting.calls > 1000                # a plain file: one call per opcode
    Counting.calls = 0
    monkeypatch.setattr(io, "BytesIO", Counting)
    assert safe_loads(data) == pickle.loads(data)
    assert Counting.calls <= 4
    monkeypatch.undo()
    for name in sorted(os.listdir(FR)):         # torch's own pickles read as before
        with open(os.path.join(FR, name), "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x80\x02":
            assert safe_loads(raw) == pickle.loads(raw)


@pytest.mark.parametrize("protocol", [0, 1, 2, 4, 5])
def test_the_fast_reader_still_refuses_a_callable_in_any_protocol(tmp_path, protocol):
    bomb = Boom()
    bomb.path = tmp_path / "ran"
    with pytest.raises(UnsafePickle, match="system"):
        safe_loads(pickle.dumps(bomb, protocol=protocol))
    assert not bomb.path.exists()
