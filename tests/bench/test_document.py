"""The bench document: rows timed as nccl-tests -a, nccl-tests averages, comparisons."""

from __future__ import annotations

import pytest

from ncclcheck.bench.document import (
    bench_document,
    compare_document,
    footer_averages,
    make_row,
    placement_result,
    wrong_total,
)
from ncclcheck.bench.formulas import OPS
from ncclcheck.schema import check


def test_row_time_is_the_mean_over_ranks_like_nccl_tests_and_keeps_the_slowest():
    op = OPS["all_gather"]
    cell = placement_result(op, 8 << 20, 4, [100.0, 110.0, 90.0, 200.0], 0)
    assert (cell["time_us"], cell["time_us_mean"], cell["time_us_max"]) == (125.0, 125.0, 200.0)
    assert cell["algbw_gbps"] == (8 << 20) / 1e3 / 125.0
    assert cell["busbw_gbps"] == cell["algbw_gbps"] * 0.75
    row = make_row(op, 8 << 20, (8 << 20) // 16, "float", 4, cell, None)
    assert (row["redop"], row["root"], row["in_place"]) == ("none", -1, None)


@pytest.mark.parametrize("average, time_us", [("rank0", 100.0), ("mean", 125.0), ("min", 90.0),
                                              ("max", 200.0)])
def test_average_picks_the_time_as_nccl_tests_dash_a(average, time_us):
    cell = placement_result(OPS["all_reduce"], 1 << 20, 4, [100.0, 110.0, 90.0, 200.0], 0,
                            average)
    assert cell["time_us"] == time_us
    assert cell["busbw_gbps"] == pytest.approx((1 << 20) / 1e3 / time_us * 1.5)


def test_document_envelope_and_totals():
    op = OPS["all_reduce"]
    rows = [make_row(op, s, s // 4, "float", 2, placement_result(op, s, 2, [t], w),
                     placement_result(op, s, 2, [t], 0))
            for s, t, w in ((1024, 10.0, 0), (1 << 20, 100.0, 3))]
    doc = bench_document(source="ncclcheck", op="all_reduce", dtype="float", backend="gloo",
                         world_size=2, nodes=["a", "b"], ranks_per_node=1, warmup=1, iters=2,
                         check=1, env={}, versions={}, transport=None, rows=rows)
    check(doc, expect=("ncclcheck/bench",))
    assert doc["schema_version"] == 1 and doc["wrong_total"] == 3 == wrong_total(rows)
    assert doc["peak_busbw_gbps"] == (1 << 20) / 1e3 / 100.0
    avg, peak = footer_averages(rows)
    assert avg == sum([1024 / 1e4] * 2 + [(1 << 20) / 1e5] * 2) / 4 and peak == doc["peak_busbw_gbps"]


def test_compare_marks_the_highest_peak_and_keeps_failed_runs():
    runs = [{"label": "a.env", "bench": {"peak_busbw_gbps": 5.0}},
            {"label": "b.env", "bench": {}, "error": "node2: timed out"},
            {"label": "c.env", "bench": {"peak_busbw_gbps": 7.5}}]
    doc = compare_document(runs)
    check(doc)
    assert doc["best"] == {"label": "c.env", "peak_busbw_gbps": 7.5}
    assert [r["label"] for r in doc["runs"]] == ["a.env", "b.env", "c.env"]


def _run(label, env, cells_by_size, backend="nccl"):
    rows = [{"size_bytes": size, "out_of_place": {"busbw_gbps": oop, "time_us": 10.0,
                                                  "time_us_max": 10.0},
             "in_place": {"busbw_gbps": ip}} for size, (oop, ip) in cells_by_size.items()]
    peak = max(max(c) for c in cells_by_size.values())
    return {"label": label, "env": env, "bench": {"backend": backend, "rows": rows,
                                                  "peak_busbw_gbps": peak}}


def test_compare_names_no_winner_from_noise():
    """Before: the highest peak won, even 0.00 against 0.00 or inside the repeats' spread."""
    zero = compare_document([_run("a", {}, {8: (0.0, 0.0)}), _run("b", {}, {8: (0.0, 0.0)})])
    assert zero["best"] is None
    overlap = compare_document([_run("a", {}, {1024: (1.0, 1.4)}),
                                _run("b", {}, {1024: (1.2, 1.5)})])
    assert overlap["best"] is None
    clear = compare_document([_run("a", {}, {1024: (1.0, 1.1)}),
                              _run("b", {}, {1024: (1.5, 1.6)})])
    assert clear["best"] == {"label": "b", "peak_busbw_gbps": 1.6} and clear["ignored"] is None


def test_compare_on_gloo_says_which_settings_it_ignores():
    ring = _run("ring.env", {"NCCL_ALGO": "Ring"}, {1024: (1.0, 1.1)}, "gloo")
    tree = _run("tree.env", {"NCCL_ALGO": "Tree"}, {1024: (1.5, 1.6)}, "gloo")
    doc = compare_document([ring, tree])
    assert doc["best"] is None
    assert doc["ignored"] == {"backend": "gloo", "variables": ["NCCL_ALGO"], "all": True}
    ifname = _run("eth1.env", {"NCCL_SOCKET_IFNAME": "eth1"}, {1024: (0.1, 0.1)}, "gloo")
    mixed = compare_document([ring, ifname])          # bench maps NCCL_SOCKET_IFNAME to gloo
    assert mixed["ignored"] == {"backend": "gloo", "variables": ["NCCL_ALGO"], "all": False}
    assert mixed["best"] == {"label": "ring.env", "peak_busbw_gbps": 1.1}
