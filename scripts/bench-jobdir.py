#!/usr/bin/env python3
"""Speed and memory of ``ncclcheck diagnose DIR`` on simulated Flight Recorder dumps (issue 22).

Writes gloo dumps as torch 2.13 writes them into a temporary folder, one rank (the last) calling
``broadcast`` where the others call ``all_reduce`` at the last collective, so that every run must
name exactly that rank ``mismatch``:

- ``torch``: ``_dump_fr_trace()``'s pickle, byte for byte as torch::jit::Pickler
  (torch/csrc/jit/serialization/pickler.cpp) writes it: protocol 2 without frames, every string
  memoized by value, a container memoized when it is shared (the frames of a call site), small
  ints as BININT1/BININT2/BININT, others as 8-byte LONG1 (:func:`torch_pickle`;
  tests/jobdir/test_bench_dumps.py checks it against the recorded dumps of
  tests/fixtures/device/h200/fr/ and tests/fixtures/fr-gloo/);
- ``json``: ``_dump_fr_trace_json()``'s text (nlohmann::json's ``dump()``: keys sorted, no
  spaces, no frames, no time as 0, pg_status values as strings);
- ``py4``: Python's own pickle, protocol 4 (framed).

Ranks beyond the first few are hard links of one dump (the rank is the file name's suffix, as
torch's loader takes it), so 4,096 ranks cost no disk, while ``diagnose`` still reads and parses
every file. Each run is ``python -m ncclcheck diagnose DIR --json`` in a child process; printed:
its wall time, the CPU time of its whole process tree (``RUSAGE_CHILDREN``: worker processes
included once reaped), the peak of the tree's summed RSS (sampled every 100 ms with psutil) and
the largest single process's peak RSS (``ru_maxrss``). With ``--ref TREE`` the same runs are made
with TREE's ncclcheck (e.g. ``git archive 782ca31 ncclcheck | tar -x -C /tmp/old``), alternating
with this tree's, and the ratios new/ref are printed. Usage::

    python scripts/bench-jobdir.py                        # 64 x 2,000 and 4,096 x 2,000, torch
    python scripts/bench-jobdir.py --formats torch json --ref /tmp/old --repeat 2
    python scripts/bench-jobdir.py --cases 64x2000        # one case

Targets: 64 ranks x 2,000 entries in <= 2 s; 4,096 ranks in <= 60 s and <= 1 GiB.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE = Path(__file__).resolve().parent.parent


def torch_pickle(obj: object) -> bytes:
    """``obj`` (plain data) as torch::jit::Pickler writes it (``pushIValue`` and friends)."""
    out = bytearray(b"\x80\x02")
    memo: dict = {}                        # ("s", string) by value, ("id", id) by identity
    uses: dict[int, int] = {}

    def count(o: object) -> None:          # an IValue's use_count: how often it is referenced
        if isinstance(o, (dict, list, tuple)):
            uses[id(o)] = uses.get(id(o), 0) + 1
            if uses[id(o)] == 1:
                for v in (x for kv in o.items() for x in kv) if isinstance(o, dict) else o:
                    count(v)

    count(obj)
    uses[id(obj)] += 1                     # the caller holds the top object too

    def put(key: tuple) -> None:
        n = memo[key] = len(memo)
        out.extend(b"q" + bytes((n,)) if n < 256 else b"r" + struct.pack("<I", n))

    def get(key: tuple) -> bool:
        n = memo.get(key)
        if n is not None:
            out.extend(b"h" + bytes((n,)) if n < 256 else b"j" + struct.pack("<I", n))
        return n is not None

    def push(o: object) -> None:
        shared = isinstance(o, (dict, list, tuple)) and uses[id(o)] > 1
        if shared and get(("id", id(o))):
            return
        if o is None:
            out.extend(b"N")
        elif o is True or o is False:
            out.extend(b"\x88" if o else b"\x89")
        elif isinstance(o, int):
            out.extend(b"K" + bytes((o,)) if 0 <= o <= 0xFF else
                       b"M" + struct.pack("<H", o) if 0 <= o <= 0xFFFF else
                       b"J" + struct.pack("<i", o) if -2**31 <= o < 2**31 else
                       b"\x8a\x08" + struct.pack("<q", o))
        elif isinstance(o, float):
            out.extend(b"G" + struct.pack(">d", o))
        elif isinstance(o, str):
            if not get(("s", o)):
                raw = o.encode()
                out.extend(b"X" + struct.pack("<I", len(raw)) + raw)
                put(("s", o))
        elif isinstance(o, dict):
            out.extend(b"}(")
            for k, v in o.items():
                push(k)
                push(v)
            out.extend(b"u")
        elif isinstance(o, list):
            out.extend(b"](")
            for v in o:
                push(v)
            out.extend(b"e")
        elif isinstance(o, tuple) and 1 <= len(o) <= 3:
            for v in o:
                push(v)
            out.extend(b"\x85\x86\x87"[len(o) - 1:len(o)])
        elif isinstance(o, tuple):
            out.extend(b"(")
            for v in o:
                push(v)
            out.extend(b"t")
        else:
            raise TypeError(f"not plain data: {type(o).__name__}")
        if shared:
            put(("id", id(o)))

    push(obj)
    out.extend(b".")
    return bytes(out)


def torch_json(doc: dict) -> bytes:
    """``doc`` as ``_dump_fr_trace_json()`` writes it: no frames, no time as 0, pg_status
    values as text, an empty ``nccl_comm_state``."""
    zero = ("time_discovered_started_ns", "time_discovered_completed_ns")
    doc = dict(doc, nccl_comm_state={},
               entries=[{k: 0 if k in zero and v is None else v for k, v in e.items()
                         if k != "frames"} for e in doc["entries"]],
               pg_status={g: {k: str(v) for k, v in s.items()}
                          for g, s in doc["pg_status"].items()})
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


_FRAMES: dict[tuple, dict] = {}


def frame(name: str, filename: str, line: int) -> dict:
    """One call site's frame, one object shared by every entry (torch's are: BINGET)."""
    return _FRAMES.setdefault((name, filename, line),
                              {"name": name, "filename": filename, "line": line})


def entry(seq: int, op: str = "all_reduce") -> dict:
    """A gloo collective's entry in torch 2.13's key order (tests/fixtures/fr-gloo/)."""
    torch = "/usr/lib/python3/site-packages/torch/distributed/"
    return {"frames": [frame(op, torch + "distributed_c10d.py", 3245),
                       frame("wrapper", torch + "c10d_logger.py", 83),
                       frame("train_step", "/job/train.py", 88 + seq % 7),
                       frame("train", "/job/train.py", 97),
                       frame("<module>", "/job/train.py", 120)],
            "record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
            "thread_name": "python", "thread_id": "140637643303808",
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": f"gloo:{op}", "time_created_ns": 1795706537090696492 + seq,
            "input_sizes": [[1024, 1024]], "input_dtypes": ["Float"],
            "output_sizes": [[1024, 1024]], "output_dtypes": ["Float"], "state": "scheduled",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": True, "timeout_ms": 1800000, "is_p2p": False}


def document(ranks: int, entries: int, odd: bool) -> dict:
    es = [entry(s) for s in range(1, entries + 1)]
    if odd:
        es[-1] = entry(entries, "broadcast")
    es[-1]["retired"] = False
    return {"version": "2.10",
            "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(ranks)))}},
            "comm_lib_version": "",
            "pg_status": {"0": {"last_enqueued_collective": entries,
                                "last_started_collective": -1,
                                "last_completed_collective": entries - 1}},
            "entries": es}


ENCODE = {"torch": torch_pickle, "json": torch_json,
          "py4": lambda doc: pickle.dumps(doc, protocol=4)}


def make(folder: Path, ranks: int, entries: int, fmt: str) -> None:
    (folder / "nccl_trace_rank_0").write_bytes(ENCODE[fmt](document(ranks, entries, False)))
    for r in range(1, ranks - 1):
        os.link(folder / "nccl_trace_rank_0", folder / f"nccl_trace_rank_{r}")
    (folder / f"nccl_trace_rank_{ranks - 1}").write_bytes(
        ENCODE[fmt](document(ranks, entries, True)))


def run(folder: Path | str, tree: Path) -> tuple[float, float, float, float, dict]:
    """wall s, CPU s of the tree, peak summed RSS MiB of the tree, largest process's peak RSS
    MiB (0 when an earlier run's was larger), the document."""
    import psutil

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "ncclcheck", "diagnose", str(folder),
                                  "--json"], stdout=out, stderr=subprocess.PIPE, cwd=tree,
                                 env=env)
        peak = 0
        proc = psutil.Process(child.pid)
        tree: dict[int, psutil.Process] = {}
        for tick in itertools.count():
            if child.poll() is not None:
                break
            try:
                if tick % 10 == 0:              # new workers: looked for every second
                    tree = {p.pid: p for p in proc.children(recursive=True)}
                total = proc.memory_info().rss
                for p in list(tree.values()):
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        del tree[p.pid]
            except psutil.Error:
                continue
            peak = max(peak, total)
            time.sleep(0.1)
        took = time.perf_counter() - start
        err = child.stderr.read().decode() if child.stderr else ""
        out.seek(0)
        text = out.read()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    single = usage.ru_maxrss / 1024 if usage.ru_maxrss > before else 0.0
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    if child.returncode not in (0, 1):
        raise SystemExit(f"diagnose failed ({tree}): {err.strip()}")
    return took, cpu, peak / 2**20, single, json.loads(text)


def which(tree: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-c", "import ncclcheck; print(ncclcheck.__file__)"],
                          capture_output=True, text=True, cwd=tree, env=env,
                          check=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["64x2000", "4096x2000"])
    ap.add_argument("--formats", nargs="+", default=["torch"], choices=sorted(ENCODE),
                    help="torch: _dump_fr_trace()'s pickle (protocol 2, torch's memo); json: "
                         "_dump_fr_trace_json(); py4: Python's pickle protocol 4")
    ap.add_argument("--ref", type=Path, help="a tree whose ncclcheck is the reference, run "
                                             "alternately with this one's")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tree per case")
    args = ap.parse_args()
    trees = [("new", TREE)] + ([("ref", args.ref.resolve())] if args.ref else [])
    for name, tree in trees:
        print(f"{name}: {which(tree)}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall time suffers "
          f"on a shared machine)")
    with tempfile.TemporaryDirectory(prefix="bench-jobdir-") as tmp:
        (Path(tmp) / "one.log").write_text("node1:1:1 [0] NCCL INFO NCCL version 2.21.5\n")
        start = min(run(Path(tmp) / "one.log", TREE)[1] for _ in range(3))
    print(f"start-up reference: {start:.2f} CPU s (diagnose of a one-line log)")
    print(f"{'case':>16} {'format':>6} {'tree':>4} {'MB read':>8} {'wall s':>7} {'CPU s':>6} "
          f"{'tree RSS MiB':>12} {'max 1 proc':>10}  verdict")
    for case in args.cases:
        ranks, entries = (int(x) for x in case.split("x"))
        for fmt in args.formats:
            best: dict[str, list[float]] = {}
            with tempfile.TemporaryDirectory(prefix="bench-jobdir-") as tmp:
                folder = Path(tmp)
                make(folder, ranks, entries, fmt)
                size = sum((folder / f"nccl_trace_rank_{r}").stat().st_size
                           for r in range(ranks))
                for _ in range(args.repeat):
                    for name, tree in trees:
                        took, cpu, rss, single, doc = run(folder, tree)
                        named = [(c["rank"], c["kind"]) for c in doc["culprits"]]
                        ok = named == [(ranks - 1, "mismatch")]
                        got = best.setdefault(name, [took, cpu])
                        got[:] = [min(got[0], took), min(got[1], cpu)]
                        print(f"{case:>16} {fmt:>6} {name:>4} {size / 1e6:>8.0f} {took:>7.2f} "
                              f"{cpu:>6.2f} {rss:>12.0f} {single or float('nan'):>10.0f}  "
                              f"{'ok' if ok else 'WRONG'} {named[:3]}", flush=True)
            if "ref" in best:
                n, r = best["new"], best["ref"]
                print(f"{case:>16} {fmt:>6} new/ref: wall {n[0] / r[0]:.2f}, CPU {n[1] / r[1]:.2f} "
                      f"(least of {args.repeat} each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
