#!/usr/bin/env python3
"""Benchmark tune's runs over ssh: one agent per node kept for every run (a
:class:`~ncclcheck.bench.session.Session`, what ``tune`` does) against a new ssh hello and agent
per node for each run (what it did, and what one ``bench --hostfile`` does), measured in this
run on a 2-node network-namespace cluster (``scripts/netns-cluster``, root).

Each run is tune's default sweep at its sizes (``-b 1M -e 2M -w 1 -n 4``) over gloo on the
cluster's 1 Gbit/s link; the two ways alternate, ``--runs`` runs each, ``--repeats`` times. It
prints the seconds per run of each way (median of the repeats) and their ratio. The ranks'
measurement is the same in both; what differs is the start-up of every run: two ssh
connections, two interpreters and one import of torch per node, against one request to an agent
already there.

Usage::

    .venv/bin/python scripts/bench-session.py [--runs 4] [--repeats 3]   # as root, with torch

On a loaded machine the seconds move; the ratio much less. It prints ratios, not timings to
compare across machines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4, help="runs per way and repeat (default 4)")
    ap.add_argument("--repeats", type=int, default=3, help="alternations (default 3)")
    args = ap.parse_args()

    import importlib.machinery
    import importlib.util

    from ncclcheck.bench import launch
    from ncclcheck.bench.command import BenchRequest, bench_options
    from ncclcheck.bench.session import Session
    from ncclcheck.remote.ssh import SSH

    loader = importlib.machinery.SourceFileLoader("netns_cluster",
                                                  str(ROOT / "scripts" / "netns-cluster"))
    spec = importlib.util.spec_from_loader("netns_cluster", loader)
    netns = importlib.util.module_from_spec(spec)
    sys.modules["netns_cluster"] = netns        # its dataclasses look their module up
    loader.exec_module(netns)

    per_run: dict[str, list[float]] = {"new agents each run": [], "one session": []}
    with netns.cluster(2, name="bses", links="eth0:auto:1gbit") as c:
        req = BenchRequest(hostfile=c.hostfile, ssh_config=c.ssh_config, min_bytes="1M",
                           max_bytes="2M", warmup=1, iters=4, timeout=60)
        opts = bench_options(req, {"NCCL_SOCKET_IFNAME": "=eth0"})
        for repeat in range(args.repeats):
            order = list(per_run) if repeat % 2 == 0 else list(per_run)[::-1]
            for way in order:
                session = (Session(c.hostfile, None, SSH(ssh_config=c.ssh_config), 600)
                           if way == "one session" else None)
                started = time.monotonic()
                try:
                    for _ in range(args.runs):
                        doc = launch.run(opts, session=session)
                        assert doc and doc["wrong_total"] == 0
                finally:
                    if session is not None:
                        session.close()
                per_run[way].append((time.monotonic() - started) / args.runs)
                print(f"repeat {repeat + 1}: {way}: {per_run[way][-1]:.2f} s per run",
                      flush=True)
    old, new = (statistics.median(v) for v in per_run.values())
    print(f"\nseconds per run (median of {args.repeats}): new agents each run {old:.2f}, "
          f"one session {new:.2f}; ratio {old / new:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
