#!/usr/bin/env python3
"""Benchmark ``ncclcheck bench`` itself: two ratios against references measured in this run.

On a 2-node network-namespace cluster (``scripts/netns-cluster``; needs root, iproute2, sshd)
whose links ``tc`` shapes to a known rate, with gloo over ssh, it prints:

1. **peak busbw / link rate**: ``ncclcheck bench`` all_reduce, 1 rank per node, large sizes.
   With 2 ranks all_reduce busbw = algbw (factor 2(n-1)/n = 1) and a ring moves S bytes each
   way per op, so a perfect run reaches the link rate. Target: >= 0.95.
2. **small-message time per op / bare torch.distributed loop**: ncclcheck's in-place 8-byte
   all_reduce time against a plain ``dist.all_reduce`` loop timed the same way (warm-up, barrier,
   ``time.perf_counter`` around N back-to-back ops, slowest rank), started over the same ssh on
   the same nodes. Runs alternate (and which goes first alternates); the ratio of the medians
   is the figure, the ratio of the best runs is printed beside it. Target: <= 1.05.

With the default MTU of 1500, TCP/IP and Ethernet headers (66 of every 1514 bytes on the wire,
which ``tc tbf`` counts) cap TCP goodput at 95.6 % of the shaped rate; ``--mtu 9000`` lifts the
cap to 99.3 %.

Usage::

    sudo python3 scripts/bench-bench.py [--rate 400mbit] [--mtu 1500] [--repeats 5]

It prints ratios, not timings to compare across machines.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARE_LOOP = """
import datetime, json, os, time
import torch, torch.distributed as dist
rank, iters, warmup = int(os.environ["RANK"]), int(os.environ["ITERS"]), int(os.environ["WARMUP"])
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=60))
t = torch.zeros(2)
for _ in range(warmup):
    dist.all_reduce(t)
dist.barrier()
t0 = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(t)
mine = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
every = torch.zeros(2, dtype=torch.float64)
dist.all_gather_into_tensor(every, mine)
if rank == 0:
    print(json.dumps({"time_us": every.max().item()}), flush=True)
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


def bare_loop(cluster, iters: int, warmup: int) -> float:
    """The slowest rank's time per op of a plain dist.all_reduce loop, started over ssh."""
    from ncclcheck.hostfile import Target
    from ncclcheck.remote import SSH

    ssh = SSH(ssh_config=cluster.ssh_config)
    port = 29000 + int(time.time()) % 1000
    processes = []
    for rank, node in enumerate(cluster.nodes[:2]):
        env = {"RANK": str(rank), "ITERS": str(iters), "WARMUP": str(warmup),
               "MASTER_ADDR": cluster.nodes[0].addr, "MASTER_PORT": str(port),
               "GLOO_SOCKET_IFNAME": cluster.link()["ifname"], "OMP_NUM_THREADS": "1"}
        processes.append(ssh.start(Target(node.addr), [sys.executable, "-c", BARE_LOOP],
                                   env=env, deadline=600))
    results = [p.result(600) for p in processes]
    for result in results:
        if not result.ok:
            raise SystemExit(f"bare loop failed: {result.error}: {result.stderr[-500:]}")
    return json.loads(results[0].stdout.strip().splitlines()[-1])["time_us"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", default="400mbit", help="tc rate of the link (default 400mbit)")
    parser.add_argument("--mtu", type=int, default=1500, help="link MTU (default 1500)")
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs for ratio 2")
    parser.add_argument("--iters", type=int, default=2000, help="ops per small-message block")
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

        # 2. small-message time per op, ncclcheck against a bare loop
        ours, bare = [], []
        for i in range(args.repeats):  # alternate which one goes first
            for which in (("ours", "bare") if i % 2 == 0 else ("bare", "ours")):
                if which == "ours":
                    doc = ncclcheck_bench(cluster, "-b", "8", "-e", "8", "-n", str(args.iters),
                                          "-w", "100", "--check", "0")
                    ours.append(doc["rows"][0]["in_place"]["time_us"])
                else:
                    bare.append(bare_loop(cluster, args.iters, 100))
        o, b = statistics.median(ours), statistics.median(bare)
        print(f"  ncclcheck 8 B all_reduce (in-place): {', '.join(f'{t:.1f}' for t in ours)} us")
        print(f"  bare dist.all_reduce loop:           {', '.join(f'{t:.1f}' for t in bare)} us")
        print(f"ratio 2: ncclcheck / bare time per op (medians) = {o:.1f} / {b:.1f} = "
              f"{o / b:.3f}  (target <= 1.05); best runs: {min(ours) / min(bare):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
