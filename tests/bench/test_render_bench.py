"""ncclcheck/render/bench.py: the nccl-tests-compatible table and the --compare table."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.bench.importer import import_nccl_tests
from ncclcheck.render.bench import describe_transport, render_compare, render_table

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests" / \
    "a3mega-h100-2x8-all_reduce.txt"


def test_table_lines_are_nccl_tests_lines():
    original = FIXTURE.read_text().splitlines()
    ours = render_table(import_nccl_tests(FIXTURE.read_text(), "x")).splitlines()
    header = [ln for ln in original if ln.startswith("#       size") or ln.startswith("#        (B)")]
    assert header == [ln for ln in ours if ln.startswith("#       size") or ln.startswith("#        (B)")]
    rows = [ln for ln in original if ln[:12].strip().isdigit()]
    assert rows == [ln for ln in ours if ln[:12].strip().isdigit()]
    assert "# Avg bus bandwidth    : 70.742 " in ours
    assert "# Out of bounds values : 0 OK" in ours
    assert any(ln.startswith("# Peak bus bandwidth   : 338.820 GB/s at 8589934592 B") for ln in ours)


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
