"""Streaming input (ncclcheck/logparse/reader.py): gzip by magic, long lines, stdin, bad files."""

from __future__ import annotations

import gzip
import io
import random

import pytest

from ncclcheck.errors import BadInput
from ncclcheck.logparse.reader import (
    CHUNK_BYTES,
    MAX_LINE_BYTES,
    InputStats,
    iter_lines,
    open_source,
)


def lines_of(data: bytes, wanted=bool):
    stats = InputStats("t")
    return list(iter_lines(io.BytesIO(data), stats, wanted)), stats


def test_counts_every_line_and_keeps_numbers():
    got, stats = lines_of(b"a\nNCCL b\n\nNCCL c", lambda l: b"NCCL" in l)
    assert got == [(2, b"NCCL b"), (4, b"NCCL c")]
    assert stats.lines == 4 and stats.bytes == 16


def test_long_line_is_cut_and_next_line_survives():
    data = b"x" * (3 * CHUNK_BYTES + 17) + b"\nNCCL after\n"
    got, stats = lines_of(data)
    assert got[0][0] == 1 and len(got[0][1]) == MAX_LINE_BYTES
    assert got[1] == (2, b"NCCL after")
    assert stats.truncated_lines == 1 and stats.lines == 2


def test_long_line_without_newline_at_end():
    got, stats = lines_of(b"y" * (MAX_LINE_BYTES * 3))
    assert [(n, len(b)) for n, b in got] == [(1, MAX_LINE_BYTES)] and stats.truncated_lines == 1


def test_gzip_found_by_magic_not_name(tmp_path):
    path = tmp_path / "plain-name.log"
    path.write_bytes(gzip.compress(b"NCCL one\nNCCL two\n"))
    with open_source(str(path)) as src:
        got = list(iter_lines(src.stream, src.stats))
    assert src.stats.gzip and [b for _, b in got] == [b"NCCL one", b"NCCL two"]


def test_truncated_gzip_stops_with_an_error_not_an_exception(tmp_path):
    path = tmp_path / "cut.gz"
    rnd = random.Random(5)
    data = b"".join(b"NCCL %x\n" % rnd.getrandbits(64) for _ in range(20000))
    packed = gzip.compress(data)
    path.write_bytes(packed[:len(packed) // 2])
    with open_source(str(path)) as src:
        list(iter_lines(src.stream, src.stats))
    assert src.stats.error and "read stopped" in src.stats.error


def test_stdin_stream_is_read_and_not_closed():
    stdin = io.BytesIO(b"NCCL from stdin\n")
    with open_source("-", stdin) as src:
        got = list(iter_lines(src.stream, src.stats))
    assert got == [(1, b"NCCL from stdin")] and src.stats.name == "<stdin>"
    assert not stdin.closed


def test_tiny_inputs():
    for data in (b"", b"\n", b"\x1f", b"\x1f\x8b"):
        with open_source("-", io.BytesIO(data)) as src:
            list(iter_lines(src.stream, src.stats))


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(BadInput, match=r"/nonexistent\.log: cannot read \(No such file"):
        open_source("/nonexistent.log")
    with pytest.raises(BadInput, match="is a directory"):
        open_source(str(tmp_path))
