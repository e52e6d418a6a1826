"""nccl-tests output read into facts: header, ranks, column names, rows, footer (pure).

The table nccl-tests prints (``src/common.cu``, ``src/util.cu``), old and new formats, with
launcher prefixes stripped (:func:`ncclcheck.logparse.prefix.parse_prefix`). Both ``bench
--import`` (:mod:`ncclcheck.bench.importer`, which turns the facts into a bench document) and
``diagnose`` on a paste (:mod:`ncclcheck.logparse.pasted_nccltests`) read tables through here,
so the parsing stands below both.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ncclcheck.errors import BadInput
from ncclcheck.logparse.prefix import parse_prefix

HEADER_RE = re.compile(r"^#\s+nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)"
                       r"(?:\s+minBytes\s+(?P<min>\d+))?(?:\s+maxBytes\s+(?P<max>\d+))?"
                       r"(?:\s+step:\s*(?P<step>\d+)\((?P<kind>factor|bytes)\))?"
                       r".*?warmup iters:\s*(?P<warmup>\d+)\s+iters:\s*(?P<iters>\d+)"
                       r"(?:.*?validation:\s*(?P<check>\d+))?")
VERSION_RE = re.compile(r"^#\s*nccl-tests version (?P<version>\S+)"
                        r"(?:.*?nccl-library=(?P<lib>\d+))?")
STARTING_RE = re.compile(r"^#\s*(?:Collective test starting|ncclcheck bench):\s*(?P<op>[A-Za-z_]+)")
COMMAND_OP_RE = re.compile(r"\b(?P<op>[a-z_]+)_perf(?:_mpi)?\b")
RANK_RE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+"
                     r"(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<gpu>.*)$")
COLUMNS_RE = re.compile(r"^#\s+size\s+count\s+type\b(?P<rest>.*)$")
ROW_RE = re.compile(r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[A-Za-z_][A-Za-z0-9_]*)\s+"
                    r"(?P<rest>.*\S)\s*$")
OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<status>\S+)")
AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<avg>[-+0-9.eE]+)")
#: ``srun --label`` / pdsh rank labels in front of table lines (``0:            8 ...``).
LABEL_RE = re.compile(r"^\s*\d{1,7}: ")


#: No nccl-tests figure (time in us, GB/s, a size or count) is this large; beyond it the line is
#: refused rather than fed to the charts and the op inference (a ``1e999`` cell once made them spin).
ABSURD = 1e15


class AbsurdNumber(ValueError):
    """A row holds a number that is not finite or beyond :data:`ABSURD`."""


def _number(text: str) -> float | None:
    """A finite float, None for text that is no number; :class:`AbsurdNumber` for inf/nan/huge.

    >>> _number("1.5"), _number("N/A")
    (1.5, None)
    >>> _number("1e999")
    Traceback (most recent call last):
    ...
    ncclcheck.logparse.nccltests.AbsurdNumber: '1e999' is not a finite number below 1e+15
    """
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or abs(value) > ABSURD:
        raise AbsurdNumber(f"{text!r} is not a finite number below {ABSURD:g}")
    return value


def parse_row(line: str, columns: list[str]) -> dict[str, Any] | None:
    """One data row of an nccl-tests table, given the header's column names after ``type``.

    Returns None for a line that is not a row.

    >>> cols = ["redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
    >>> row = parse_row("  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0", cols)
    >>> row["size_bytes"], row["redop"], row["root"], row["out_of_place"], row["in_place"]["wrong"]
    (8589934592, 'sum', -1, {'time_us': 47535.0, 'algbw_gbps': 180.71, 'busbw_gbps': 338.82, 'wrong': 0}, 0)
    >>> old = ["redop", "time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error"]
    >>> parse_row("          32             1   float            89.00    0.00    0.00    N/A    85.13    0.00    0.00    N/A", old)["redop"]
    ''
    """
    match = ROW_RE.match(line)
    if not match:
        return None
    fields = match.group("rest").split()
    if len(fields) < 8:
        return None
    perf, middle = fields[-8:], fields[:-8]
    labels = [c for c in columns if c in ("redop", "root")]
    if len(middle) > len(labels):
        return None
    if len(middle) == len(labels):
        named = dict(zip(labels, middle))
    elif middle and middle[0].lstrip("-").isdigit() and "root" in labels:
        named = {"root": middle[0]}
    else:
        named = dict(zip(labels, middle))
    halves: list[dict[str, Any] | None] = []
    for half in (perf[:4], perf[4:]):
        if all(v.upper() == "N/A" for v in half[:3]):
            halves.append(None)
            continue
        time_us, algbw, busbw = (_number(v) for v in half[:3])
        if time_us is None or algbw is None or busbw is None:
            return None
        err = half[3]
        entry: dict[str, Any] = {"time_us": time_us, "algbw_gbps": algbw, "busbw_gbps": busbw}
        if err.upper() == "N/A":
            entry["wrong"] = None
        elif err.isdigit():
            entry["wrong"] = int(err)
        else:
            entry["wrong"] = None
            entry["max_error"] = _number(err)
        halves.append(entry)
    root = named.get("root")
    for key in ("size", "count"):
        if int(match.group(key)) > ABSURD:
            raise AbsurdNumber(f"{key} {match.group(key)[:20]} is beyond {ABSURD:g}")
    return {"size_bytes": int(match.group("size")), "count": int(match.group("count")),
            "type": match.group("type"), "redop": named.get("redop", ""),
            "root": int(root) if root and root.lstrip("-").isdigit() else -1,
            "out_of_place": halves[0], "in_place": halves[1]}


def nccl_version_from_code(code: int) -> str:
    """NCCL's version from ``NCCL_VERSION_CODE`` (``nccl-library=22907``).

    >>> nccl_version_from_code(22907), nccl_version_from_code(2708)
    ('2.29.7', '2.7.8')
    """
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def parse_nccl_tests(text: str, source: str = "nccl-tests output") -> dict[str, Any]:
    """The facts in one nccl-tests output: header, ranks, column names, rows, footer.

    Recorded sample (nccl-tests 2.18.0 under ``mpirun --tag-output``, from
    eunomia-bpf/nccl-eBPF docs/tmp/socket-thread-validation.md):

    >>> out = parse_nccl_tests('''[1,0]<stdout>:# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907
    ... [1,0]<stdout>:# Collective test starting: all_reduce_perf_mpi
    ... [1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 10 iters: 50 agg iters: 1 validation: 1 graph: 0
    ... [1,0]<stdout>:#  Rank  0 Group  0 Pid 2994447 on        lab device  0 [0000:02:00] NVIDIA GeForce RTX 5090
    ... [1,0]<stdout>:#  Rank  1 Group  0 Pid 2994448 on        lab device  0 [0000:02:00] NVIDIA GeForce RTX 5090
    ... [1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
    ... [1,0]<stdout>:     1048576        262144     float     sum      -1  4366.46    0.24    0.24       0  4365.21    0.24    0.24       0
    ... [1,0]<stdout>:# Out of bounds values : 0 OK
    ... [1,0]<stdout>:# Avg bus bandwidth    : 1.57614''')
    >>> out["op"], out["nccl_version"], out["warmup"], out["iters"], len(out["ranks"]), out["rows"][0]["count"]
    ('all_reduce_perf_mpi', '2.29.7', 10, 50, 2, 262144)
    >>> out["avg_busbw_gbps"], out["out_of_bounds"]
    (1.57614, 0)
    """
    facts: dict[str, Any] = {"op": None, "op_from_command": None, "nccl_tests_version": None,
                             "nccl_version": None, "warmup": None, "iters": None, "check": None,
                             "sweep": None, "ranks": [], "columns": None, "rows": [],
                             "out_of_bounds": None, "avg_busbw_gbps": None, "tables": 0}
    lines = [LABEL_RE.sub("", parse_prefix(raw.rstrip("\r"))[1], count=1)
             for raw in text.splitlines()]
    table_done = False
    for number, line in enumerate(lines, 1):
        try:
            table_done = _parse_line(facts, line, table_done)
        except AbsurdNumber as exc:
            raise BadInput(f"{source}: line {number}: {exc}") from None
        except ValueError:  # int() of thousands of digits
            raise BadInput(f"{source}: line {number}: a number too long to read") from None
    return facts


def _parse_line(facts: dict[str, Any], line: str, table_done: bool) -> bool:
    """Add what one line says to ``facts``; whether the first table has ended."""
    stripped = line.strip()
    if (match := VERSION_RE.match(stripped)):
        facts["nccl_tests_version"] = match.group("version")
        if match.group("lib"):
            facts["nccl_version"] = nccl_version_from_code(int(match.group("lib")))
    elif (match := STARTING_RE.match(stripped)):
        facts["op"] = facts["op"] or match.group("op")
    elif (match := HEADER_RE.match(stripped)):
        facts["warmup"], facts["iters"] = int(match.group("warmup")), int(match.group("iters"))
        if match.group("check") is not None:
            facts["check"] = int(match.group("check"))
        facts["sweep"] = {"threads": int(match.group("threads")),
                          "gpus": int(match.group("gpus")),
                          "min_bytes": int(match.group("min")) if match.group("min") else None,
                          "max_bytes": int(match.group("max")) if match.group("max") else None,
                          "step_factor": (int(match.group("step"))
                                          if match.group("kind") == "factor" else None),
                          "step_bytes": (int(match.group("step"))
                                         if match.group("kind") == "bytes" else None)}
    elif (match := RANK_RE.match(stripped)):
        rank = {"rank": int(match.group("rank")), "pid": int(match.group("pid")),
                "host": match.group("host"), "device": int(match.group("device")),
                "bus_id": match.group("bus"), "gpu": match.group("gpu").strip()}
        if rank not in facts["ranks"]:
            facts["ranks"].append(rank)
    elif (match := COLUMNS_RE.match(stripped)):
        if facts["rows"]:
            table_done = True
        if not table_done:
            facts["columns"] = match.group("rest").split()
        facts["tables"] += 1
    elif (match := OOB_RE.match(stripped)):
        if facts["out_of_bounds"] is None:
            facts["out_of_bounds"] = int(match.group("n"))
    elif (match := AVG_RE.match(stripped)):
        if facts["avg_busbw_gbps"] is None:
            facts["avg_busbw_gbps"] = _number(match.group("avg"))
        table_done = True
    elif facts["columns"] is not None and not table_done and not stripped.startswith("#"):
        row = parse_row(line, facts["columns"])
        if row is not None:
            facts["rows"].append(row)
    if facts["op_from_command"] is None and not stripped.startswith("#"):
        if (match := COMMAND_OP_RE.search(stripped)):
            facts["op_from_command"] = match.group("op")
    return table_done
