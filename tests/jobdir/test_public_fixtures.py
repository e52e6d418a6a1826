"""Real public RAS outputs and watchdog logs (tests/fixtures/jobs/README.md has their URLs)."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.diagnose import diagnose_files

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"


def diag(name: str) -> dict:
    return diagnose_files([str(FIX / name)])


def test_every_fixture_names_its_source():
    for path in FIX.glob("*.*"):
        if path.name != "README.md":
            assert path.read_text().startswith("# source: https://github.com/"), path


def test_ras_incomplete_names_the_rank_with_its_gpu_pid_and_node():
    doc = diag("ras-incomplete.txt")
    assert [(c["rank"], c["kind"], c["host"], c["gpu"], c["pid"]) for c in doc["culprits"]] == \
        [(1, "missing", "10.4.109.13", 0, 60004)]
    assert doc["culprits"][0]["evidence"][0].endswith("ras-incomplete.txt:38")


def test_ras_mismatch_whose_listed_ranks_are_ahead_names_no_one_and_says_why():
    doc = diag("ras-mismatch-ahead.txt")
    assert doc["culprits"] == []
    note = " ".join(doc["job"]["disagreements"])
    assert "ranks 12, 13" in note and "ahead" in note


def test_watchdog_lines_in_different_collectives_are_a_mismatch_without_a_majority():
    doc = diag("watchdog-different-op.log")
    assert doc["first_desync"]["seq"] == 80078 and doc["culprits"] == []
    assert doc["job"]["class"] == "mismatch"
    assert "rank 3 ALLREDUCE, rank 7 BROADCAST" in doc["summary"]["verdict"]


def test_watchdog_lines_in_the_same_collective_name_no_one():
    doc = diag("watchdog-same-collective.log")
    assert doc["culprits"] == [] and doc["first_desync"]["seq"] == 1580
    assert doc["first_desync"]["op"] == "ALLREDUCE"


def test_the_one_logged_rank_without_a_watchdog_timeout_is_named():
    # the project's h100 log: 15 ranks time out in ALLREDUCE #48213; rank 11, whose NCCL log
    # shows the IB completion error, has none
    doc = diagnose_files([str(FIX.parent / "reports" / "src" / "h100-train.log")])
    assert [(c["rank"], c["kind"], c["host"], c["gpu"]) for c in doc["culprits"]] == \
        [(11, "missing", "h100-node-02", 3)]
