#!/usr/bin/env python3
"""Time ``ncclcheck recommend`` over 1,000 synthetic node facts (issue 4 target: <= 2 s).

The nodes are the recorded ``h100-ib-8gpu`` host (8 InfiniBand rails, 2 RoCE front-end ports,
14 interfaces) replayed through the probe once, then copied 1,000 times with their own hostname
and addresses (the /24 subnets widened to /16, so 1,000 nodes share them), and with a few nodes
made different (an older NCCL, a rail down) so the cluster rules have outliers to name.

Three timings, each the median of several runs in this process:

* ``recommend``: the engine, merging and rendering the env file over the in-memory documents;
* ``load + recommend``: the same from a folder of 1,000 facts files (what
  ``ncclcheck recommend --probe facts/`` does after start-up);
* the reference, ``json.load`` of those 1,000 files: the I/O every reader of them pays.

    python3 scripts/bench-recommend.py [--nodes 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import ipaddress
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ncclcheck.cluster import cluster_document, load_sources
from ncclcheck.host import RecordedHost
from ncclcheck.probe import collect_facts
from ncclcheck.recommend import recommend, render_output

TARGET_S = 2.0


def synthetic_nodes(count: int) -> list[dict]:
    """``count`` facts documents cloned from the recorded H100 host, each with its own addresses."""
    base = collect_facts(RecordedHost(REPO / "tests" / "fixtures" / "hosts" / "h100-ib-8gpu"))
    nodes = []
    for i in range(count):
        facts = copy.deepcopy(base)
        facts["hostname"] = f"gpu-{i:04d}"
        for iface in facts["sections"]["network"]["data"]["interfaces"]:
            if iface["kind"] in ("loopback", "docker"):
                continue
            for addr in iface["ipv4"]:
                net = ipaddress.ip_network(addr["subnet"]).supernet(new_prefix=16)
                addr.update(address=str(net.network_address + 256 + i), prefix=16, subnet=str(net))
        if i % 250 == 7:
            facts["sections"]["nccl"]["data"]["torch_loads"]["version"] = "2.18.3"
        if i % 333 == 5:
            facts["sections"]["ib"]["data"]["devices"][3]["ports"][0]["state"] = "DOWN"
        nodes.append(facts)
    return nodes


def median_time(fn, runs: int) -> tuple[float, object]:
    result, times = None, []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    nodes = synthetic_nodes(args.nodes)
    with tempfile.TemporaryDirectory(prefix="ncclcheck-bench-recommend-") as tmp:
        for facts in nodes:
            (Path(tmp) / f"{facts['hostname']}.json").write_text(json.dumps(facts))
        files = sorted(Path(tmp).iterdir())

        def engine():
            doc = recommend(cluster_document(nodes, [], source="bench"))
            return doc, render_output(doc, "env")

        def from_files():
            doc = recommend(load_sources([tmp]))
            return doc, render_output(doc, "env")

        def reference():
            return [json.loads(p.read_text()) for p in files]

        t_engine, (doc, text) = median_time(engine, args.runs)
        t_files, _ = median_time(from_files, args.runs)
        t_ref, _ = median_time(reference, args.runs)
    print(f"nodes: {args.nodes}; env: {', '.join(f'{k}={v}' for k, v in doc['env'].items())}")
    print(f"findings: {len(doc['findings'])}, conflicts: {len(doc['conflicts'])}, "
          f"env file {len(text.splitlines())} lines")
    print(f"recommend (in memory)      : {t_engine:6.3f} s   (target <= {TARGET_S:.3f} s)  "
          f"{'OK' if t_engine <= TARGET_S else 'OVER'}")
    print(f"load files + recommend     : {t_files:6.3f} s   (target <= {TARGET_S:.3f} s)  "
          f"{'OK' if t_files <= TARGET_S else 'OVER'}")
    print(f"json.load of the files     : {t_ref:6.3f} s   (reference)")
    print(f"ratio recommend / json.load           : {t_engine / t_ref:5.2f}")
    print(f"ratio (load + recommend) / json.load  : {t_files / t_ref:5.2f}")


if __name__ == "__main__":
    main()
