"""ncclcheck bench --import on real nccl-tests output (old and new formats, MPI tags)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.bench.importer import import_nccl_tests
from ncclcheck.errors import BadInput
from ncclcheck.logparse.nccltests import parse_nccl_tests, parse_row
from ncclcheck.schema import check

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-tests"


def imported(name: str, op: str | None = None) -> dict:
    return import_nccl_tests((FIXTURES / name).read_text(), name, op)


def test_new_format_two_nodes():
    doc = imported("a3mega-h100-2x8-all_reduce.txt")
    check(doc, expect=("ncclcheck/bench",))
    assert doc["source"] == "nccl-tests import"
    assert (doc["op"], doc["dtype"], doc["world_size"]) == ("all_reduce", "float", 16)
    assert doc["nodes"] == ["ztan-mig-235z", "ztan-mig-gq73"] and doc["ranks_per_node"] == 8
    assert (doc["warmup"], doc["iters"], doc["check"]) == (5, 20, 1)
    assert len(doc["rows"]) == 31
    last = doc["rows"][-1]
    assert last["size_bytes"] == 8589934592 and last["count"] == 2147483648
    assert last["out_of_place"] == {"time_us": 47535.0, "algbw_gbps": 180.71,
                                    "busbw_gbps": 338.82, "wrong": 0}
    assert last["in_place"]["busbw_gbps"] == 337.35
    assert doc["avg_busbw_gbps"] == 70.742
    assert doc["peak_busbw_gbps"] == 338.82
    assert doc["wrong_total"] == 0


def test_avg_bus_bandwidth_is_nccl_tests_mean_over_every_cell():
    doc = imported("a3mega-h100-2x8-all_reduce.txt")
    cells = [r[k]["busbw_gbps"] for r in doc["rows"] for k in ("out_of_place", "in_place")]
    assert sum(cells) / len(cells) == pytest.approx(doc["avg_busbw_gbps"], abs=0.01)


def test_mpi_tagged_with_nccl_info_lines():
    doc = imported("eks-efa-t4-2node-mpi-tagged.txt", "all_reduce")
    assert doc["nodes"] == ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"]
    assert len(doc["rows"]) == 31 and doc["rows"][0]["size_bytes"] == 0
    assert doc["transport"]["network"] == "AWS Libfabric"
    assert doc["versions"] == {"torch": None, "cuda": "11.4", "nccl": "2.12.7"}
    assert doc["env"] == {"NCCL_SHM_DISABLE": "0"}
    assert doc["iters"] == 100


def test_version_header_and_collective_line_of_recent_nccl_tests():
    doc = imported("rtx5090-socket-2.18-mpi-tagged.txt")
    assert doc["op"] == "all_reduce"        # from "# Collective test starting: all_reduce_perf_mpi"
    assert doc["versions"]["nccl"] == "2.29.7"   # nccl-library=22907
    assert doc["imported_from"]["nccl_tests_version"] == "2.18.0"
    assert [r["out_of_place"]["time_us"] for r in doc["rows"]][-2:] == [29341.4, 58479.5]


@pytest.mark.parametrize("name, op, redop, root", [
    ("superbench-a100-8gpu-all_gather.log", "all_gather", "", -1),
    ("superbench-a100-8gpu-alltoall.log", "alltoall", "", -1),
    ("superbench-a100-8gpu-broadcast.log", "broadcast", "", 0),
    ("superbench-a100-8gpu-reduce_scatter.log", "reduce_scatter", "sum", -1),
])
def test_old_formats_with_missing_columns(name, op, redop, root):
    doc = imported(name, op)
    assert len(doc["rows"]) == 34
    assert {(r["redop"], r["root"]) for r in doc["rows"]} == {(redop, root)}
    assert all(r["out_of_place"]["wrong"] is None for r in doc["rows"])   # "error N/A"
    assert doc["check"] == 0 and doc["world_size"] == 8 and doc["nodes"] == ["localhost"]


def test_the_op_is_inferred_only_when_the_numbers_leave_one_choice():
    text = (FIXTURES / "superbench-a100-8gpu-broadcast.log").read_text()
    assert import_nccl_tests(text, "run.log")["op"] == "broadcast"
    text = (FIXTURES / "superbench-a100-8gpu-reduce_scatter.log").read_text()
    assert import_nccl_tests(text, "run.log")["op"] == "reduce_scatter"
    text = (FIXTURES / "superbench-a100-8gpu-all_gather.log").read_text()
    with pytest.raises(BadInput, match="pass --op"):
        import_nccl_tests(text, "run.log")              # all_gather or alltoall?
    with pytest.raises(BadInput, match="pass --op"):
        imported("eks-efa-t4-2node-mpi-tagged.txt")      # 2 ranks: all_reduce or sendrecv?


@pytest.mark.parametrize("name, op", [
    ("superbench-a100-8gpu-all_gather.log", "all_gather"),
    ("superbench-a100-8gpu-alltoall.log", "alltoall"),
    ("superbench-a100-8gpu-broadcast.log", "broadcast"),
    ("superbench-a100-8gpu-reduce_scatter.log", "reduce_scatter"),
])
def test_every_real_output_imports_without_op_when_its_name_says_it(name, op):
    """superbench keeps each op's output in nccl_<op>.log: the name settles what numbers cannot."""
    assert imported(name)["op"] == op


def test_srun_labels_in_front_of_the_table():
    text = (FIXTURES / "a3mega-h100-2x8-all_reduce.txt").read_text()
    labelled = "".join(f"0: {line}\n" for line in text.splitlines())
    assert imported("a3mega-h100-2x8-all_reduce.txt")["rows"] == \
        import_nccl_tests(labelled, "x.log")["rows"]


def test_not_a_table():
    with pytest.raises(BadInput, match="no nccl-tests result table"):
        import_nccl_tests("hello\n# just a comment\n", "x.log")


def test_row_parser_takes_na_halves_and_refuses_garbage():
    cols = ["redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
    row = parse_row("  1024  256  float  none  -1  12.5  0.08  0.04  0  N/A  N/A  N/A  N/A", cols)
    assert row["in_place"] is None and row["out_of_place"]["wrong"] == 0
    assert parse_row("1024 256 float sum -1 x y z 0 1 2 3 0", cols) is None
    assert parse_row("# 1024 256 float", cols) is None


def test_cli_import_json_and_table(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--import",
                          str(FIXTURES / "a3mega-h100-2x8-all_reduce.txt"), "--json",
                          "-o", str(tmp_path / "b.json")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads((tmp_path / "b.json").read_text())
    table = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--import", "-"],
                           input=(FIXTURES / "a3mega-h100-2x8-all_reduce.txt").read_text(),
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0
    assert "# Avg bus bandwidth    : 70.742" in table.stdout
    assert ("  8589934592    2147483648     float     sum      -1  47535.0  180.71  338.82       0"
            "  47743.0  179.92  337.35       0") in table.stdout.splitlines()
    # our table reads back into the same rows, and says which op it is
    again = import_nccl_tests(table.stdout, "ours")
    assert again["op"] == "all_reduce" and again["world_size"] == 16
    assert again["rows"] == imported("a3mega-h100-2x8-all_reduce.txt")["rows"]
    assert again["sweep"] == imported("a3mega-h100-2x8-all_reduce.txt")["sweep"] == {
        "threads": 1, "gpus": 1, "min_bytes": 8, "max_bytes": 8589934592, "step_factor": 2,
        "step_bytes": None}
    bad = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--import",
                          str(tmp_path / "missing.log")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "cannot read" in bad.stderr and "Traceback" not in bad.stderr


def test_parse_keeps_only_the_first_table():
    text = (FIXTURES / "rtx5090-socket-2.18-mpi-tagged.txt").read_text()
    facts = parse_nccl_tests(text + text)
    assert len(facts["rows"]) == 8 and facts["tables"] == 2


# -- bounds (issue 16) -------------------------------------------------------------------------

@pytest.mark.parametrize("column, cell, needle", [
    (6, "1e999", "'1e999' is not a finite number"),
    (6, "nan", "'nan' is not a finite number"),
    (0, "9" * 5000, "too long to read"),
    (0, "9" * 30, "is beyond"),
])
def test_absurd_cell_is_exit_2_naming_the_line_within_1_s(tmp_path, column, cell, needle):
    import subprocess
    import sys
    import time

    src = (FIXTURES / "a3mega-h100-2x8-all_reduce.txt").read_text().splitlines()
    n = next(i for i, line in enumerate(src) if line.strip().startswith("8 "))
    fields = src[n].split()
    fields[column] = cell
    src[n] = " ".join(fields)
    path = tmp_path / "t.txt"
    path.write_text("\n".join(src) + "\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--import", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"line {n + 1}: " in out.stderr and needle in out.stderr
    assert time.monotonic() - started < 1 + 1.5  # 1 s of work, plus the interpreter's start
