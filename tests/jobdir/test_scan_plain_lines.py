"""The job scanner's fast path for plain ``[rankN]:`` lines (only kept as a rank's last lines)
leaves exactly what the full scanner leaves, on the recorded job texts and on a torchrun log
that mixes NCCL INFO lines, a watchdog timeout, a stack, a RAS block and torchrun's summary;
and a torchrun-prefixed log of NCCL lines no longer goes line by line through the scanner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ncclcheck.jobdir import inputs
from ncclcheck.jobdir.job import JobReader
from ncclcheck.jobdir.text import TextScanner

JOBS = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"

MIXED = """\
[rank0]:gpu1:100:160 [0] NCCL INFO Bootstrap : Using eth0:198.18.0.1<0>
[rank1]:gpu1:101:161 [1] NCCL INFO comm 0x1 rank 1 nranks 4 cudaDev 1 - Init COMPLETE
[rank2]:step 10 loss 0.1234 lr 3.0e-4
[rank3]:  40%|####      | 10/25 [00:01<00:10]
[rank2]:[E ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=3000) ran for 3001 ms
[rank3]:Stack (most recent call first):
[rank3]:  File "/job/train.py", line 42 in step
[rank3]:  File "/job/train.py", line 60 in <module>
[rank3]:done with the stack
[rank1]:RAS: a line for the RAS reader
[rank1]:   time  : loose summary field
[rank0]:[0]:
[rank0]:gpu1:100:160 [0] NCCL INFO Channel 00/02 : 0 1 2 3
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_19:00:00
  host      : gpu1
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 103)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 103
============================================================
[rank0]:after the summary
"""


def scanned(path: Path, fast: bool) -> dict:
    job = JobReader()
    if not fast:
        full = inputs._FULL
        inputs._FULL = (b"[rank",)          # every [rankN]: line to the full scanner
    try:
        inputs.scan_text(job, str(path))
    finally:
        if not fast:
            inputs._FULL = full
    text = job.text
    return {"ranks": {r: dataclasses.asdict(t) for r, t in sorted(text.ranks.items())},
            "srun": text.srun_tasks, "closed": text.closed_peers,
            "summary": text.torchrun_summary, "ras": repr(vars(text.ras))}


@pytest.mark.parametrize("name", sorted(p.name for p in JOBS.iterdir() if p.suffix != ".md")
                         + ["mixed"])
def test_the_fast_path_leaves_what_the_full_scanner_leaves(name, tmp_path):
    path = JOBS / name
    if name == "mixed":
        path = tmp_path / "job.log"
        path.write_text(MIXED)
    assert scanned(path, fast=True) == scanned(path, fast=False)


def test_plain_rank_lines_take_the_fast_path(tmp_path, monkeypatch):
    path = tmp_path / "job.log"
    path.write_text(MIXED)
    fed = []
    real = TextScanner.feed
    monkeypatch.setattr(TextScanner, "feed", lambda self, line, n: (fed.append(line),
                                                                    real(self, line, n))[1])
    job = JobReader()
    inputs.scan_text(job, str(path))
    plain = MIXED.splitlines()[:4]           # before any stack or summary block is open
    assert not set(plain) & set(fed), fed
    assert any("Watchdog caught" in line for line in fed)
    assert [line for _, line in job.text.ranks[0].last][-1] == "after the summary"
