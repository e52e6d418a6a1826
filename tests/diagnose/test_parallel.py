"""A big plain log prefiltered by forked workers (:mod:`ncclcheck.logparse.parallel`, issue 24)
gives exactly the lines, line numbers, ``which`` flags and counts of one pass over the whole
file, whatever the segment size: lines that a key selects after it across segment ends, cut
lines, a last line without newline, segments with no line start. The diagnosis is the same
document byte for byte. A worker that dies leaves its segments to this process, and nothing is
left running. Segments are made tiny here (``SEGMENT_BYTES``) so that small files have many."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from pathlib import Path

import pytest

from linefilter import reference as line_by_line

from ncclcheck import diagnose
from ncclcheck.logparse import parallel, reader
from ncclcheck.logparse.reader import open_source

from test_shared_pass import INPUTS, KEYS, KEYS2, NEXT, NEXT2, WORDS

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


@pytest.fixture
def tiny(monkeypatch):
    """Every file is read by 3 workers, in segments of ``tiny(n)`` bytes."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cpus", lambda root="/": 3)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))

    def segments(n: int) -> None:
        monkeypatch.setattr(parallel, "SEGMENT_BYTES", n)
    segments(64)
    return segments


def _flat(path: str, keys=KEYS, follow=NEXT, keys2=KEYS2, follow2=NEXT2
          ) -> tuple[list, int, int, int]:
    """``(line_number, line, which)`` of every line ``parallel.blocks`` takes from ``path``, and
    the lines, cut lines and bytes it counted."""
    out = []
    with open_source(path) as src:
        for numbers, lines, which in parallel.blocks(src, path, keys, follow, keys2, follow2):
            out.extend(zip(numbers, lines, which or [1] * len(lines)))
        return out, src.stats.lines, src.stats.truncated_lines, src.stats.bytes


@pytest.mark.parametrize("seed", range(40))
def test_workers_take_the_lines_of_a_line_by_line_filter(seed, tiny, tmp_path, monkeypatch):
    rnd = random.Random(seed)
    tiny(rnd.choice([1, 7, 64, 300, 2000]))
    monkeypatch.setattr(reader, "CHUNK_BYTES", rnd.choice([7, 64, 1000, 1 << 20]))
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", rnd.choice([16, 40, 16384]))
    lines = []
    for _ in range(rnd.randrange(0, 600)):
        w = rnd.choice(WORDS)
        if rnd.random() < 0.05:
            w = w + b"y" * rnd.randrange(0, 3000 if rnd.random() < 0.2 else 120) + rnd.choice(WORDS)
        lines.append(w)
    data = b"\n".join(lines) + rnd.choice([b"", b"\n", b"NCCL tail", b"Failures:"])
    path = tmp_path / "job.log"
    path.write_bytes(data)
    got, n, cut, size = _flat(str(path))
    assert (got, n, cut) == line_by_line(data, KEYS, NEXT, KEYS2, NEXT2)
    assert size == len(data)


def test_lines_followed_across_many_segments(tiny, tmp_path):
    """A key whose following lines run over several segment ends, and another key inside them
    that takes them further: the segments after hold no key of their own."""
    tiny(50)
    keys, follow = (b"NCCL", b"hdr"), {b"hdr": 12}
    body = [b"step %d loss 0.1" % i for i in range(40)]
    data = b"\n".join([b"x"] * 3 + [b"hdr a"] + body[:5] + [b"hdr b"] + body + [b"NCCL end"])
    path = tmp_path / "job.log"
    path.write_bytes(data)
    out, n, cut, _ = _flat(str(path), keys, follow, (), {})
    assert (out, n, cut) == line_by_line(data, keys, follow)
    assert [x[0] for x in out] == list(range(4, 23)) + [51]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_diagnosis_is_the_same(path, tiny, monkeypatch):
    tiny(97)
    one = diagnose.diagnose_files([str(path)])
    monkeypatch.setattr(parallel, "MIN_BYTES", 1 << 60)
    two = diagnose.diagnose_files([str(path)])
    for doc in (one, two):
        doc.pop("created_at", None)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)


def _log(tmp_path: Path) -> tuple[Path, bytes]:
    rnd = random.Random(5)
    lines = [rnd.choice(WORDS) + b" %d" % i for i in range(3000)]
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "job.log"
    path.write_bytes(data)
    return path, data


def test_a_dead_worker_leaves_its_segments_to_this_process(tiny, tmp_path, monkeypatch):
    tiny(512)
    path, data = _log(tmp_path)
    real = parallel.segment
    calls = []

    def dies_in_a_worker(fd, i, *args):
        if os.getpid() != me and i >= 7:
            os._exit(3)                       # a worker killed after some segments
        calls.append(i)
        return real(fd, i, *args)
    me = os.getpid()
    monkeypatch.setattr(parallel, "segment", dies_in_a_worker)
    got, n, cut, _ = _flat(str(path))
    assert (got, n, cut) == line_by_line(data, KEYS, NEXT, KEYS2, NEXT2)
    assert calls and min(calls) >= 7           # this process read only what the workers did not
    assert not multiprocessing.active_children()


def test_nothing_is_left_running_when_the_reader_stops_early(tiny, tmp_path):
    tiny(256)
    path, _ = _log(tmp_path)
    with open_source(str(path)) as src:
        it = parallel.blocks(src, str(path), KEYS, NEXT, KEYS2, NEXT2)
        next(it)
        assert len(multiprocessing.active_children()) == 3
        it.close()
    assert not multiprocessing.active_children()


def test_small_busy_gzip_and_stdin_inputs_take_one_process(monkeypatch, tmp_path):
    """Under MIN_BYTES, with under two idle CPUs, for gzip and for ``-``: no worker (read as
    before, in this process)."""
    monkeypatch.setattr(parallel, "cpus", lambda root="/": 3)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.0, 0.0))
    assert parallel.workers_for(parallel.MIN_BYTES - 1) is None
    assert parallel.workers_for(parallel.MIN_BYTES) == 3
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 0.0, 0.0))   # a CPU busy: one less
    assert parallel.workers_for(parallel.MIN_BYTES) == 2
    monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 0.0, 0.0))   # under two idle: none
    assert parallel.workers_for(parallel.MIN_BYTES) is None
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    started = []
    monkeypatch.setattr(parallel, "_parallel", lambda *a: started.append(a) or iter(()))
    import gzip
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(gzip.compress(b"NCCL x\n" * 10))
    with open_source(str(gz)) as src:
        assert [b[1] for b in parallel.blocks(src, str(gz), KEYS, NEXT, (), {})] == [[b"NCCL x"] * 10]
    assert not started


def test_ctrl_c_exits_130_and_leaves_no_worker(tmp_path):
    """``diagnose`` as a terminal runs it (SIGINT at its default), interrupted while its workers
    read: exit 130, one line, and every worker gone."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    path = tmp_path / "big.log"
    path.write_bytes(b"[rank0]:h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                     b"step 1 loss 0.5\n" * 40000)
    code = ("import os, time; os.getloadavg = lambda: (0.0, 0.0, 0.0)\n"
            "from ncclcheck.logparse import parallel\n"
            "parallel.MIN_BYTES, parallel.SEGMENT_BYTES = 0, 1 << 16\n"
            "parallel.cpus = lambda root='/': 2\n"
            "slow = parallel._unpack\n"
            "parallel._unpack = lambda *a: (time.sleep(0.05), slow(*a))[1]\n"
            "from ncclcheck.cli.main import main\n"
            f"main(['diagnose', {str(path)!r}, '--json'])\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        kids: list = []
        end = time.monotonic() + 30
        while len(kids) < 2 and time.monotonic() < end and proc.poll() is None:
            kids = psutil.Process(proc.pid).children()
            time.sleep(0.05)
        assert len(kids) == 2, "the workers never started"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "ncclcheck: interrupted"
    psutil.wait_procs(kids, timeout=5)
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def test_a_key_that_recurs_within_its_follow_up_costs_no_more_than_its_follow_up(tiny, tmp_path):
    """A key every 6 lines that selects the 12 after it (a training log printing "GPU0 ..." every
    few steps, GPU0 taking 80 lines): every line is taken, and a worker reads on past its
    segment only until the next segment's own count agrees, not to the end of the file."""
    import marshal

    tiny(300)
    keys, follow = (b"NCCL", b"hdr"), {b"hdr": 12}
    lines = [b"hdr %d" % i if i % 6 == 0 else b"step %d loss 0.1" % i for i in range(3000)]
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "job.log"
    path.write_bytes(data)
    out, n, cut, _ = _flat(str(path), keys, follow, (), {})
    assert (out, n, cut) == line_by_line(data, keys, follow) and n == 3000
    fd = os.open(path, os.O_RDONLY)
    try:
        starts = parallel.bounds(fd, len(data))
        mores = [marshal.loads(parallel.segment(fd, i, starts, keys, follow, (), {}))[4]
                 for i in range(len(starts) - 1)]
    finally:
        os.close(fd)
    assert max(mores) <= 12, mores          # read on: at most the follow-up, not to the end


def test_a_read_error_stops_the_file_there(tiny, tmp_path, monkeypatch):
    """A segment whose read fails right after a key that selects lines after it: the lines
    before the failure, as one pass takes them, and the error; nothing from beyond it."""
    import errno

    tiny(4096)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64)
    monkeypatch.setattr(parallel, "_WINDOW", 16)      # segment starts found without the bad bytes
    lines = [b"step %04d" % i for i in range(1000)]
    lines[500] = b"CA 'mlx5_0'"
    data = b"\n".join(lines) + b"\n"
    bad = data.index(b"step 0510")
    real = os.pread

    def pread(fd, n, off):
        if off <= bad < off + n:
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, n, off)
    monkeypatch.setattr(os, "pread", pread)
    path = tmp_path / "job.log"
    path.write_bytes(data)
    keys, follow = diagnose.KEYS, diagnose.NEXT_KEYS           # "CA '": the 40 lines after it
    with open_source(str(path)) as src:
        got = [(n, ln) for b in parallel.blocks(src, str(path), keys, follow, (), {})
               for n, ln in zip(b[0], b[1])]
        assert "Input/output error" in (src.stats.error or "")
    want = [(n, ln) for n, ln, _ in line_by_line(data, keys, follow)[0]]
    assert got[0] == (501, b"CA 'mlx5_0'") and got[:-1] == want[:len(got) - 1], got[-3:]
    last, cut = got[-1], want[len(got) - 1]      # the line the failure cut, as one pass keeps it
    assert last[0] == cut[0] <= 511 and cut[1].startswith(last[1]), (last, cut)
