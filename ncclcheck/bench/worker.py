"""One rank of ``ncclcheck bench``: the measurement loop. **The only module that imports torch.**

It runs in three ways:

* :func:`main` in a rank of :mod:`~ncclcheck.bench.agent`, forked from the agent after its one
  import of this module (:mod:`~ncclcheck.bench.forkrank`), or ``python -m ncclcheck.bench.worker``
  where that import failed, with the rank's environment (``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) and the sweep in ``NCCLCHECK_BENCH_SPEC``; it
  reports JSON events, one per line, on its stdout (the agent forwards them to the launcher) and
  writes nothing else there;
* in-process, from :func:`ncclcheck.bench.launch.run_in_launcher`, when ``ncclcheck bench`` was
  itself started by torchrun, srun, mpirun or DeepSpeed;
* from ``scripts/bench-bench.py``, which times a bare torch.distributed loop the same way.

How one size is timed (nccl-tests ``BenchTime``, bench-method.md §1.1): ``-w`` warm-up ops,
then a barrier, then ``-n`` ops back to back timed as one block -- CUDA events on the current
stream with NCCL, ``time.perf_counter`` with gloo (its collectives return when done) -- and the
block time divided by ``-n``. The block holds the collective calls and nothing else. Out-of-place,
then in-place; torch.distributed has no out-of-place all_reduce, so its out-of-place placement
copies the input into the output buffer once, untimed, and reduces that buffer. Every rank's time
is gathered on rank 0, which reports them combined as ``-a/--average`` says (the mean, as
nccl-tests, by default) and records the mean and the slowest rank. With ``-c``, each placement
then runs once more on known data and every rank counts the elements that differ from the
expected result (``#wrong``, summed over ranks).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from ncclcheck.bench import collective, meet, transport
from ncclcheck.bench.collective import Collective
from ncclcheck.bench.document import TIME_BASIS, bench_document, make_row, placement_result
from ncclcheck.bench.environ import rank_env
from ncclcheck.bench.formulas import OPS, Op, per_rank_count, size_column
from ncclcheck.bench.rankenv import (
    RankFailure,
    _die_with_parent,
    choose_gloo_interface,
    effective_env,
    one_line,
    own_transport,
)
from ncclcheck.bench.sweep import check_modulus, get_dtype

Emit = Callable[[dict], None]

collective.bind(torch, dist)  # the collectives' torch: this module's, the only import of torch
ALL_GATHER, REDUCE_SCATTER = collective.ALL_GATHER, collective.REDUCE_SCATTER


# -- gathering ------------------------------------------------------------------------------------
def all_gather_json(obj: Any, device: Any) -> list[Any]:
    """Every rank's ``obj`` (JSON-able), in rank order.

    Not ``dist.all_gather_object``: it unpickles through ``tensor.numpy()``, and numpy is not a
    dependency of torch's wheels (``RuntimeError: Numpy is not available``). The JSON text goes
    as bytes in a uint8 tensor, padded to the longest, after a gather of the lengths.
    """
    data = json.dumps(obj, default=str).encode()
    world = dist.get_world_size()
    lengths = torch.zeros(world, dtype=torch.int64, device=device)
    ALL_GATHER(lengths, torch.tensor([len(data)], dtype=torch.int64, device=device))
    sizes = [int(n) for n in lengths.cpu().tolist()]
    longest = max(sizes)
    mine = torch.zeros(longest, dtype=torch.uint8, device=device)
    mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    everyone = torch.zeros(world * longest, dtype=torch.uint8, device=device)
    ALL_GATHER(everyone, mine)
    raw = bytes(everyone.cpu().tolist())
    return [json.loads(raw[i * longest:i * longest + n]) for i, n in enumerate(sizes)]


# -- timing ---------------------------------------------------------------------------------------
class Timer:
    """Times a block of back-to-back ops: CUDA events with NCCL, perf_counter with gloo."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        if cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time_us(self, fn: Callable[[], Any], iters: int) -> float:
        """Microseconds per op of ``iters`` calls of ``fn`` run as one block."""
        if self.cuda:
            self.start.record()
            for _ in range(iters):
                fn()
            self.end.record()
            self.end.synchronize()
            return self.start.elapsed_time(self.end) * 1000.0 / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1e6 / iters


def barrier(cuda: bool, local_rank: int) -> None:
    """A barrier that does not warn about the device with NCCL."""
    if cuda:
        dist.barrier(device_ids=[local_rank])
    else:
        dist.barrier()


def time_placement(fn: Callable[[], Any], warmup: int, iters: int, timer: Timer,
                   cuda: bool, local_rank: int) -> float:
    """nccl-tests' point: warm up, barrier, time ``iters`` ops as one block; us per op.

    The block holds the ops and nothing else: no copy, no sync and no event per op.
    """
    for _ in range(warmup):
        fn()
    timer.sync()
    barrier(cuda, local_rank)
    return timer.time_us(fn, iters)


# -- the run --------------------------------------------------------------------------------------
def device_info(cuda: bool, local_rank: int) -> dict[str, Any]:
    """This rank's device for the ``# Rank`` lines: name and PCI id (``0000:18:00``) on GPU."""
    if not cuda:
        return {"device": "cpu", "bus_id": None}
    props = torch.cuda.get_device_properties(local_rank)
    bus = None
    if hasattr(props, "pci_bus_id"):
        bus = (f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:"
               f"{getattr(props, 'pci_device_id', 0):02x}")
    return {"device": props.name, "bus_id": bus}


def versions(nccl_from_log: str | None) -> dict[str, Any]:
    """torch, CUDA and NCCL versions (NCCL as the library said in its log, else torch's)."""
    nccl = nccl_from_log
    if nccl is None and torch.cuda.is_available():
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - a CPU build has no NCCL
            nccl = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl}


def run_rank(spec: dict[str, Any], ident: dict[str, Any], emit: Emit) -> dict[str, Any] | None:
    """Run the sweep as one rank; rank 0 returns the bench document, the others None.

    Args:
        spec: the sweep (op, dtype, sizes, warmup, iters, check, backend, timeout_s,
            candidate_env).
        ident: rank, world_size, local_rank, master_addr, master_port.
        emit: where rank 0 reports ``ready`` and ``progress`` events.
    """
    op = OPS[spec["op"]]
    dtype_info = get_dtype(spec["dtype"])
    dtype = getattr(torch, dtype_info.torch_name)
    rank, world, local_rank = ident["rank"], ident["world_size"], ident["local_rank"]
    backend = spec["backend"]
    cuda = backend == "nccl"
    if cuda:
        if not torch.cuda.is_available():
            raise RankFailure("backend nccl needs a GPU; none is visible to this rank")
        # one GPU per rank: the local rank's, or the only one a launcher left visible
        local_rank = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if op.name == "sendrecv" and world < 2:
        raise RankFailure("sendrecv needs at least 2 ranks")
    ident = {**ident, "master_addr": ident["master_addr"] or "127.0.0.1"}
    try:  # resolves the address (Slurm's NodeAddr too); fails in 15 s naming rank and node
        store = meet.join(dist, ident, float(spec["timeout_s"]), dict(os.environ),
                          resolved=ident.get("master_resolved"))
    except meet.RendezvousError as exc:
        raise RankFailure(str(exc)) from None
    if not cuda:
        choose_gloo_interface(ident["master_addr"])
    os.environ["MASTER_ADDR"] = str(ident["master_addr"])
    os.environ["MASTER_PORT"] = str(ident["master_port"])
    timeout = datetime.timedelta(seconds=float(spec["timeout_s"]))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    try:
        if spec.get("pairwise"):  # bench --pairwise: rounds of pairs, one rank per node
            from ncclcheck.bench import pairrank

            return pairrank.run_pairs(spec, torch, dist, rank, world, cuda, device, Timer(cuda),
                                      lambda: barrier(cuda, local_rank), emit,
                                      lambda obj: all_gather_json(obj, device))
        return _sweep(spec, op, dtype_info, dtype, rank, world, local_rank, cuda, device, emit)
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def _sweep(spec: dict[str, Any], op: Op, dtype_info: Any, dtype: Any, rank: int, world: int,
           local_rank: int, cuda: bool, device: Any, emit: Emit) -> dict[str, Any] | None:
    barrier(cuda, local_rank)
    if rank == 0:
        emit({"ev": "ready", "world_size": world, "sizes": len(spec["sizes"])})
    sizes = [int(s) for s in spec["sizes"]]
    counts = [per_rank_count(op, s, dtype_info.size, world) for s in sizes]
    coll = Collective(op, rank, world, dtype, max(counts), device,
                      check_modulus(dtype_info, world, op.name in ("all_reduce", "reduce_scatter")))
    timer = Timer(cuda)
    gathered = torch.zeros(world * 2, dtype=torch.float64, device=device)
    rows: list[dict[str, Any]] = []
    for index, count in enumerate(counts):
        coll.resize(count)
        times = []
        for in_place in (False, True):
            if in_place and not op.in_place:
                times.append(0.0)
                continue
            coll.prepare(in_place)
            times.append(time_placement(coll.runner(in_place), spec["warmup"], spec["iters"],
                                        timer, cuda, local_rank))
            if rank == 0:  # a sign of life for the launcher's watch, between blocks
                emit({"ev": "beat", "size_bytes": sizes[index], "in_place": in_place})
        mine = torch.tensor(times, dtype=torch.float64, device=device)
        ALL_GATHER(gathered, mine)
        wrong: list[int | None] = [None, None]
        if spec["check"]:
            counted = []
            for in_place in (False, True):
                if in_place and not op.in_place:
                    counted.append(0)
                    continue
                result = coll.fill(in_place)
                timer.sync()
                barrier(cuda, local_rank)
                coll.runner(in_place)()
                timer.sync()
                counted.append(coll.count_wrong(result))
            total = torch.tensor(counted, dtype=torch.int64, device=device)
            dist.all_reduce(total)
            wrong = [int(total[0].item()), int(total[1].item()) if op.in_place else None]
        if rank == 0:
            per_rank = gathered.view(world, 2).cpu().tolist()
            size_col = size_column(op, count, dtype_info.size, world)
            average = spec.get("average", "mean")
            oop = placement_result(op, size_col, world, [t[0] for t in per_rank], wrong[0],
                                   average)
            ip = (placement_result(op, size_col, world, [t[1] for t in per_rank], wrong[1],
                                   average) if op.in_place else None)
            row = make_row(op, size_col, count, dtype_info.name, world, oop, ip)
            rows.append(row)
            emit({"ev": "progress", "done": index + 1, "total": len(counts), "row": row})
    me = own_transport() if cuda else transport.new_rank(socket.gethostname(), os.getpid())
    me.update({"rank": rank, "local_rank": local_rank, "host": socket.gethostname(),
               "pid": os.getpid(), **device_info(cuda, local_rank)})
    everyone = all_gather_json(me, device)
    if rank != 0:
        return None
    return build_document(spec, op, dtype_info.name, world, everyone, rows, cuda)


def build_document(spec: dict[str, Any], op: Op, type_name: str, world: int,
                   everyone: list[dict[str, Any]], rows: list[dict[str, Any]],
                   cuda: bool) -> dict[str, Any]:
    """Rank 0's bench document from the rows and every rank's own report."""
    hosts: list[str] = []
    for entry in everyone:
        if entry["host"] not in hosts:
            hosts.append(entry["host"])
    per_host = [sum(1 for e in everyone if e["host"] == h) for h in hosts]
    if cuda:
        summary = transport.summarize(everyone)
    else:
        summary = {"network": None, "interfaces": sorted({os.environ.get("GLOO_SOCKET_IFNAME", "")}
                                                        - {""}),
                   "hcas": [], "gdr": None, "nccl_versions": [],
                   "note": "gloo backend: NCCL was not used", "per_rank": everyone}
    nccl_from_log = summary["nccl_versions"][0] if summary.get("nccl_versions") else None
    return bench_document(
        source="ncclcheck", op=op.name, dtype=type_name, backend=spec["backend"],
        world_size=world, nodes=hosts,
        ranks_per_node=per_host[0] if len(set(per_host)) == 1 else per_host,
        warmup=spec["warmup"], iters=spec["iters"], check=int(bool(spec["check"])),
        sweep=spec.get("sweep"), time_basis=TIME_BASIS[spec.get("average", "mean")],
        env=effective_env(spec.get("candidate_env", {})), versions=versions(nccl_from_log),
        transport=summary, rows=rows, candidate_env=spec.get("candidate_env", {}),
        link_rate_gbps=spec.get("link_rate_gbps"))


# -- process entry point (started by the agent) ---------------------------------------------------
def main() -> int:
    """A rank the agent started (forked, or ``python -m ncclcheck.bench.worker``): its exit code."""
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # anything else printed to stdout (torch, NCCL) goes to the rank's log
    _die_with_parent()

    def emit(event: dict) -> None:
        events.write(json.dumps(event, default=str) + "\n")
        events.flush()

    ident: dict[str, Any] = {}
    try:
        spec = json.loads(os.environ["NCCLCHECK_BENCH_SPEC"])
        ident = rank_env(dict(os.environ), "agent")  # the agent set RANK, WORLD_SIZE
        doc = run_rank(spec, ident, emit)
        if doc is not None:
            emit({"ev": "result", "doc": doc})
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes one event and exit 1
        warn = own_transport().get("warnings", []) if os.environ.get("NCCL_DEBUG_FILE") else []
        emit({"ev": "error", "rank": ident.get("rank"), "host": socket.gethostname(),
              "pid": os.getpid(), "message": one_line(exc), "nccl_warn": warn[-5:]})
        return 1


if __name__ == "__main__":
    sys.exit(main())
