"""The sweep the user asked for: sizes (``-b/-e/-f``) and data types (``--dtype``), pure.

Sizes are binary as in nccl-tests (``parsesize``: ``K`` = 1024), and the loop is nccl-tests':
``size = size * factor`` from ``minBytes`` while ``size <= maxBytes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncclcheck.errors import BadInput

_SIZE_RE = re.compile(r"^\s*(\d{1,16})\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE | re.ASCII)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MAX_SIZES = 64
#: The largest message size: 1 TiB (nccl-tests' sweeps stop at a GPU's memory, well below).
MAX_BYTES = 1 << 40
#: Where a sweep over gloo (CPU ranks, no GPU) ends unless ``-e`` is given: gloo's busbw levels
#: off by a few MiB (CPU copies and one TCP stream), and the sizes above only take time (one
#: rank pair on one node: 8 B-128 MiB 77 s, 8 B-8 MiB 28 s on a loaded 2-core machine).
GLOO_MAX_BYTES = 8 << 20


@dataclass(frozen=True)
class DType:
    """A data type: nccl-tests' name (the ``type`` column), torch's name, and its size."""

    name: str
    torch_name: str
    size: int
    integer: bool


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("int8", "int8", 1, True),
    DType("uint8", "uint8", 1, True),
    DType("int32", "int32", 4, True),
    DType("int64", "int64", 8, True),
    DType("half", "float16", 2, False),
    DType("float", "float32", 4, False),
    DType("double", "float64", 8, False),
    DType("bfloat16", "bfloat16", 2, False),
)}
_ALIASES = {"float32": "float", "fp32": "float", "float16": "half", "fp16": "half",
            "bf16": "bfloat16", "float64": "double", "fp64": "double", "char": "int8",
            "int": "int32", "long": "int64"}


def parse_size(text: str) -> int:
    """Bytes in a size such as ``8``, ``64K``, ``32M`` or ``1G`` (binary units, as nccl-tests).

    >>> parse_size("8"), parse_size("64K"), parse_size("32m"), parse_size("1GiB")
    (8, 65536, 33554432, 1073741824)
    >>> parse_size("1.5M")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: size '1.5M': expected a whole number of bytes with an optional K, M, G or T (K = 1024)
    """
    match = _SIZE_RE.match(str(text))
    if not match:
        raise BadInput(f"size {str(text)[:40]!r}: expected a whole number of bytes with an "
                       "optional K, M, G or T (K = 1024)")
    size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if size > MAX_BYTES:
        raise BadInput(f"size {text!r}: larger than {MAX_BYTES >> 40}T")
    return size


def sizes(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """The requested sizes, nccl-tests' loop: multiply by ``step_factor`` up to ``max_bytes``.

    >>> sizes(8, 64, 2)
    [8, 16, 32, 64]
    >>> sizes(1024, 1024, 2), sizes(1, 100, 10)
    ([1024], [1, 10, 100])
    """
    if min_bytes < 0 or max_bytes < min_bytes:
        raise BadInput(f"-b {min_bytes} -e {max_bytes}: max-bytes must be >= min-bytes >= 0")
    if step_factor < 2 and min_bytes != max_bytes:
        raise BadInput("-f/--step-factor must be 2 or more")
    out: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        out.append(size)
        if size == 0 or len(out) > MAX_SIZES:
            break
        size *= step_factor
    if len(out) > MAX_SIZES:
        raise BadInput(f"-b/-e/-f give more than {MAX_SIZES} sizes; raise -f or narrow the range")
    return out


#: Largest integer up to which every integer is exact, per floating-point type.
EXACT_INTEGERS = {"half": 1 << 11, "bfloat16": 1 << 8, "float": 1 << 24, "double": 1 << 53}
CHECK_MODULUS = 7


def check_modulus(dtype: DType, nranks: int, reduces: bool) -> int:
    """``m`` for the ``-c`` data ``(index + 3*rank) % m``: 7, or less when a sum over
    ``nranks`` ranks of values up to ``m - 1`` would not be exact in ``dtype`` (bfloat16 holds
    every integer only up to 256). Integer types wrap the same way on every path: 7. At 1 the
    data is all zeros: results are still checked, and no rounding can count as wrong.

    >>> [check_modulus(DTYPES["bfloat16"], n, True) for n in (8, 64, 256, 512)]
    [7, 5, 2, 1]
    >>> check_modulus(DTYPES["half"], 1024, True), check_modulus(DTYPES["int8"], 1024, True)
    (3, 7)
    >>> check_modulus(DTYPES["bfloat16"], 512, False)
    7
    """
    limit = EXACT_INTEGERS.get(dtype.name)
    if not reduces or limit is None:
        return CHECK_MODULUS
    return max(1, min(CHECK_MODULUS, limit // max(nranks, 1) + 1))


def get_dtype(name: str) -> DType:
    """The data type called ``name`` (nccl-tests or torch spelling).

    >>> get_dtype("float").torch_name, get_dtype("bf16").name, get_dtype("float16").size
    ('float32', 'bfloat16', 2)
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        raise BadInput(f"--dtype {name}: unknown type (one of {', '.join(DTYPES)})")
    return DTYPES[key]


def get_average(text: str) -> str:
    """How per-rank times combine (``-a``): a name, or nccl-tests' number (0 rank0, 1 mean,
    2 min, 3 max).

    >>> get_average("1"), get_average("max"), get_average("3")
    ('mean', 'max', 'max')
    """
    from ncclcheck.bench.document import AVERAGES

    key = str(text).strip().lower()
    by_number = {str(n): name for name, n in AVERAGES.items()}
    key = by_number.get(key, key)
    if key not in AVERAGES:
        raise BadInput(f"-a/--average {text}: expected one of {', '.join(AVERAGES)} "
                       "(or nccl-tests' 0-3)")
    return key


_BUDGET = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,9})?)\s*([smh]?)\s*$", re.I | re.ASCII)


def parse_budget(text: str) -> float:
    """Seconds from ``--budget`` text: ``90``, ``90s``, ``10m``, ``1.5h``.

    >>> parse_budget("10m"), parse_budget("90"), parse_budget("1.5h")
    (600.0, 90.0, 5400.0)
    >>> parse_budget("soon")
    Traceback (most recent call last):
    ...
    ValueError: --budget 'soon': expected a duration such as 90s, 10m or 1h
    """
    match = _BUDGET.match(text or "")
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"--budget {text!r}: expected a duration such as 90s, 10m or 1h")
    seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2).lower()]
    if seconds > 7 * 86400:
        raise ValueError(f"--budget {text!r}: more than a week")
    return seconds
