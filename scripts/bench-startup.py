#!/usr/bin/env python3
"""Benchmark a node's start-up in ``ncclcheck bench``: ranks forked after one torch import (what
the agent does) against one spawned ``python -m ncclcheck.bench.worker`` per rank (what it did),
measured in this run.

Both are the same agent (``python -m ncclcheck.bench.agent``, the spec on stdin, as the
launcher starts it) running ``--procs`` gloo ranks on this machine through the smallest sweep
(one 8-byte all_reduce, ``-w 1 -n 1``); the reference runs it with
:func:`ncclcheck.bench.forkrank.load_worker` made to decline, which is the agent's spawn path
(taken in the product only when torch does not import in the agent). No product switch exists
for it. The two alternate ``--repeats`` times. It prints, per way and as spawn / fork ratios of
the medians:

* **wall**: seconds from the agent's start to its ``result`` event (start-to-first-result);
* **CPU**: user + system seconds of the agent and its ranks (``RUSAGE_CHILDREN``);
* **torch imports**: processes that imported torch (a meta-path spy in ``sitecustomize``).

Usage::

    python3 scripts/bench-startup.py [--procs 4] [--repeats 3]

On a loaded machine the wall figures move; the CPU seconds and import counts much less. It
prints ratios, not timings to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPY = """import os, sys
class _TorchSpy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch":
            with open(os.environ["BENCH_STARTUP_IMPORTS"], "a") as f:
                f.write(f"{os.getpid()}\\n")
        return None
sys.meta_path.insert(0, _TorchSpy)
"""
#: The agent with its fork declined: every rank spawned, as before the one import.
SPAWNING_AGENT = ("import sys\nfrom ncclcheck.bench import agent, forkrank\n"
                  "forkrank.load_worker = lambda env: None\nsys.exit(agent.main())\n")


def spec(procs: int) -> dict:
    from ncclcheck.bench.command import BenchRequest, bench_options

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = bench_options(BenchRequest(min_bytes="8", max_bytes="8", warmup=1, iters=1,
                                      timeout=60))
    return {"node_rank": 0, "local_ranks": procs, "rank_offset": 0, "world_size": procs,
            "master_addr": "127.0.0.1", "master_port": port, "env": {}, "nccl_log_dir": None,
            "worker": opts.worker_spec("gloo")}


def one_run(way: str, procs: int, folder: str) -> tuple[float, float, int]:
    """(wall seconds to the result, CPU seconds, torch imports) of one agent run."""
    imports = os.path.join(folder, f"imports.{way}.{time.monotonic_ns()}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([folder, str(ROOT)]),
           "BENCH_STARTUP_IMPORTS": imports}
    argv = ([sys.executable, "-m", "ncclcheck.bench.agent"] if way == "fork"
            else [sys.executable, "-c", SPAWNING_AGENT])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(spec(procs)))
    proc.stdin.close()
    wall = None
    for line in proc.stdout:
        if line.startswith("{") and json.loads(line).get("ev") == "result":
            wall = time.monotonic() - started
    if proc.wait(120) != 0 or wall is None:
        raise SystemExit(f"the {way} agent failed (exit {proc.returncode})")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(imports) as f:
        count = len(set(f.read().split()))
    return wall, cpu, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float, int]]] = {"fork": [], "spawn": []}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        Path(folder, "sitecustomize.py").write_text(SPY)
        for i in range(args.repeats):
            for way in (("fork", "spawn") if i % 2 == 0 else ("spawn", "fork")):
                figures[way].append(one_run(way, args.procs, folder))
    med = {way: [statistics.median(r[k] for r in runs) for k in range(3)]
           for way, runs in figures.items()}
    print(f"bench start-up, {args.procs} gloo ranks on one node, smallest sweep, "
          f"median of {args.repeats} alternating runs each (load {os.getloadavg()[0]:.1f}):")
    for way, label in (("fork", "fork after one import (the agent)"),
                       ("spawn", "spawn per rank (reference)")):
        wall, cpu, count = med[way]
        print(f"  {label:36s} wall to result {wall:6.2f} s   CPU {cpu:6.2f} s   "
              f"torch imports {count:.0f}")
    print(f"  ratio spawn / fork: wall {med['spawn'][0] / med['fork'][0]:.2f}x   "
          f"CPU {med['spawn'][1] / med['fork'][1]:.2f}x   "
          f"torch imports {med['spawn'][2]:.0f} -> {med['fork'][2]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
