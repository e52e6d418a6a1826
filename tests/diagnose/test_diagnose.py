"""The diagnosis document (ncclcheck/diagnose.py): schema, inputs, bounds."""

from __future__ import annotations

from pathlib import Path

from ncclcheck import logparse
from ncclcheck.diagnose import build_document, diagnose_files
from ncclcheck.logparse import state as state_mod
from ncclcheck.logparse.state import LogState
from ncclcheck.schema import check
from ncclcheck.judge.derived import run_checks

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def test_document_envelope_and_inputs():
    path = LOGS / "duplicate-gpu-mpi.log"
    doc = diagnose_files([str(path)])
    check(doc, expect=("ncclcheck/diagnosis",))
    assert doc["inputs"] == [{"name": str(path), "gzip": False, "bytes": path.stat().st_size,
                              "lines": len(path.read_bytes().splitlines()), "truncated_lines": 0}]
    assert set(doc) >= {"inputs", "healthy", "summary", "hosts", "ranks", "findings"}
    assert sorted(r["rank"] for r in doc["ranks"]) == [0, 2, 3, 4]   # from the MPI tags


def test_empty_input_is_not_called_healthy(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("epoch 1 loss 0.3\n")
    doc = diagnose_files([str(path)])
    assert doc["healthy"] is False and "no NCCL output" in doc["summary"]["verdict"]


def test_memory_stays_bounded_with_many_processes_and_repeats(monkeypatch):
    monkeypatch.setattr(state_mod, "MAX_PROCS", 100)
    state = LogState()
    for i in range(1000):
        state.feed(f"node{i % 50}:{i}:{i} [0] NCCL INFO Using network IB", "big.log", i + 1)
    for i in range(5000):
        state.feed(f"node1:1:1 [0] misc/shmutils.cc:71 NCCL WARN Error: failed to extend "
                   f"/dev/shm/nccl-{i} to 9637892 bytes", "big.log", 2000 + i)
        state.feed(f"node1:1:1 [0] x.cc:1 NCCL WARN something new number {i} at 0x{i:x}", "big.log", i)
    run_checks(state)
    doc = build_document(state, [])
    assert len(state.procs) == 100 and state.procs_dropped == 900
    assert doc["summary"]["processes"] == 1000 and doc["ranks_omitted"] == 900
    shm = next(f for f in doc["findings"] if f["id"] == "limits-shm-too-small")
    assert shm["count"] == 5000 and len(shm["evidence"]) == 5
    assert len(state.unrecognized) == 1            # numbers and addresses are normalised away


def test_package_docstring_lists_its_modules():
    assert "prefix" in logparse.__doc__ and "facts" in logparse.__doc__


def test_fast_path_and_filter_agree_with_reading_every_line():
    """diagnose_files (byte filter + header cache) equals feeding every decoded line (and the
    nccl-tests device lines, which name the GPUs: GB10 has no GPUDirect RDMA by design)."""
    from ncclcheck.logparse.pasted import Pasted
    for path in sorted(LOGS.glob("*.log")):
        fast = diagnose_files([str(path)])
        state, pasted = LogState(), Pasted()
        for n, line in enumerate(path.read_bytes().split(b"\n"), 1):
            text = line.decode("utf-8", "replace")
            state.feed(text, str(path), n)
            if "NCCL" not in text:
                pasted.feed(text, {"file": str(path), "line": n, "text": text.strip()[:400]})
        pasted.close()
        state.gpu_models = pasted.tests.gpu_models()
        run_checks(state)
        slow = build_document(state, [])
        assert fast["findings"] == slow["findings"], path.name
        assert fast["ranks"] == slow["ranks"] and fast["hosts"] == slow["hosts"], path.name


def test_info_signatures_say_where_they_look():
    from ncclcheck.signatures import INFO_SIGNATURES, INFO_STARTS
    assert INFO_SIGNATURES and all(sig.info_starts for sig in INFO_SIGNATURES)
    assert len(INFO_STARTS) >= len(INFO_SIGNATURES)


def test_bulk_fast_path_skips_nothing_that_matters():
    from ncclcheck.logparse.state import _BULK_CHARS, _MARKER_STARTS
    from ncclcheck.signatures import INFO_STARTS
    assert not [s for s in INFO_STARTS + _MARKER_STARTS if s[:1] in _BULK_CHARS]


def test_carriage_returns_split_progress_bars_from_nccl_lines(tmp_path):
    path = tmp_path / "tqdm.log"
    path.write_bytes(b"  1%|#   | 1/100\r  2%|#   | 2/100\rh:1:1 [0] NCCL INFO Using network IB\r\n"
                     b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\r\n")
    doc = diagnose_files([str(path)])
    assert doc["ranks"][0]["network"] == "IB" and doc["ranks"][0]["nccl_version"] == "2.21.5"


def _two_ranks(*tail: str) -> list[str]:
    return [f"node{r}:1{r}:1{r} [0] NCCL INFO {line}".format(r=r)
            for r in range(2) for line in ("Using network IB",
                                           "comm 0x{r} rank {r} nranks 2 cudaDev 0 busId 1000 - Init START",
                                           *tail)]


def test_a_clean_log_that_never_completes_init_is_not_healthy(tmp_path):
    """Issue 19 item 5: no error, but 0/2 ranks reached Init COMPLETE: say so, not 'healthy'."""
    path = tmp_path / "stuck.log"
    path.write_text("\n".join(_two_ranks()) + "\n")
    doc = diagnose_files([str(path)])
    assert doc["healthy"] is False and doc["findings"] == []
    assert doc["summary"]["verdict"].startswith(
        "no failure seen, but 0/2 processes reached Init COMPLETE"), doc["summary"]["verdict"]


def test_healthy_needs_every_rank_to_complete_init(tmp_path):
    done = "comm 0x{r} rank {r} nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"
    path = tmp_path / "ok.log"
    path.write_text("\n".join(_two_ranks(done)) + "\n")
    doc = diagnose_files([str(path)])
    assert doc["healthy"] is True and doc["summary"]["verdict"].startswith("healthy: 2 processes")
    path.write_text("\n".join(_two_ranks(done)[:5]) + "\n")       # rank 1 stops after START
    half = diagnose_files([str(path)])
    assert half["healthy"] is False and [f["id"] for f in half["findings"]] == ["log-init-incomplete"]


def test_terminal_escapes_from_the_log_are_shown_not_obeyed(tmp_path):
    """Issue 16: a hostile log must not rewrite the terminal through diagnose's output."""
    import json
    import subprocess
    import sys

    path = tmp_path / "evil.log"
    path.write_bytes(b"h:1:1 [0] misc/x.cc:1 NCCL WARN \x1b]0;pwned\x07\x1b[2J gone \xc2\x9b1m\n"
                     b"h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to \x1b[31meth0\n")
    doc = diagnose_files([str(path)])
    text = json.dumps(doc, ensure_ascii=False)
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "\\x1b[2J" in text
    for args in ([str(path)], [str(path), "--json"]):
        out = subprocess.run([sys.executable, "-m", "ncclcheck", "diagnose", *args],
                             capture_output=True, timeout=60).stdout
        assert b"\x1b" not in out and b"\x07" not in out and b"\xc2\x9b" not in out, out
        assert b"x1b[2J" in out
