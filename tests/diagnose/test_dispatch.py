"""The shortcuts of issue 24 give the same diagnosis as the line-by-line matcher.

``LogState.fast = False`` feeds every line through the full parse (no header cache) and tries
every line signature on it; the default takes the header cache (timestamps stripped from its key)
and the combined keyword dispatch (:mod:`ncclcheck.signatures.dispatch`). Both must give the same
document, byte for byte, on every fixture and on the benchmark's synthetic logs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.logparse.state import LogState
from ncclcheck.signatures import INFO_DISPATCH, INFO_SIGNATURES, LINE_DISPATCH, LINE_SIGNATURES

from scriptload import load

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
INPUTS = sorted(p for d in ("logs", "pasted") for p in (FIXTURES / d).iterdir()
                if p.suffix in (".log", ".txt"))


def _bench():
    return load(ROOT / "scripts" / "bench-diagnose.py", "bench_diagnose")


def _both(paths: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    fast = diagnose_files(paths)
    monkeypatch.setattr(LogState, "fast", False)
    slow = diagnose_files(paths)
    monkeypatch.setattr(LogState, "fast", True)
    for doc in (fast, slow):
        doc.pop("created_at", None)
    return json.dumps(fast, sort_keys=True), json.dumps(slow, sort_keys=True)


def test_there_are_fixtures():
    assert len(INPUTS) > 50


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_fast_path_gives_the_same_document_on_every_fixture(path, monkeypatch):
    fast, slow = _both([str(path)], monkeypatch)
    assert fast == slow


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_dispatch_picks_every_signature_that_matches(path):
    for line in path.read_text(errors="replace").splitlines():
        for sigs, dispatch in ((LINE_SIGNATURES, LINE_DISPATCH), (INFO_SIGNATURES, INFO_DISPATCH)):
            every = [s.id for s in sigs if s.match(line) is not None]
            picked = [s.id for s in dispatch(line) if s.match(line) is not None]
            assert picked == every, line


def test_dispatch_skips_lines_without_keywords():
    assert LINE_DISPATCH("[rank3]:step 12 loss 0.25 lr 3.0e-4") == ()
    assert [s.id for s in LINE_DISPATCH("misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
                                        "10.0.0.2<45763> failed : Connection refused")] \
        == ["log-connection-refused"]


@pytest.mark.parametrize("kind", ["mixed", "timestamped", "dense", "sparse"])
def test_fast_path_gives_the_same_document_on_the_benchmark_logs(kind, tmp_path, monkeypatch):
    bench = _bench()
    path = tmp_path / f"{kind}.log"
    if kind in ("mixed", "timestamped"):
        bench.make_mixed_log(path, 600_000, 11, stamp=kind == "timestamped")
    else:
        bench.make_log(path, 600_000, sparse=kind == "sparse")
    with open(path, "a") as f:          # a failure among them, on a process seen before
        f.write("[rank5]:gpu-node-00:1005:1065 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: "
                "Connect to 10.1.1.2<45763> failed : No route to host\n")
    fast, slow = _both([str(path)], monkeypatch)
    assert fast == slow
    assert "log-connection-refused" in fast


def test_a_timestamp_in_front_of_every_line_keeps_the_fast_path(tmp_path):
    """Every line of a process stamped differently still maps to that process through the header
    cache (47 us per NCCL line on the slow path, issue 24), and the diagnosis is the same as
    without the stamps."""
    rnd = random.Random(3)
    lines = [f"node1:{100 + r}:{200 + r} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {(r + 1) % 4}"
             f"[{(r + 1) % 4}] via P2P/IPC" for r in range(4) for c in range(8)]
    plain, stamped = tmp_path / "plain.log", tmp_path / "stamped.log"
    plain.write_text("\n".join(lines) + "\n")
    stamped.write_text("\n".join(f"2026-11-26T12:00:{rnd.randrange(60):02d}.{rnd.randrange(10 ** 6):06d}Z "
                                 f"{line}" for line in lines) + "\n")
    state = LogState()
    for n, line in enumerate(stamped.read_bytes().splitlines(), 1):
        state.feed_bytes(line, "s", n)
    assert len(state._heads) == 4
    a, b = diagnose_files([str(plain)]), diagnose_files([str(stamped)])
    assert a["ranks"] == [dict(r) for r in b["ranks"]]
