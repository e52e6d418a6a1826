#!/usr/bin/env python3
"""Benchmark ``ncclcheck bench`` itself: ratios against references measured in this run.

On a 2-node network-namespace cluster (``scripts/netns-cluster``; needs root, iproute2, sshd)
whose links ``tc`` shapes to a known rate, with gloo over ssh, it prints:

1. **peak busbw / link rate**: ``ncclcheck bench`` all_reduce, 1 rank per node, large sizes.
   With 2 ranks all_reduce busbw = algbw (factor 2(n-1)/n = 1) and a ring moves S bytes each
   way per op, so a perfect run reaches the link rate. Target: >= 0.95.
2. **small-message time per op / a bare torch.distributed loop timed the same way** (warm-up,
   barrier, ``time.perf_counter`` around N back-to-back ``dist.all_reduce`` calls, the mean over
   ranks as nccl-tests and ``ncclcheck bench`` report it). Target: <= 1.05. Two figures:

   * **2a, same processes**: one pair of ranks runs ncclcheck's measurement code
     (``worker.Collective`` + ``worker.time_placement``, what ``ncclcheck bench`` times with)
     and the bare loop in alternating blocks, ``--rounds`` times each, the order flipping every
     round. Both see the same processes, sockets, CPU placement and background load, so the
     ratio of the medians isolates the timing code itself; the ratio of the fastest blocks
     (timeit's rule: the least disturbed run) is printed beside it.
   * **2b, end to end**: the whole ``ncclcheck bench`` command (launcher, ssh, agents,
     watchdogs) against the bare loop started over the same ssh on the same nodes, alternating
     ``--repeats`` times; the ratio of the medians.

   * **2c, the timed loop alone**: both loops with the collective replaced by a no-op, in this
     process: the nanoseconds ncclcheck's loop adds per op (a Python call), and the bound that
     puts on ratio 2a. It does not depend on the network or on load.

   On a loaded machine single blocks vary by tens of percent; medians of interleaved runs much
   less. The spread of the per-round ratios is printed so a noisy run shows itself.

With the default MTU of 1500, TCP/IP and Ethernet headers (66 of every 1514 bytes on the wire,
which ``tc tbf`` counts) cap TCP goodput at 95.6 % of the shaped rate; ``--mtu 9000`` lifts the
cap to 99.3 %.

Usage::

    sudo python3 scripts/bench-bench.py [--rate 400mbit] [--mtu 1500] [--rounds 61]
                                        [--block-iters 500] [--repeats 11] [--iters 2000]

It prints ratios, not timings to compare across machines.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The reference: a plain loop, timed as nccl-tests and ncclcheck time a block.
BARE_BLOCK = """
def bare_block(t, warmup, iters):
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    return (time.perf_counter() - t0) * 1e6 / iters


def mean_over_ranks(us):
    every = torch.zeros(2, dtype=torch.float64)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # as worker
    gather(every, torch.tensor([us], dtype=torch.float64))
    return every.mean().item()
"""

PRELUDE = """
import datetime, json, os, time
import torch, torch.distributed as dist
rank, iters, warmup = int(os.environ["RANK"]), int(os.environ["ITERS"]), int(os.environ["WARMUP"])
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=120))
""" + BARE_BLOCK

#: 2b's reference: one bare block per process pair, like one ``ncclcheck bench -b 8 -e 8``.
BARE_LOOP = PRELUDE + """
us = mean_over_ranks(bare_block(torch.zeros(2), warmup, iters))
if rank == 0:
    print(json.dumps({"time_us": us}), flush=True)
dist.destroy_process_group()
"""

#: 2a: ncclcheck's measurement code and the bare loop in alternating blocks, same processes.
INTERLEAVED = PRELUDE + """
from ncclcheck.bench import worker
from ncclcheck.bench.formulas import OPS

coll = worker.Collective(OPS["all_reduce"], rank, 2, torch.float32, 2, torch.device("cpu"))
coll.resize(2)                                    # 8 bytes, as ncclcheck bench -b 8 -e 8
timer = worker.Timer(cuda=False)
bare_tensor = torch.zeros(2)


def ours_block():
    coll.prepare(True)
    return worker.time_placement(coll.runner(True), warmup, iters, timer, False, 0)


times = {"ours": [], "bare": []}
for i in range(int(os.environ["ROUNDS"])):
    for which in (("ours", "bare") if i % 2 == 0 else ("bare", "ours")):
        us = ours_block() if which == "ours" else bare_block(bare_tensor, warmup, iters)
        times[which].append(mean_over_ranks(us))
if rank == 0:
    print(json.dumps(times), flush=True)
dist.destroy_process_group()
"""


def load_cluster_module():
    """scripts/netns-cluster as a module."""
    path = ROOT / "scripts" / "netns-cluster"
    loader = importlib.machinery.SourceFileLoader("ncclcheck_netns_cluster", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


def set_mtu(cluster, mtu: int) -> None:
    """Set the MTU of every veth end and bridge of the cluster's first link."""
    link = cluster.link()
    subprocess.run(["ip", "link", "set", "dev", link["bridge"], "mtu", str(mtu)], check=True)
    out = subprocess.run(["ip", "-o", "link", "show", "master", link["bridge"]],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        dev = line.split(":")[1].strip().split("@")[0]
        subprocess.run(["ip", "link", "set", "dev", dev, "mtu", str(mtu)], check=True)
    for node in cluster.nodes:
        subprocess.run(["ip", "-n", node.ns, "link", "set", "dev", link["ifname"], "mtu",
                        str(mtu)], check=True)


def ncclcheck_bench(cluster, *args: str) -> dict:
    """Run ``ncclcheck bench`` over the cluster and return its JSON document."""
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--hostfile",
                          cluster.hostfile, "--ssh-config", cluster.ssh_config, "--nodes", "2",
                          "--timeout", "120", "--json", *args],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"ncclcheck bench failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def on_both_nodes(cluster, code: str, env: dict[str, str]) -> dict:
    """Run ``python -c code`` as ranks 0 and 1 (node1, node2) over ssh; rank 0's JSON line."""
    from ncclcheck.hostfile import Target
    from ncclcheck.remote.ssh import SSH

    ssh = SSH(ssh_config=cluster.ssh_config)
    port = 29000 + int(time.time() * 1000) % 1000
    processes = []
    for rank, node in enumerate(cluster.nodes[:2]):
        rank_env = {"RANK": str(rank), "MASTER_ADDR": cluster.nodes[0].addr,
                    "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": cluster.link()["ifname"],
                    "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **env}
        processes.append(ssh.start(Target(node.addr), [sys.executable, "-c", code],
                                   env=rank_env, deadline=900))
    results = [p.result(900) for p in processes]
    for result in results:
        if not result.ok:
            raise SystemExit(f"reference loop failed: {result.error}: {result.stderr[-500:]}")
    return json.loads(results[0].stdout.strip().splitlines()[-1])


def loop_overhead_ns(ops: int = 200_000, rounds: int = 7) -> tuple[float, float]:
    """(ncclcheck's, the bare loop's) nanoseconds per op of the timed loop alone, with the
    collective replaced by a no-op in this process: what the timing code adds, free of the
    network and of other processes (fastest of ``rounds``)."""
    import torch
    from ncclcheck.bench import worker
    from ncclcheck.bench.collective import Collective
    from ncclcheck.bench.formulas import OPS

    real = worker.dist.all_reduce
    worker.dist.all_reduce = lambda tensor: None      # the op itself costs nothing now
    try:
        coll = Collective(OPS["all_reduce"], 0, 2, torch.float32, 2, torch.device("cpu"))
        coll.resize(2)
        timer, run, t = worker.Timer(cuda=False), coll.runner(True), torch.zeros(2)
        all_reduce = worker.dist.all_reduce
        ours, bare = [], []
        for _ in range(rounds):
            ours.append(timer.time_us(run, ops) * 1e3)
            t0 = time.perf_counter()
            for _ in range(ops):
                all_reduce(t)
            bare.append((time.perf_counter() - t0) * 1e9 / ops)
        return min(ours), min(bare)
    finally:
        worker.dist.all_reduce = real


def summary(label: str, ours: list[float], bare: list[float]) -> str:
    """The ratio of the medians (the figure), of the fastest blocks (timeit's rule: the
    least disturbed), and the per-round ratios' quartiles (how noisy the run was)."""
    ratios = [x / y for x, y in zip(ours, bare)]
    q1, q2, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios * 3)
    o, b = statistics.median(ours), statistics.median(bare)
    return (f"{label}: ncclcheck / bare time per op = {o:.2f} / {b:.2f} us = {o / b:.3f} "
            f"(medians; target <= 1.05)\n"
            f"    fastest blocks: {min(ours):.2f} / {min(bare):.2f} us = "
            f"{min(ours) / min(bare):.3f}; per-round ratios: median {q2:.3f}, "
            f"quartiles {q1:.3f}-{q3:.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", default="400mbit", help="tc rate of the link (default 400mbit)")
    parser.add_argument("--mtu", type=int, default=1500, help="link MTU (default 1500)")
    parser.add_argument("--rounds", type=int, default=61,
                        help="interleaved block pairs for ratio 2a (default 61)")
    parser.add_argument("--block-iters", type=int, default=500,
                        help="ops per block for ratio 2a (default 500)")
    parser.add_argument("--repeats", type=int, default=11,
                        help="alternating whole runs for ratio 2b (default 11)")
    parser.add_argument("--iters", type=int, default=2000,
                        help="ops per block for ratio 2b (default 2000)")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up ops per block")
    args = parser.parse_args()

    netns = load_cluster_module()
    link_gbps = netns.rate_bits(args.rate) / 8 / 1e9
    with netns.cluster(2, rate=args.rate) as cluster:
        if args.mtu != 1500:
            set_mtu(cluster, args.mtu)
        # 1. peak busbw over the link rate
        doc = ncclcheck_bench(cluster, "-b", "4M", "-e", "64M", "-f", "4", "-n", "4", "-w", "1",
                              "--check", "0", "--link-rate", f"{link_gbps:g}")
        peak = doc["peak_busbw_gbps"]
        print(f"link: {args.rate} ({link_gbps:.4f} GB/s), MTU {args.mtu}, gloo, 2 nodes x 1 rank")
        for row in doc["rows"]:
            print(f"  {row['size_bytes']:>10} B  busbw {row['out_of_place']['busbw_gbps']:.4f}"
                  f" / {row['in_place']['busbw_gbps']:.4f} GB/s (out-of-place / in-place)")
        print(f"ratio 1: peak busbw / link rate = {peak:.4f} / {link_gbps:.4f} = "
              f"{peak / link_gbps:.3f}  (target >= 0.95)")

        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
              f"{os.cpu_count()} CPUs; 8 B all_reduce, time per op = mean over ranks")
        # 2a. the timing code itself: interleaved blocks in the same two processes
        times = on_both_nodes(cluster, INTERLEAVED, {"ITERS": str(args.block_iters),
                                                     "WARMUP": str(args.warmup),
                                                     "ROUNDS": str(args.rounds)})
        print(summary(f"ratio 2a (same processes, {args.rounds} interleaved rounds of "
                      f"{args.block_iters} ops)", times["ours"], times["bare"]))
        ours_ns, bare_ns = loop_overhead_ns()
        per_op_ns = statistics.median(times["bare"]) * 1e3
        print(f"2c (the timed loop alone, collective replaced by a no-op): ncclcheck "
              f"{ours_ns:.0f} ns, bare {bare_ns:.0f} ns per op; ncclcheck adds "
              f"{ours_ns - bare_ns:.0f} ns = {(ours_ns - bare_ns) / per_op_ns:.5f} of the bare "
              f"time per op (bound on ratio 2a: {1 + max(0.0, ours_ns - bare_ns) / per_op_ns:.5f})")

        # 2b. the whole command against the bare loop, alternating which goes first
        block = {"ITERS": str(args.iters), "WARMUP": str(args.warmup)}
        ours, bare = [], []
        for i in range(args.repeats):
            for which in (("ours", "bare") if i % 2 == 0 else ("bare", "ours")):
                if which == "ours":
                    doc = ncclcheck_bench(cluster, "-b", "8", "-e", "8", "-n", str(args.iters),
                                          "-w", str(args.warmup), "--check", "0", "-a", "mean")
                    ours.append(doc["rows"][0]["in_place"]["time_us"])
                else:
                    bare.append(on_both_nodes(cluster, BARE_LOOP, block)["time_us"])
        print(f"  ncclcheck bench (in-place): {', '.join(f'{t:.1f}' for t in ours)} us")
        print(f"  bare loop:                  {', '.join(f'{t:.1f}' for t in bare)} us")
        print(summary(f"ratio 2b (end to end, {args.repeats} alternating runs of {args.iters} "
                      "ops)", ours, bare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
