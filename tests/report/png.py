"""A small PNG reader (zlib only) so the browser test can look at the screenshot's pixels."""

from __future__ import annotations

import struct
import zlib
from collections import Counter

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _add(a: bytes, b: bytes) -> bytes:
    """Byte-wise (a + b) mod 256 over whole rows at once, with big-integer arithmetic."""
    n = len(a)
    low = int.from_bytes(b"\x7f" * n, "big")
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    return (((x & low) + (y & low)) ^ ((x ^ y) & ~low & ((1 << 8 * n) - 1))).to_bytes(n, "big")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_png(path) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    data = open(path, "rb").read()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows: list[bytes] = []
    prior = bytes(stride)
    for r in range(height):
        start = r * (stride + 1)
        kind, line = raw[start], raw[start + 1:start + 1 + stride]
        if kind == 0:
            out = line
        elif kind == 2:
            out = _add(line, prior)
        else:
            buf = bytearray(line)
            for i in range(stride):
                left = buf[i - bpp] if i >= bpp else 0
                if kind == 1:
                    buf[i] = (buf[i] + left) & 0xFF
                elif kind == 3:
                    buf[i] = (buf[i] + ((left + prior[i]) >> 1)) & 0xFF
                else:
                    up_left = prior[i - bpp] if i >= bpp else 0
                    buf[i] = (buf[i] + _paeth(left, prior[i], up_left)) & 0xFF
            out = bytes(buf)
        rows.append(out)
        prior = out
    return width, height, bpp, rows


def colours(path) -> Counter:
    """How many pixels have each (r, g, b) colour."""
    _, _, bpp, rows = read_png(path)
    counts: Counter = Counter()
    for row in rows:
        counts.update(zip(row[0::bpp], row[1::bpp], row[2::bpp]))
    return counts
