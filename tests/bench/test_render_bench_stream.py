"""ncclcheck/render/bench_stream.py: the table row by row, as each size finishes."""

from __future__ import annotations

from ncclcheck.bench.importer import import_nccl_tests
from ncclcheck.render.bench import format_row
from ncclcheck.render.bench_stream import StreamTable

HEAD = {"op": "all_reduce", "dtype": "float", "warmup": 5, "iters": 20, "check": 1,
        "sweep": {"min_bytes": 1024, "max_bytes": 2048, "step_factor": 2}}


def row(size, bw):
    cell = {"time_us": 10.0, "algbw_gbps": bw, "busbw_gbps": bw, "wrong": 0}
    return {"size_bytes": size, "count": size // 4, "type": "float", "redop": "sum", "root": -1,
            "out_of_place": cell, "in_place": cell}


def test_each_row_is_written_when_it_arrives_and_the_rest_follows():
    written: list[str] = []
    stream = StreamTable(HEAD, written.append)
    stream.start(2)
    assert written[0].startswith("# ncclcheck bench: all_reduce float\n# nThread 1 nGpus 1 "
                                 "minBytes 1024 maxBytes 2048 step: 2(factor)")
    stream.update(1, row(1024, 1.0))
    assert written[1:] == [format_row(row(1024, 1.0)) + "\n"]
    stream.update(1, row(1024, 1.0))                 # a repeated event prints nothing
    assert len(written) == 2
    doc = {"op": "all_reduce", "dtype": "float", "backend": "gloo", "world_size": 2,
           "nodes": ["n1"], "rows": [row(1024, 1.0), row(2048, 2.0)], "launch": {"mode": "torchrun"},
           "transport": {"per_rank": [{"rank": 0, "host": "n1", "pid": 7}]}}
    rest = stream.rest(doc)
    assert rest.splitlines()[0] == format_row(row(2048, 2.0))   # the row not yet shown
    assert "# backend gloo, 2 ranks on 1 node (launched by torchrun)" in rest
    assert "#  Rank  0 Group  0 Pid      7 on         n1" in rest
    back = import_nccl_tests("".join(written) + rest, "x")     # --import reads it back
    assert [r["size_bytes"] for r in back["rows"]] == [1024, 2048] and back["op"] == "all_reduce"


# A real run into a pipe, row by row: tests/bench/test_local.py::
# test_piped_bench_prints_the_first_row_before_the_last_size_runs (on that module's clean run).
