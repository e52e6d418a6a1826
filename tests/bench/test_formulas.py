"""nccl-tests' formulas against the numbers real nccl-tests runs printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.bench.formulas import (
    OPS,
    algbw_gbps,
    busbw_gbps,
    get_op,
    per_rank_count,
    size_column,
)
from ncclcheck.logparse.nccltests import parse_nccl_tests

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"

# file, op, ranks (from the "# Rank" lines; asserted below)
REAL_RUNS = [
    ("a3mega-h100-2x8-all_reduce.txt", "all_reduce", 16),
    ("eks-efa-t4-2node-mpi-tagged.txt", "all_reduce", 2),
    ("rtx5090-socket-2.18-mpi-tagged.txt", "all_reduce", 2),
    ("superbench-a100-8gpu-all_gather.log", "all_gather", 8),
    ("superbench-a100-8gpu-alltoall.log", "alltoall", 8),
    ("superbench-a100-8gpu-broadcast.log", "broadcast", 8),
    ("superbench-a100-8gpu-reduce_scatter.log", "reduce_scatter", 8),
]


def printed_cells(name):
    facts = parse_nccl_tests((FIXTURES / name).read_text())
    for row in facts["rows"]:
        for key in ("out_of_place", "in_place"):
            if row[key] and row[key]["time_us"] > 0:
                yield row, row[key]
    assert facts["rows"], name


def close(ours: float, printed: float, time_text_digits: float) -> bool:
    """Printed values are rounded to 2 decimals, computed from a time printed with fewer."""
    return abs(ours - printed) <= 0.006 + abs(printed) * time_text_digits


@pytest.mark.parametrize("name, op, ranks", REAL_RUNS)
def test_algbw_and_busbw_match_real_nccl_tests_rows(name, op, ranks):
    facts = parse_nccl_tests((FIXTURES / name).read_text())
    assert len(facts["ranks"]) == ranks
    checked = 0
    for row, cell in printed_cells(name):
        # nccl-tests prints time with 3-5 significant digits: allow that relative error.
        rel = 0.5 / max(cell["time_us"] * (100 if cell["time_us"] < 100 else 10
                                            if cell["time_us"] < 10000 else 1), 1)
        assert close(algbw_gbps(row["size_bytes"], cell["time_us"]), cell["algbw_gbps"], rel)
        assert close(busbw_gbps(OPS[op], row["size_bytes"], cell["time_us"], ranks),
                     cell["busbw_gbps"], rel), (name, row["size_bytes"])
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("name, op, ranks", REAL_RUNS)
def test_size_column_is_count_times_element_size_and_split_by_ranks(name, op, ranks):
    for row, _ in printed_cells(name):
        assert size_column(OPS[op], row["count"], 4, ranks) == row["size_bytes"]


def test_a_wrong_factor_would_be_caught():
    """The all_gather rows do not fit all_reduce's factor: the formula test can fail."""
    rows = list(printed_cells("superbench-a100-8gpu-all_gather.log"))
    big = [(r, c) for r, c in rows if c["busbw_gbps"] > 100]
    assert big and not any(close(busbw_gbps(OPS["all_reduce"], r["size_bytes"], c["time_us"], 8),
                                 c["busbw_gbps"], 1e-3) for r, c in big)


def test_per_rank_count_matches_current_nccl_tests_for_aligned_sizes():
    # 8 ranks of float: sizes >= 128 B split into 16-byte-aligned shares, as the printed counts.
    for row, _ in printed_cells("superbench-a100-8gpu-reduce_scatter.log"):
        if row["size_bytes"] >= 128:
            assert per_rank_count(OPS["reduce_scatter"], row["size_bytes"], 4, 8) == row["count"]
    for row, _ in printed_cells("a3mega-h100-2x8-all_reduce.txt"):
        assert per_rank_count(OPS["all_reduce"], row["size_bytes"], 4, 16) == row["count"]


def test_small_split_sizes_round_down_to_16_bytes():
    assert per_rank_count(OPS["all_gather"], 32, 4, 8) == 0      # 1 float each: below 16 B
    assert per_rank_count(OPS["alltoall"], 1024, 2, 8) == 64     # half: 8-element multiples
    assert per_rank_count(OPS["alltoall"], 1000, 1, 8) == 112    # int8: 125 -> 112


@pytest.mark.parametrize("n, factors", [
    (1, {"all_reduce": 0.0, "all_gather": 0.0, "broadcast": 1.0, "sendrecv": 1.0}),
    (2, {"all_reduce": 1.0, "reduce_scatter": 0.5, "alltoall": 0.5}),
    (16, {"all_reduce": 1.875, "all_gather": 0.9375}),
])
def test_bus_factors(n, factors):
    for op, factor in factors.items():
        assert OPS[op].bus_factor(n) == pytest.approx(factor)


def test_op_names_in_every_spelling():
    assert get_op("reduce_scatter_perf").name == "reduce_scatter"
    assert get_op("ReduceScatter").name == "reduce_scatter"
    assert get_op("sendrecv_perf_mpi").name == "sendrecv"
    with pytest.raises(KeyError):
        get_op("gather")


def test_gb_is_1e9_bytes():
    assert algbw_gbps(10**9, 10**6) == 1.0   # 1e9 bytes in one second
