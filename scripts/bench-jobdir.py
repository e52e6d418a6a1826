#!/usr/bin/env python3
"""Speed and memory of ``ncclcheck diagnose DIR`` on simulated Flight Recorder dumps (issue 22).

Writes gloo-shaped dumps (torch 2.13's format: version "2.10", empty pg_config name, frames)
into a temporary folder: one rank (the last) calls ``broadcast`` where the others call
``all_reduce`` at the last collective, so every run must name exactly that rank ``mismatch``.
Ranks beyond the first few are hard links of one dump (the rank is the file name's suffix, as
torch's loader takes it), so 4,096 ranks cost no disk, while ``diagnose`` still reads, unpickles
and parses every file. Each case runs ``python -m ncclcheck diagnose DIR --json`` in a child
process; it prints the wall time, the CPU time (its worker processes included: 128 dumps and more
are read by forked workers, one per CPU), peak RSS (``RUSAGE_CHILDREN``: the largest single
process; each worker holds one dump at a time) and two references measured in the same run:
``cat`` of the same files (the bytes read, in C) and ``start``, the CPU time of the same command
on a one-line log (interpreter start and imports: large where PYTHONDONTWRITEBYTECODE=1 makes
every run compile ncclcheck again). Usage::

    python scripts/bench-jobdir.py                       # 64 x 2,000 and 4,096 x 2,000
    python scripts/bench-jobdir.py --cases 64x2000       # one case
    python scripts/bench-jobdir.py --protocol 4          # Python's default protocol (framed)

The dumps are written in pickle protocol 2 by default, as torch's own pickler writes them (the
recorded dumps in tests/fixtures/device/h200/fr/ start with ``\\x80\\x02``): no frames, so a reader
that hands the unpickler a plain file pays one ``read`` call per opcode.

Targets: 64 ranks x 2,000 entries in <= 2 s; 4,096 ranks in <= 60 s and <= 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def entry(seq: int, op: str = "all_reduce") -> dict:
    return {"record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": f"gloo:{op}", "input_sizes": [[1024, 1024]],
            "input_dtypes": ["Float"], "output_sizes": [[1024, 1024]],
            "output_dtypes": ["Float"], "state": "scheduled", "retired": True,
            "timeout_ms": 600000, "time_created_ns": 1795706537090696492 + seq,
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "is_p2p": False, "thread_id": "140637643303808", "thread_name": "python3",
            "frames": [{"name": "all_reduce", "line": 3245,
                        "filename": "/usr/lib/python3/site-packages/torch/distributed/"
                                    "distributed_c10d.py"},
                       {"name": "train_step", "filename": "/job/train.py", "line": 88 + seq % 7},
                       {"name": "<module>", "filename": "/job/train.py", "line": 120}]}


def dump(ranks: int, entries: int, odd: bool, protocol: int = 2) -> bytes:
    es = [entry(s) for s in range(1, entries + 1)]
    if odd:
        es[-1] = entry(entries, "broadcast")
    es[-1]["retired"] = False
    return pickle.dumps({"version": "2.10", "comm_lib_version": "", "entries": es,
                         "pg_config": {"": {"name": "", "desc": "",
                                            "ranks": str(list(range(ranks)))}},
                         "pg_status": {"0": {"last_enqueued_collective": entries,
                                             "last_started_collective": -1,
                                             "last_completed_collective": entries - 1}}},
                        protocol=protocol)


def make(folder: Path, ranks: int, entries: int, protocol: int = 2) -> None:
    (folder / "nccl_trace_rank_0").write_bytes(dump(ranks, entries, False, protocol))
    for r in range(1, ranks - 1):
        os.link(folder / "nccl_trace_rank_0", folder / f"nccl_trace_rank_{r}")
    (folder / f"nccl_trace_rank_{ranks - 1}").write_bytes(dump(ranks, entries, True, protocol))


def run(folder: Path | str) -> tuple[float, float, float, dict]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "diagnose", str(folder), "--json"],
                         capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = max(before, usage.ru_maxrss) / 1024
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    if out.returncode not in (0, 1):
        raise SystemExit(f"diagnose failed: {out.stderr.strip()}")
    return took, cpu, rss, json.loads(out.stdout)


def reference(folder: Path) -> float:
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        files = sorted(str(p) for p in folder.iterdir())
        for i in range(0, len(files), 512):
            subprocess.run(["cat", *files[i:i + 512]], stdout=null, check=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["64x2000", "4096x2000"])
    ap.add_argument("--protocol", type=int, default=2, choices=range(2, 6),
                    help="pickle protocol of the dumps (default 2: torch's own pickler, "
                         "torch::jit::Pickler, writes protocol 2, with no frames)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-jobdir-") as tmp:
        (Path(tmp) / "one.log").write_text("node1:1:1 [0] NCCL INFO NCCL version 2.21.5\n")
        start = min(run(Path(tmp) / "one.log")[1] for _ in range(3))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall time suffers "
          f"on a shared machine; CPU s is the child's own); pickle protocol {args.protocol}")
    print(f"{'ranks x entries':>16} {'MB read':>8} {'diagnose s':>10} {'CPU s':>6} {'cat s':>7} "
          f"{'x cat':>6} {'start CPU s':>11} {'x start':>7} {'peak RSS MiB':>12}  verdict")
    for case in args.cases:
        ranks, entries = (int(x) for x in case.split("x"))
        with tempfile.TemporaryDirectory(prefix="bench-jobdir-") as tmp:
            folder = Path(tmp)
            make(folder, ranks, entries, args.protocol)
            size = sum((folder / f"nccl_trace_rank_{r}").stat().st_size for r in range(ranks))
            ref = reference(folder)
            took, cpu, rss, doc = run(folder)
            named = [(c["rank"], c["kind"]) for c in doc["culprits"]]
            ok = named == [(ranks - 1, "mismatch")]
            print(f"{case:>16} {size / 1e6:>8.0f} {took:>10.2f} {cpu:>6.2f} {ref:>7.2f} "
                  f"{took / ref:>6.0f} {start:>11.2f} {cpu / start:>7.1f} "
                  f"{rss:>12.0f}  {'ok' if ok else 'WRONG'} {named[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
