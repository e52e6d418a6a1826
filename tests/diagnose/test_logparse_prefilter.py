"""The bytes-level prefilter (reader.iter_matching) keeps exactly the lines a line-by-line filter
keeps, with the same numbers, whatever the chunking, line lengths and gzip framing."""

from __future__ import annotations

import gzip
import io
import random
import time

import pytest

from linefilter import reference as line_by_line

from ncclcheck.logparse import prefilter, reader
from ncclcheck.logparse.prefilter import iter_matching
from ncclcheck.logparse.reader import InputStats, open_source

KEYS = (b"NCCL", b"nccl", b"Last error", b"mlx", b"CA '")
NEXT = {b"Last error": 1, b"CA '": 3}          # a pasted ibstat block: its header and body


def reference(data: bytes) -> tuple[list[tuple[int, bytes]], int, int]:
    """The slow, obvious filter: every line, one at a time."""
    out, nlines, cut = line_by_line(data, KEYS, NEXT)
    return [(n, line) for n, line, _ in out], nlines, cut


def fast(data: bytes) -> tuple[list[tuple[int, bytes]], int, int]:
    stats = InputStats("fast")
    got = list(iter_matching(io.BytesIO(data), stats, KEYS, NEXT))
    return got, stats.lines, stats.truncated_lines


WORDS = [b"", b"x", b"epoch 3 loss 0.25", b"host:1:2 [0] NCCL INFO Using network IB",
         b"ncclShmOpen failed", b"Last error:", b"the reason", b"mlx5_0", b"NCC", b"L INFO",
         b"\r", b"  ", b"[rank0]:step 9 lr 3e-4" * 3, b"CA 'mlx5_1'", b"\tState: Down"]


@pytest.mark.parametrize("seed", range(60))
def test_same_lines_as_a_line_by_line_filter(seed, monkeypatch):
    rnd = random.Random(seed)
    monkeypatch.setattr(reader, "CHUNK_BYTES", rnd.choice([7, 64, 1000, 1 << 20]))
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", rnd.choice([16, 40, 16384]))
    lines = []
    for _ in range(rnd.randrange(0, 400)):
        w = rnd.choice(WORDS)
        if rnd.random() < 0.05:
            w = w + b"y" * rnd.randrange(0, 120) + rnd.choice(WORDS)
        lines.append(w)
    data = b"\n".join(lines) + rnd.choice([b"", b"\n", b"NCCL tail"])
    assert fast(data) == reference(data)


def test_gzip_input_goes_through_the_prefilter(tmp_path):
    path = tmp_path / "a.log.gz"
    path.write_bytes(gzip.compress(b"noise\n" * 300000 + b"h:1:2 [0] NCCL INFO x\n"))
    with open_source(str(path)) as src:
        got = list(iter_matching(src.stream, src.stats, KEYS))
    assert got == [(300001, b"h:1:2 [0] NCCL INFO x")] and src.stats.lines == 300001


def test_millions_of_blank_lines_are_counted_not_looped_over():
    """Issue 16: 5 million empty lines took 32 s (6 µs a line); the prefilter counts them in C.
    The bound is loose (the per-line path takes seconds on any machine), so this is not a
    benchmark: it fails only if the reader goes back to a Python step per line."""
    data = b"\n" * 5_000_000 + b"h:1:2 [0] NCCL INFO x\n" + b"\n" * 10
    start = time.process_time()
    got, nlines, _ = fast(data)
    assert got == [(5_000_001, b"h:1:2 [0] NCCL INFO x")] and nlines == 5_000_011
    assert time.process_time() - start < 1.5


def test_diagnose_keys_give_the_same_lines_as_a_line_by_line_filter_whatever_the_chunking(monkeypatch):
    """The real key set (with its gates: a chunk without a key's rarest bytes skips the key)
    keeps what the per-line filter keeps: keys whose gate bytes are in some chunks only."""
    from ncclcheck.diagnose import KEYS as DKEYS, NEXT_KEYS as DNEXT

    words = [b"epoch 3 loss 0.25", b"[rank0]:step 9 lr 3e-4", b"h:1:2 [0] NCCL INFO Using network IB",
             b"CA 'mlx5_0'", b"\tState: Down", b"$ ip -br a", b"lo UNKNOWN 127.0.0.1/8",
             b"RuntimeError: ncclSystemError", b"Last error:", b"why", b"Heartbeat monitor timed out",
             b"host [0] INFO NET : Using interface eth0", b"GPU0\tX \tNV12", b" 8  16  float  sum  -1",
             b"# nThread 1 nGpus 8", b"hca_id:\tmlx5_1", b"Bus error (core dumped)", b"PMIX ERROR: x",
             # keys inside NCCL lines, whose bytes may be nowhere else: their following lines count
             b"h:1:2 [0] NCCL WARN Last error:", b"NCCL hca_id: mlx5_0", b"[0] NCCL INFO GPU0 ok"]
    for seed in range(60):
        rnd = random.Random(seed)
        monkeypatch.setattr(reader, "CHUNK_BYTES", rnd.choice([64, 1000, 4096, 1 << 20]))
        monkeypatch.setattr(prefilter, "_MAX_SPLIT", rnd.choice([0, 3, 2048]))
        data = b"\n".join(rnd.choice(words[:2] * 30 + words) for _ in range(rnd.randrange(1, 3000)))
        want, nlines, _ = line_by_line(data, DKEYS, DNEXT)
        got_stats = InputStats("fast")
        assert list(iter_matching(io.BytesIO(data), got_stats, DKEYS, DNEXT)) == [
            (n, line) for n, line, _ in want]
        assert got_stats.lines == nlines


def test_a_key_whose_rarest_byte_is_absent_from_a_chunk_is_not_searched(monkeypatch):
    """The gate: ``CA '`` (gate byte ``'``) is not searched in a chunk without a quote; it is
    where there is one. Counted by wrapping the search of one key in a chunk, not timed."""
    searched = []

    def counting(real):
        def search(buf, end, key, *rest):
            searched.append(key)
            return real(buf, end, key, *rest)
        return search
    monkeypatch.setattr(prefilter, "_take", counting(prefilter._take))
    monkeypatch.setattr(prefilter, "_take_lines", counting(prefilter._take_lines))  # keys[0]
    keys = (b"NCCL", b"CA '")
    list(iter_matching(io.BytesIO(b"step 1 loss 2\nh:1:2 [0] NCCL INFO x\n" * 50), InputStats("a"), keys))
    assert b"CA '" not in searched and b"NCCL" in searched
    got = list(iter_matching(io.BytesIO(b"it's fine\nCA 'mlx5_0'\n"), InputStats("b"), keys))
    assert b"CA '" in searched and got == [(2, b"CA 'mlx5_0'")]


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_a_rare_byte_seen_often_outside_its_key_still_finds_every_line(chunk, monkeypatch):
    """The memchr of a key's rarest byte gives up for memmem / bytes.find after
    ``_MAX_MISSES`` bytes that are not the key's: the lines found are the same before and after."""
    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    lines = [b"it's x 'quoted' ''" if i % 7 else b"CA 'mlx5_%d'" % i for i in range(300)]
    data = b"\n".join(lines + [b"NCCL'", b"x CA '", b"a'b"]) + b"\n"
    assert sum(line.count(b"'") for line in lines) > 4 * prefilter._MAX_MISSES
    assert fast(data) == reference(data)
