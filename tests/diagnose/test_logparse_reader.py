"""Streaming input (ncclcheck/logparse/reader.py): gzip by magic, long lines, stdin, bad files."""

from __future__ import annotations

import gzip
import io
import random
import zlib

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


@pytest.mark.parametrize("data, lines, kept, gzipped, error", [
    (b"", 0, [], False, None),
    (b"\n", 1, [], False, None),                       # an empty line is counted, not kept
    (b"\x1f", 1, [(1, b"\x1f")], False, None),           # half a gzip magic is text
    (b"\x1f\x8b", 0, [], True, "end-of-stream"),        # all magic, no stream
])
def test_tiny_inputs(data, lines, kept, gzipped, error):
    with open_source("-", io.BytesIO(data)) as src:
        got = list(iter_lines(src.stream, src.stats))
    assert (got, src.stats.lines, src.stats.gzip) == (kept, lines, gzipped)
    assert (error in src.stats.error) if error else src.stats.error is None


def test_a_gzip_header_alone_on_stdin_is_bad_input():
    from ncclcheck.diagnose import diagnose_files

    with pytest.raises(BadInput, match=r"^<stdin>: not a readable gzip file \("):
        diagnose_files(["-"], stdin=io.BytesIO(b"\x1f\x8b"))


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(BadInput, match=r"/nonexistent\.log: cannot read \(No such file"):
        open_source("/nonexistent.log")
    with pytest.raises(BadInput, match="is a directory"):
        open_source(str(tmp_path))


def test_a_truncated_gzip_gives_every_line_before_the_break(tmp_path):
    text = b"".join(b"rank %d line %d\n" % (i % 8, i) for i in range(200_000))
    packed = gzip.compress(text)
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[: len(packed) // 2])
    decodable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(packed[: len(packed) // 2])
    with open_source(str(path)) as src:
        lines = [line for _, line in iter_lines(src.stream, src.stats)]
    assert "end-of-stream" in src.stats.error
    assert src.stats.bytes == len(decodable) > CHUNK_BYTES      # nothing decoded is lost
    whole = text.split(b"\n")
    assert lines[:-1] == whole[:len(lines) - 1]     # the last line is cut where the file is
    assert whole[len(lines) - 1].startswith(lines[-1])


def test_a_file_name_with_terminal_escapes_is_shown_escaped(tmp_path):
    """Issue 16: the one-line error names the file without letting it drive the terminal."""
    with pytest.raises(BadInput) as exc:
        open_source(str(tmp_path / "x\x1b[2Jy.log"))
    assert "\x1b" not in str(exc.value) and "x\\x1b[2Jy.log: cannot read" in str(exc.value)
