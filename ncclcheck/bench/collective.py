"""The collective on preallocated buffers (:class:`Collective`): runs out-of-place and in-place,
and for ``-c`` puts known data in and counts the elements that differ from the exact answer.

torch is handed in by :mod:`~ncclcheck.bench.worker`, the only module that imports it
(:func:`bind`, at the worker's import), as :mod:`~ncclcheck.bench.pairrank` gets it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from ncclcheck.bench.formulas import Op
from ncclcheck.bench.sweep import CHECK_MODULUS

CHECK_CHUNK = 1 << 24  #: elements compared at once
torch: Any = None           #: ``torch``, handed in by :func:`bind`
dist: Any = None            #: ``torch.distributed``, handed in by :func:`bind`
ALL_GATHER: Any = None      #: see :func:`bind`
REDUCE_SCATTER: Any = None  #: see :func:`bind`


def bind(torch_module: Any, dist_module: Any) -> None:
    """Hand in torch and torch.distributed (the worker does, once, as it is imported).

    torch 2.13 deprecates ``all_gather_into_tensor``/``reduce_scatter_tensor`` (a FutureWarning
    on every call) for the ``*_single`` names, which older releases lack: the current name, else
    the old."""
    global torch, dist, ALL_GATHER, REDUCE_SCATTER
    torch, dist = torch_module, dist_module
    ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor



def pattern(start: int, length: int, rank: int, device: Any, modulus: int) -> Any:
    """int64 values ``(index + 3*rank) % modulus`` for indices ``start .. start+length``."""
    idx = torch.arange(start, start + length, dtype=torch.int64, device=device)
    return (idx + 3 * rank) % modulus


def rank_sum(start: int, length: int, nranks: int, device: Any, modulus: int) -> Any:
    """int64 ``sum over r < nranks of (index + 3r) % modulus`` (the all_reduce of the data)."""
    idx = torch.arange(start, start + length, dtype=torch.int64, device=device)
    total = torch.zeros(length, dtype=torch.int64, device=device)
    for t in range(min(nranks, modulus)):
        weight = nranks // modulus + (1 if t < nranks % modulus else 0)
        total += weight * ((idx + 3 * t) % modulus)
    return total


class Collective:
    """One op on preallocated buffers: runs out-of-place and in-place, and knows the answer."""

    def __init__(self, op: Op, rank: int, nranks: int, dtype: Any, max_count: int,
                 device: Any, modulus: int = CHECK_MODULUS) -> None:
        self.op, self.rank, self.n, self.dtype, self.device = op, rank, nranks, dtype, device
        self.mod = modulus  # -c data: (index + 3*rank) % mod, exact in dtype (sweep.check_modulus)
        self.send = torch.zeros(max(1, self.send_elems(max_count)), dtype=dtype, device=device)
        self.recv = torch.zeros(max(1, self.recv_elems(max_count)), dtype=dtype, device=device)
        self.count = 0

    def send_elems(self, count: int) -> int:
        return count * self.n if self.op.name in ("reduce_scatter", "alltoall") else count

    def recv_elems(self, count: int) -> int:
        return count * self.n if self.op.name in ("all_gather", "alltoall") else count

    def resize(self, count: int) -> None:
        """Use the first ``count`` elements per rank of the buffers."""
        self.count = count
        self.inp = self.send.narrow(0, 0, self.send_elems(count))
        self.out = self.recv.narrow(0, 0, self.recv_elems(count))

    def prepare(self, in_place: bool) -> None:
        """Untimed set-up before a placement runs: out-of-place all_reduce starts from a copy of
        the input in the output buffer (torch.distributed has no out-of-place all_reduce)."""
        if self.op.name == "all_reduce" and not in_place:
            self.out.copy_(self.inp)

    def runner(self, in_place: bool) -> Callable[[], None]:
        """A zero-argument function that runs the op once, and nothing else (it is timed).

        A ``functools.partial``, not a lambda: it adds no Python frame per op, so the timed block
        costs what a bare ``dist.all_reduce(t)`` loop costs (scripts/device-check measures both
        on a GPU, where a small op takes about 15 us of launch time).
        """
        op, inp, out, c, r = self.op.name, self.inp, self.out, self.count, self.rank
        if op == "all_reduce":
            return partial(dist.all_reduce, out)
        if op == "all_gather":
            src = out.narrow(0, r * c, c) if in_place else inp
            return partial(ALL_GATHER, out, src)
        if op == "reduce_scatter":
            dst = inp.narrow(0, r * c, c) if in_place else out
            return partial(REDUCE_SCATTER, dst, inp)
        if op == "broadcast":
            buf = out if in_place or r != 0 else inp
            return partial(dist.broadcast, buf, 0)
        if op == "alltoall":
            return partial(dist.all_to_all_single, out, inp)
        if op == "sendrecv":
            nxt, prv = (r + 1) % self.n, (r - 1) % self.n

            def sendrecv() -> None:
                for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, inp, nxt),
                                                    dist.P2POp(dist.irecv, out, prv)]):
                    work.wait()
            return sendrecv
        raise ValueError(op)

    def fill(self, in_place: bool) -> Any:
        """Put this rank's known data where the op reads it; return the tensor holding the result."""
        op, c, r = self.op.name, self.count, self.rank
        if op == "all_gather":
            src = self.out.narrow(0, r * c, c) if in_place else self.inp
            src.copy_(pattern(0, c, r, self.device, self.mod).to(self.dtype))
            return self.out
        if op == "reduce_scatter":
            self.inp.copy_(pattern(0, c * self.n, r, self.device, self.mod).to(self.dtype))
            return self.inp.narrow(0, r * c, c) if in_place else self.out
        if op in ("all_reduce", "broadcast") and in_place:
            self.out.copy_(pattern(0, c, r, self.device, self.mod).to(self.dtype))
            return self.out
        self.inp.copy_(pattern(0, self.inp.numel(), r, self.device, self.mod).to(self.dtype))
        self.out.zero_()
        self.prepare(in_place)
        if op == "broadcast" and r == 0:
            return self.inp  # out-of-place on the root: torch broadcasts from the input
        return self.out

    def expected(self, start: int, length: int) -> Any:
        """The correct result at output indices ``start .. start+length`` (int64)."""
        op, c, r, n, dev = self.op.name, self.count, self.rank, self.n, self.device
        if op == "all_reduce":
            return rank_sum(start, length, n, dev, self.mod)
        if op == "reduce_scatter":
            return rank_sum(r * c + start, length, n, dev, self.mod)
        if op == "broadcast":
            return pattern(start, length, 0, dev, self.mod)
        if op == "sendrecv":
            return pattern(start, length, (r - 1) % n, dev, self.mod)
        j = torch.arange(start, start + length, dtype=torch.int64, device=dev)
        src_rank, i = j // max(c, 1), j % max(c, 1)
        if op == "all_gather":
            return (i + 3 * src_rank) % self.mod
        if op == "alltoall":
            return (r * c + i + 3 * src_rank) % self.mod
        raise ValueError(op)

    def count_wrong(self, result: Any) -> int:
        """Elements of ``result`` that differ from the expected answer."""
        wrong = 0
        total = result.numel()
        for start in range(0, total, CHECK_CHUNK):
            length = min(CHECK_CHUNK, total - start)
            want = self.expected(start, length).to(self.dtype)
            wrong += int((result.narrow(0, start, length) != want).sum().item())
        return wrong
