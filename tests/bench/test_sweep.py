"""Sizes and data types as nccl-tests takes them."""

from __future__ import annotations

import pytest

from ncclcheck.bench.sweep import get_dtype, parse_size, sizes
from ncclcheck.errors import BadInput


def test_binary_units_like_nccl_tests():
    assert [parse_size(s) for s in ("8", "1K", "1k", "32M", "8G", "1T")] == \
        [8, 1024, 1024, 32 << 20, 8 << 30, 1 << 40]


@pytest.mark.parametrize("bad", ["", "1.5M", "-8", "8X", "M", "1 MB extra"])
def test_bad_sizes_are_one_line_errors(bad):
    with pytest.raises(BadInput, match="K = 1024"):
        parse_size(bad)


def test_the_nccl_tests_loop():
    assert sizes(8, 128 << 20, 2)[:4] == [8, 16, 32, 64]
    assert sizes(8, 128 << 20, 2)[-1] == 128 << 20
    assert len(sizes(8, 128 << 20, 2)) == 25
    assert sizes(1 << 20, 1 << 20, 2) == [1 << 20]
    assert sizes(1024, 10000, 3) == [1024, 3072, 9216]


def test_bad_ranges():
    with pytest.raises(BadInput, match="max-bytes must be >= min-bytes"):
        sizes(1024, 8, 2)
    with pytest.raises(BadInput, match="step-factor"):
        sizes(8, 1024, 1)


def test_dtypes_accept_both_spellings():
    assert get_dtype("float").torch_name == "float32"
    assert get_dtype("fp16").name == "half" and get_dtype("half").size == 2
    assert get_dtype("bfloat16").torch_name == "bfloat16"
    with pytest.raises(BadInput, match="unknown type"):
        get_dtype("complex64")
