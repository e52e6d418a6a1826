"""nccl-tests' definitions: per-rank counts, the ``size`` column, algbw and busbw (pure).

Every figure matches NVIDIA/nccl-tests (``src/<coll>.cu``, ``*GetCollByteCount`` and
``*GetBw``; see ``/work/shared/reference/bench-method.md`` §1.2-1.3):

* ``count`` is the element count passed to NCCL by each rank. For all_gather, reduce_scatter and
  alltoall it is the per-rank share, ``(count/nranks)`` rounded down to 16 bytes.
* ``size`` (the table's first column) is the total buffer, ``max(sendBytes, recvBytes)``.
* ``algbw = size / time``, in GB/s where **GB = 1e9 bytes**; sizes on the command line are
  binary (``K = 1024``).
* ``busbw = algbw * factor``: all_reduce ``2(n-1)/n``; all_gather, reduce_scatter and alltoall
  ``(n-1)/n``; broadcast, reduce and sendrecv ``1``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """One collective as nccl-tests runs and reports it.

    Attributes:
        name: ncclcheck's name (``all_reduce``) and the nccl-tests binary's stem.
        nccl_name: NCCL's name, as in NCCL_DEBUG lines (``AllReduce``).
        split: the buffer is split across ranks (all_gather, reduce_scatter, alltoall).
        redop: the ``redop`` column (``sum`` or ``none``).
        root: the ``root`` column (-1 when the op has no root).
        in_place: torch.distributed can run it in place (a real in-place column).
    """

    name: str
    nccl_name: str
    split: bool
    redop: str
    root: int
    in_place: bool

    def bus_factor(self, nranks: int) -> float:
        """busbw / algbw for ``nranks`` ranks (nccl-tests ``*GetBw``).

        >>> OPS["all_reduce"].bus_factor(8), OPS["all_gather"].bus_factor(8)
        (1.75, 0.875)
        >>> OPS["broadcast"].bus_factor(8), OPS["all_reduce"].bus_factor(1)
        (1.0, 0.0)
        """
        if nranks < 1:
            raise ValueError("nranks must be >= 1")
        if self.name == "all_reduce":
            return 2.0 * (nranks - 1) / nranks
        if self.name in ("all_gather", "reduce_scatter", "alltoall"):
            return (nranks - 1) / nranks
        return 1.0


OPS: dict[str, Op] = {op.name: op for op in (
    Op("all_reduce", "AllReduce", False, "sum", -1, True),
    Op("all_gather", "AllGather", True, "none", -1, True),
    Op("reduce_scatter", "ReduceScatter", True, "sum", -1, True),
    Op("broadcast", "Broadcast", False, "none", 0, True),
    Op("alltoall", "AlltoAll", True, "none", -1, False),
    Op("sendrecv", "SendRecv", False, "sum", -1, False),
)}


def get_op(name: str) -> Op:
    """The op called ``name``; accepts nccl-tests spellings (``all_reduce_perf``, ``allreduce``).

    >>> get_op("all_reduce_perf_mpi").name, get_op("AllGather").name, get_op("alltoall").name
    ('all_reduce', 'all_gather', 'alltoall')
    """
    key = name.strip().lower().replace("-", "_")
    for suffix in ("_mpi", "_perf"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    if key in OPS:
        return OPS[key]
    squashed = key.replace("_", "")
    for op in OPS.values():
        if op.name.replace("_", "") == squashed:
            return op
    raise KeyError(f"unknown op {name!r} (one of {', '.join(OPS)})")


def per_rank_count(op: Op, size_bytes: int, elt_bytes: int, nranks: int) -> int:
    """The ``count`` column for a requested size: elements each rank passes to NCCL.

    Split ops divide by ``nranks`` and align to 16 bytes, as current nccl-tests does
    (``(count/nranks) & -(16/eltSize)``).

    >>> per_rank_count(OPS["all_reduce"], 1024, 4, 8)
    256
    >>> per_rank_count(OPS["all_gather"], 1024, 4, 8), per_rank_count(OPS["all_gather"], 32, 4, 8)
    (32, 0)
    """
    count = size_bytes // elt_bytes
    if not op.split:
        return count
    align = max(1, 16 // elt_bytes)
    return (count // nranks) // align * align


def size_column(op: Op, count: int, elt_bytes: int, nranks: int) -> int:
    """The ``size`` column: ``max(sendBytes, recvBytes)`` for ``count`` elements per rank.

    >>> size_column(OPS["reduce_scatter"], 32, 4, 8), size_column(OPS["broadcast"], 32, 4, 8)
    (1024, 128)
    """
    return count * elt_bytes * (nranks if op.split else 1)


def algbw_gbps(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes/s) of ``size_bytes`` moved in ``time_us``.

    >>> round(algbw_gbps(8589934592, 47535), 2)  # nccl-tests: 8 GiB in 47535 us -> 180.71
    180.71
    >>> algbw_gbps(0, 6.36), algbw_gbps(8, 0.0)
    (0.0, 0.0)
    """
    if time_us <= 0:
        return 0.0
    return size_bytes / 1.0e3 / time_us


def busbw_gbps(op: Op, size_bytes: int, time_us: float, nranks: int) -> float:
    """Bus bandwidth in GB/s: algbw times the op's factor for ``nranks``.

    nccl-tests printed ``338.82`` for this row: it divides by the unrounded time.

    >>> round(busbw_gbps(OPS["all_reduce"], 8589934592, 47535, 16), 2)
    338.83
    """
    return algbw_gbps(size_bytes, time_us) * op.bus_factor(nranks)
