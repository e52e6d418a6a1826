"""``ncclcheck bench --import FILE``: nccl-tests output into a bench document (pure).

Reads the table nccl-tests prints (``src/common.cu``, ``src/util.cu``), old and new formats:

* new (2.x, 2021 on): ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``;
* old: no ``root`` and/or ``redop`` column, and ``error`` (the largest difference) instead of
  ``#wrong``; all_gather had neither column, alltoall left ``redop`` blank;
* lines tagged by the launcher (Open MPI ``--tag-output`` ``[1,0]<stdout>:``, ``srun --label``;
  stripped by :func:`ncclcheck.logparse.prefix.parse_prefix`, as ``diagnose`` does), interleaved
  ``NCCL INFO`` lines (read for the transport and the ``NCCL_*`` settings,
  :mod:`~ncclcheck.bench.transport`), and the footer (``# Out of bounds values``,
  ``# Avg bus bandwidth``).

The op comes from ``--op``, the ``# Collective test starting:`` line (or ncclcheck's own
``# ncclcheck bench:`` line), a ``*_perf`` command line in the text, the ratio busbw/algbw
against the rank count when only one op fits, or, failing those, the file's name
(``nccl_allgather.log``); an output that leaves it open asks for ``--op``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncclcheck.bench import transport
from ncclcheck.bench.document import bench_document, footer_averages
from ncclcheck.bench.formulas import OPS, Op, get_op
from ncclcheck.errors import BadInput
from ncclcheck.logparse.nccltests import (
    parse_nccl_tests,
)


def infer_op(rows: list[dict[str, Any]], nranks: int, elt_bytes: int | None) -> Op | None:
    """The only op whose busbw/algbw factor and count/size relation fit the rows, or None."""
    usable = [r for r in rows if r["out_of_place"] and r["out_of_place"]["algbw_gbps"] >= 0.1]
    if not usable or nranks < 1:
        return None
    ratio = sum(r["out_of_place"]["busbw_gbps"] / r["out_of_place"]["algbw_gbps"]
                for r in usable) / len(usable)
    split = None
    if elt_bytes:
        sample = usable[-1]
        split = sample["count"] * elt_bytes != sample["size_bytes"]
    fits = [op for op in OPS.values()
            if abs(op.bus_factor(nranks) - ratio) < 0.03 and (split is None or op.split == split)]
    redops = {r["redop"] for r in rows}
    if len(fits) > 1:
        fits = [op for op in fits if (op.root >= 0) == any(r["root"] >= 0 for r in rows)]
    if len(fits) > 1 and "sum" in redops:
        fits = [op for op in fits if op.redop == "sum"] or fits
    if len(fits) > 1 and redops <= {"none", ""}:
        fits = [op for op in fits if op.redop == "none"] or fits
    return fits[0] if len(fits) == 1 else None


def op_in_file_name(source: str) -> Op | None:
    """The one op a file's name names (``nccl_allgather.log``, ``all_reduce_perf-2n.txt``).

    >>> op_in_file_name("logs/nccl_allgather.log").name, op_in_file_name("run-2.txt") is None
    ('all_gather', True)
    """
    stem = Path(source).name.lower().replace("-", "_")
    squashed = stem.replace("_", "")
    found = {o.name for o in OPS.values() if o.name.replace("_", "") in squashed}
    return OPS[found.pop()] if len(found) == 1 else None


def choose_op(facts: dict[str, Any], op: str | None, source: str, world: int | None,
              elt_bytes: int | None) -> Op:
    """The collective of an nccl-tests output: ``--op``, what the output says (the
    ``Collective test starting`` line, a ``*_perf`` command line), what the numbers allow
    (busbw/algbw against the rank count), or the file's name; else :class:`BadInput`."""
    if op:
        try:
            return get_op(op)
        except KeyError:
            raise BadInput(f"--op {op}: unknown op (one of {', '.join(OPS)})") from None
    for name in (facts["op"], facts["op_from_command"]):
        if name:
            try:
                return get_op(name)
            except KeyError:
                pass
    chosen = infer_op(facts["rows"], world, elt_bytes) if world else None
    chosen = chosen or op_in_file_name(source)
    if chosen is None:
        raise BadInput(f"{source}: cannot tell which collective this is; pass --op "
                       f"({', '.join(OPS)})")
    return chosen


def import_nccl_tests(text: str, source: str = "nccl-tests output", op: str | None = None,
                      ) -> dict[str, Any]:
    """Build a bench document from nccl-tests output; :class:`BadInput` when it has no table."""
    from ncclcheck.bench.sweep import DTYPES

    facts = parse_nccl_tests(text, source)
    if not facts["rows"]:
        raise BadInput(f"{source}: no nccl-tests result table found")
    hosts: list[str] = []
    for rank in facts["ranks"]:
        if rank["host"] not in hosts:
            hosts.append(rank["host"])
    world = len(facts["ranks"]) or None
    type_name = facts["rows"][-1]["type"]
    chosen = choose_op(facts, op, source, world, DTYPES[type_name].size
                       if type_name in DTYPES else None)
    per_host = [sum(1 for r in facts["ranks"] if r["host"] == h) for h in hosts]
    nccl_logs = transport.parse_nccl_log(text)
    transport_info = transport.summarize(nccl_logs) if nccl_logs else None
    nccl_version = facts["nccl_version"] or (transport_info["nccl_versions"][0]
                                             if transport_info and transport_info["nccl_versions"]
                                             else None)
    cuda = next((e["cuda_version"] for e in nccl_logs if e.get("cuda_version")), None)
    env: dict[str, str] = {}
    for entry in nccl_logs:
        env.update(entry["env"])
    rows = facts["rows"]
    doc = bench_document(
        source="nccl-tests import", op=chosen.name, dtype=type_name, backend="nccl",
        world_size=world, nodes=hosts, ranks_per_node=(per_host[0] if per_host and
                                                       len(set(per_host)) == 1 else per_host),
        warmup=facts["warmup"], iters=facts["iters"], check=facts["check"],
        env=env, versions={"torch": None, "cuda": cuda, "nccl": nccl_version},
        transport=transport_info, rows=rows, sweep=facts["sweep"],
        time_basis="nccl-tests' reported time (its -a option; default: mean over ranks)")
    doc["imported_from"] = {"file": source, "nccl_tests_version": facts["nccl_tests_version"],
                            "out_of_bounds": facts["out_of_bounds"],
                            "avg_busbw_gbps_printed": facts["avg_busbw_gbps"],
                            "ranks": facts["ranks"]}
    if facts["avg_busbw_gbps"] is not None:
        doc["avg_busbw_gbps"] = facts["avg_busbw_gbps"]
    else:
        doc["avg_busbw_gbps"] = footer_averages(rows)[0]
    from ncclcheck.expected.verdict import expect

    doc["expected"] = expect(doc)  # from the text alone; bench --probe adds the facts
    return doc


def import_file(path: str | Path, op: str | None = None) -> dict[str, Any]:
    """Read an nccl-tests output file (``-`` is stdin) into a bench document."""
    from ncclcheck.infile import read_bytes

    text = read_bytes(path, "table").decode("utf-8", errors="replace")
    return import_nccl_tests(text, str(path), op)
