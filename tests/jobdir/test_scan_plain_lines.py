"""The job scanner's fast paths for plain ``[rankN]:`` lines (they can only be a rank's last
lines: a plain file's tail is read for them, a gzip file's are queued undecoded) leave exactly
what the full scanner leaves, on the recorded job texts and on a torchrun log that mixes NCCL
INFO lines, a watchdog timeout, a stack, a RAS block and torchrun's summary; and a
torchrun-prefixed log of NCCL lines no longer goes line by line through the scanner.

One difference is by design: a prefixed line whose text starts a torchrun summary block
(``[rank0]:[0]:``, never seen in torchrun's output) is not read as one."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest

from ncclcheck.jobdir import inputs
from ncclcheck.jobdir.job import JobReader
from ncclcheck.jobdir.text import TextScanner
from ncclcheck.logparse.prefilter import iter_matching
from ncclcheck.logparse.reader import open_source

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


def state(job: JobReader) -> dict:
    text = job.text
    return {"ranks": {r: dataclasses.asdict(t) for r, t in sorted(text.ranks.items())},
            "srun": text.srun_tasks, "closed": text.closed_peers,
            "summary": text.torchrun_summary, "ras": repr(vars(text.ras))}


def reference(path: Path) -> dict:
    """Every line with a key, the prefix included, through the full scanner."""
    job = JobReader()
    with open_source(str(path)) as src:
        scanner = job.scanner(src.stats.name)
        for lineno, raw in iter_matching(src.stream, src.stats, inputs.KEYS, inputs.FOLLOW):
            scanner.feed(raw.decode("utf-8", "replace"), lineno)
        scanner.close()
    return state(job)


def scanned(path: Path) -> dict:
    job = JobReader()
    inputs.scan_text(job, str(path))
    return state(job)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", sorted(p.name for p in JOBS.iterdir() if p.suffix != ".md")
                         + ["mixed"])
def test_the_fast_paths_leave_what_the_full_scanner_leaves(name, gz, tmp_path):
    """A plain file (its tail read for the last lines) and a gzip one (its plain lines queued)."""
    data = MIXED.encode() if name == "mixed" else (JOBS / name).read_bytes()
    path = tmp_path / ("job.log.gz" if gz else "job.log")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert scanned(path) == reference(path)


def test_a_large_file_reads_its_tail_for_the_last_lines(tmp_path, monkeypatch):
    """Rank 7's last lines lie before the tail: they are not kept; rank 3's, in it, are, in
    order with the line fed in full (the watchdog line)."""
    monkeypatch.setattr(inputs, "TAIL_BYTES", 4096)
    lines = ["[rank7]:rank 7 early line"] + [f"[rank3]:filler {i:05d}" for i in range(400)]
    lines += ["[rank3]:[E] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
              "OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=3000) ran for 3001 ms",
              "[rank3]:after the watchdog"]
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    got = scanned(path)
    assert 7 not in got["ranks"]
    last = [line for _, line in got["ranks"][3]["last"]]
    assert last[-2].startswith("[E] Watchdog caught") and last[-1] == "after the watchdog"
    assert last[:4] == [f"filler {i:05d}" for i in range(396, 400)]
    assert got["ranks"][3]["last"][-1][0] == f"{path}:{len(lines)}"


def test_plain_rank_lines_take_the_fast_path(tmp_path, monkeypatch):
    path = tmp_path / "job.log.gz"
    path.write_bytes(gzip.compress(MIXED.encode()))
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
