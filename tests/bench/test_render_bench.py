"""ncclcheck/render/bench.py: the nccl-tests-compatible table and the --compare table."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.bench.importer import import_nccl_tests
from ncclcheck.logparse.nccltests import parse_row
from ncclcheck.render.bench import describe_transport, format_row, render_compare, render_table

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"


def test_table_lines_are_the_lines_nccl_tests_printed():
    """nccl-tests 2.18.0 output: every header, row and footer line of ours is byte-identical."""
    text = (FIXTURES / "rtx5090-socket-2.18-mpi-tagged.txt").read_text()
    original = [ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("[1,0]<stdout>:")]
    table = original[original.index("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 134217728 "
                                     "step: 2(factor) warmup iters: 10 iters: 50 agg iters: 1 "
                                     "validation: 1 graph: 0"):
                     original.index("# Avg bus bandwidth    : 1.57614 ") + 2]
    ours = render_table(import_nccl_tests(text, "x")).splitlines()
    assert len(table) == 20
    start = ours.index(table[0])
    assert ours[start:start + len(table)] == table
    assert "# Peak bus bandwidth   : 2.310 GB/s at 134217728 B (in-place)" in ours


def test_large_and_small_numbers_take_nccl_tests_widths():
    """Old nccl-tests (a3mega file) printed 47535; the current printf prints 47535.0."""
    text = (FIXTURES / "a3mega-h100-2x8-all_reduce.txt").read_text()
    ours = render_table(import_nccl_tests(text, "x")).splitlines()
    assert "           8             2     float     sum      -1   135.80    0.00    0.00       0" \
           "   123.50    0.00    0.00       0" in ours
    assert "  8589934592    2147483648     float     sum      -1  47535.0  180.71  338.82       0" \
           "  47743.0  179.92  337.35       0" in ours
    assert "#  Rank 15 Group  0 Pid   6740 on ztan-mig-gq73 device  7 [0000:8c:00] NVIDIA H100 " \
           "80GB HBM3" in ours
    assert "# Avg bus bandwidth    : 70.742 " in ours and "# Out of bounds values : 0 OK" in ours
    assert any(ln.startswith("# Peak bus bandwidth   : 338.820 GB/s at 8589934592 B")
               for ln in ours)


def test_a_placement_not_measured_is_na_and_reads_back():
    row = {"size_bytes": 4096, "count": 128, "type": "float", "redop": "none", "root": -1,
           "out_of_place": {"time_us": 12.5, "algbw_gbps": 0.33, "busbw_gbps": 0.16,
                            "wrong": 0}, "in_place": None}
    line = format_row(row)
    assert line.endswith("    N/A     N/A     N/A    N/A")
    columns = ["redop", "root"] + ["time", "algbw", "busbw", "#wrong"] * 2
    assert parse_row(line, columns)["in_place"] is None


def test_transport_line():
    assert describe_transport({"backend": "gloo", "transport": {"interfaces": ["eth0"]}}) == \
        "gloo over TCP (interface eth0); NCCL not used"
    line = describe_transport({"backend": "nccl", "transport": {
        "network": "IB", "interfaces": ["eth0"], "hcas": ["mlx5_0:1/IB"], "gdr": True,
        "nccl_versions": ["2.21.5", "2.18.1"]}})
    assert line == ("network IB; interfaces eth0; HCAs mlx5_0:1/IB; GDR on; "
                    "NCCL versions differ: 2.21.5, 2.18.1")


def test_compare_table_marks_best_per_size_and_overall():
    def run(bws):
        rows = [{"size_bytes": s, "out_of_place": {"busbw_gbps": b}} for s, b in bws]
        return {"rows": rows, "peak_busbw_gbps": max(b for _, b in bws),
                "avg_busbw_gbps": sum(b for _, b in bws) / len(bws)}

    text = render_compare({"runs": [{"label": "ring.env", "bench": run([(1024, 0.5), (1 << 20, 3.0)])},
                                    {"label": "tree.env", "bench": run([(1024, 0.7), (1 << 20, 2.0)])}],
                           "best": {"label": "ring.env", "peak_busbw_gbps": 3.0}})
    lines = text.splitlines()
    assert lines[2].split() == ["1024", "0.50", "0.70*"]
    assert lines[3].split() == ["1048576", "3.00*", "2.00"]
    assert lines[-1] == "# best: ring.env (peak busbw 3.000 GB/s)"
