"""One pass for the NCCL parse and the job scan (issue 24): ``diagnose`` reads a plain text file
once, through :func:`~ncclcheck.logparse.prefilter.iter_matching2`, and feeds the job scan
(:class:`~ncclcheck.jobdir.inputs.InlineScan`) from the same pass. The document is the one the two
separate passes give, on every log, pasted and job fixture; and ``iter_matching2`` takes, for
each reader, exactly the lines a line-by-line filter takes, whatever the chunking."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from linefilter import reference as line_by_line

from ncclcheck import diagnose
from ncclcheck.jobdir.inputs import InlineScan
from ncclcheck.logparse import reader
from ncclcheck.logparse.prefilter import iter_matching2
from ncclcheck.logparse.reader import InputStats

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
INPUTS = sorted(p for d in ("logs", "pasted", "jobs") for p in (FIXTURES / d).iterdir()
                if p.is_file() and p.suffix != ".md")


def _doc(paths: list[str]) -> str:
    doc = diagnose.diagnose_files(paths)
    doc.pop("created_at", None)
    return json.dumps(doc, sort_keys=True)


def _both(paths: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    one = _doc(paths)
    monkeypatch.setattr(InlineScan, "of", classmethod(lambda cls, job, path, stats: None))
    two = _doc(paths)
    return one, two


def test_there_are_job_fixtures():
    assert sum(1 for p in INPUTS if p.parent.name == "jobs") >= 4


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_one_pass_gives_the_document_of_two(path, monkeypatch):
    one, two = _both([str(path)], monkeypatch)
    assert one == two


def test_one_pass_on_a_mixed_torchrun_log(tmp_path, monkeypatch):
    """NCCL lines, a watchdog timeout, a stack, torchrun's summary; a WARN line that also holds a
    job key ("Connection closed"), a "Last error:" whose next line is a stack's."""
    extra = ("[rank1]:gpu1:101:161 [1] misc/socket.cc:50 NCCL WARN Connection closed by peer "
             "[198.18.0.2] Last error:\n[rank1]:Stack (most recent call first):\n"
             "[rank1]:  File \"/job/train.py\", line 7 in f\n")
    path = tmp_path / "job.log"
    path.write_text(MIXED + extra + MIXED)
    one, two = _both([str(path)], monkeypatch)
    assert one == two
    assert "ALLREDUCE" in one and "\"entered\": [2]" in one      # the job scan saw the watchdog


MIXED = """\
[rank0]:gpu1:100:160 [0] NCCL INFO Bootstrap : Using eth0:198.18.0.1<0>
[rank1]:gpu1:101:161 [1] NCCL INFO comm 0x1 rank 1 nranks 4 cudaDev 1 - Init COMPLETE
[rank2]:step 10 loss 0.1234 lr 3.0e-4
[rank2]:[E ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=3000) ran for 3001 ms
[rank3]:Stack (most recent call first):
[rank3]:  File "/job/train.py", line 42 in step
[rank3]:done with the stack
[rank0]:gpu1:100:160 [0] NCCL INFO Channel 00/02 : 0 1 2 3
============================================================
train.py FAILED
Failures:
  <NO_OTHER_FAILURES>
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_19:00:00
  host      : gpu1
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 103)
  traceback : Signal 9 (SIGKILL) received by PID 103
============================================================
[rank0]:after the summary
"""


KEYS = (b"NCCL", b"nccl", b"Last error", b"mlx")
NEXT = {b"Last error": 1, b"mlx": 2}
KEYS2 = (b"Failures:", b"most recent call first", b"Connection closed")
NEXT2 = {b"most recent call first": 3}
WORDS = [b"", b"x", b"epoch 3 loss 0.25", b"host:1:2 [0] NCCL INFO Using network IB",
         b"Stack (most recent call first):", b"Last error:", b"the reason", b"mlx5_0",
         b"NCCL WARN Connection closed by peer", b"Failures:", b"  File \"a.py\", line 3",
         b"\r", b"[rank0]:step 9 lr 3e-4" * 3, b"most recent", b"NCC"]


@pytest.mark.parametrize("seed", range(60))
def test_each_reader_gets_the_lines_of_a_line_by_line_filter(seed, monkeypatch):
    rnd = random.Random(seed)
    monkeypatch.setattr(reader, "CHUNK_BYTES", rnd.choice([7, 64, 1000, 1 << 20]))
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", rnd.choice([16, 40, 16384]))
    lines = []
    for _ in range(rnd.randrange(0, 400)):
        w = rnd.choice(WORDS)
        if rnd.random() < 0.05:
            w = w + b"y" * rnd.randrange(0, 120) + rnd.choice(WORDS)
        lines.append(w)
    data = b"\n".join(lines) + rnd.choice([b"", b"\n", b"NCCL tail", b"Failures:"])
    stats = InputStats("fast")
    got = list(iter_matching2(io.BytesIO(data), stats, KEYS, NEXT, KEYS2, NEXT2))
    assert (got, stats.lines, stats.truncated_lines) == line_by_line(data, KEYS, NEXT, KEYS2, NEXT2)

