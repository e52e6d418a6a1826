"""A JSON dump read from its bytes (ncclcheck/jobdir/frjson.py) gives the trace that json.loads
and parse_dump give, on torch's real dumps and on generated ones; any dump it does not read is
read whole, and what is no JSON stays no JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.jobdir import frjson
from ncclcheck.jobdir.fr import Intern, NotADump, load_bytes, parse_bytes, parse_dump
from tests.jobdir.test_jobdir import dump, entry

from scriptload import load

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
REAL = [FIXTURES / "fr-gloo" / "gloo_trace_rank_0.json",
        FIXTURES / "fr-gloo" / "gloo_trace_rank_1.json",
        FIXTURES / "device" / "h200" / "fr" / "on-demand.nccl.json"]


def nlohmann(doc) -> bytes:
    """``doc`` as torch's ``_dump_fr_trace_json()`` writes it: keys sorted, no spaces."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def state(trace, sigs):
    """Everything a trace holds, and the signatures met."""
    return (trace.file, trace.rank, trace.version, trace.backend, trace.entries,
            trace.reliable, trace.source,
            {k: (pg.name, pg.desc, pg.members, pg.first, pg.sig.tolist(), bytes(pg.done),
                 bytes(pg.began), pg.stack.tolist(), pg.record.tolist(), pg.wait_ms.tolist(),
                 pg.last_completed) for k, pg in trace.pgs.items()},
            list(sigs.values), dict(sigs.keyed))


def both(*dumps: bytes):
    """(fast, plain) states of reading ``dumps`` in turn into one job's signatures."""
    out = []
    for read in (parse_bytes, lambda d, p, s, t: parse_dump(load_bytes(d), p, s, t)):
        sigs = Intern()
        out.append([state(read(d, f"x/nccl_trace_rank_{i}", sigs, Intern()), sigs)
                    for i, d in enumerate(dumps)])
    return out


def nccl(seq, state="completed", op="all_reduce", size=8, **kw):
    kw.setdefault("time_discovered_started_ns", 0)
    kw.setdefault("time_discovered_completed_ns",
                  1795707758652507566 + seq * 1000037 if state == "completed" else 0)
    return entry(seq, op, size, state, "nccl", **kw)


def no_frames(entries):
    return [{k: v for k, v in e.items() if k != "frames"} for e in entries]


@pytest.fixture(scope="module")
def bench():
    return load(ROOT / "scripts" / "bench-jobdir.py", "bench_jobdir")


GENERATED = {
    # nccl: states change (completed, started, scheduled), so do signatures and timings,
    # sequence and record ids cross 9 -> 10 -> 100 (new shapes), a window that starts late
    "nccl": no_frames([nccl(s, size=8 + s % 3) for s in range(95, 120)]
                      + [nccl(120, "started", "broadcast",
                              time_discovered_started_ns=1795707758652507566)]
                      + [nccl(s, "scheduled", size=16) for s in range(121, 124)]),
    # nccl with timing: started and completed times, waits of every length
    "timed": no_frames([nccl(s, time_discovered_started_ns=1795707758652507566 + s * 7919)
                        for s in range(1, 40)]),
    # one state throughout that is not gloo's
    "started": no_frames([nccl(s, "started") for s in range(1, 5)]),
    # gloo: one state throughout, null times, an empty pg name in pg_config
    "gloo": no_frames([entry(s) for s in range(1, 30)]),
    # a signature that comes back after another, dtypes and output sizes that differ
    "back": no_frames([entry(1), entry(2, "broadcast"), entry(3),
                       entry(4, output_sizes=[[2, 4]], input_dtypes=["Half"])]),
    # a time absent or null, a negative record id, keys torch may add (duration_ms)
    "odd": [{k: v for k, v in nccl(1).items() if k not in ("frames", "time_discovered_started_ns")},
            *no_frames([nccl(2, record_id=-5), nccl(3, time_discovered_started_ns=None),
                        nccl(4, duration_ms=0.25, zz_new=[1, [2]])])],
}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_torchs_own_json_dumps_read_fast_give_the_trace_of_json_loads(path):
    data = path.read_bytes()
    assert frjson.columns(data) is not None
    fast, plain = both(data, data)
    assert fast == plain


@pytest.mark.parametrize("case", sorted(GENERATED))
def test_generated_dumps_read_fast_give_the_trace_of_json_loads(case):
    data = nlohmann(dump(GENERATED[case]))
    assert frjson.columns(data) is not None
    # with a dump that met other signatures first, in one job
    fast, plain = both(nlohmann(dump(GENERATED["back"])), data)
    assert fast == plain


def test_the_bench_dumps_read_fast_give_the_trace_of_json_loads(bench):
    docs = [bench.document(64, 300, odd) for odd in (False, True)]
    data = [bench.torch_json(d) for d in docs]
    assert all(frjson.columns(d) is not None for d in data)
    fast, plain = both(*data)
    assert fast == plain
    assert fast[1][7]["0"][4][-1] != fast[0][7]["0"][4][-1]     # the odd rank's last signature


WHOLE = {
    "p2p": [nccl(1), nccl(2, is_p2p=True), nccl(3)],
    "two groups": [nccl(1), nccl(1, process_group=["1", "tp"]), nccl(2)],
    "gap": [nccl(1), nccl(3)],
    "another group in the run": [nccl(1), nccl(2, process_group=["1", "default_pg"]), nccl(3)],
    "record over int32": [nccl(1), nccl(2, record_id=2 ** 40)],
    "seq 0": [nccl(0), nccl(1)],
    "a float seq": [nccl(1), nccl(2, collective_seq_id=2.0)],
    "a nested entries key": [nccl(1), nccl(2, thread_name={"entries": []})],
    "pg name a list": [nccl(1, process_group=[["0"], "x"]), nccl(2, process_group=[["0"], "x"])],
}


@pytest.mark.parametrize("case", sorted(WHOLE))
def test_other_dumps_are_read_whole_and_give_the_same_trace(case):
    data = nlohmann(dump(no_frames(WHOLE[case])))
    assert frjson.columns(data) is None
    fast, plain = both(data)
    assert fast == plain


@pytest.mark.parametrize("edit", [
    (b'"record_id":1,', b'"record_id":01,'),         # a leading zero: no JSON
    (b'"record_id":25,', b'"record_id":05,'),        # ... deep in a run of one shape
    (b'"time_discovered_completed_ns":0', b'"time_discovered_completed_ns":00'),
    (b'"record_id":1,', b'"record_id":1,,'),
    (b'"state":"completed"', b'"state":"completed\x01"'),   # a raw control character
    (b'"op_id":2,', b'"op_id":-,'),
])
def test_what_is_no_json_stays_no_json(edit):
    data = nlohmann(dump(no_frames([nccl(s, "started" if s > 20 else "completed")
                                    for s in range(1, 31)])))
    assert edit[0] in data
    bad = data.replace(edit[0], edit[1], 1)
    assert frjson.columns(bad) is None
    with pytest.raises(NotADump):
        parse_bytes(bad, "r_0", Intern(), Intern())


@pytest.mark.parametrize("edit", [
    (b'"is_p2p":false', b'"is_p3p":false', 0),       # the key is not is_p2p: read whole
    (b'"input_dtypes":["Float"]', b'"input_dtypes":["Fl\\u006fat"]', 0),   # an escape
    (b'"input_dtypes":["Float"]', b'"input_dtypes": ["Float"]', 0),     # a space
    (b'"pg_status":', b'"pg_status":{"entries":1},"x":', 0),
])
def test_unusual_texts_are_read_whole(edit):
    data = nlohmann(dump(no_frames([nccl(1), nccl(2), nccl(3)])))
    bad = data.replace(edit[0], edit[1], 1)
    assert bad != data and frjson.columns(bad) is None
    fast, plain = both(bad)
    assert fast == plain
