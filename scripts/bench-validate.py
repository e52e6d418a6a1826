#!/usr/bin/env python3
"""Choose the schema validator by measured load time, and give validation's cost to recommend
and report on a 1,000-node cluster document.

The document is bench-recommend.py's: the recorded ``h100-ib-8gpu`` host cloned 1,000 times
(each ~100 KB), as one cluster document. For each candidate, in a fresh process each time:

* ``set-up``: importing the validator and building it for the cluster schema (what every reader
  pays once, on any document);
* ``validate``: validating the 1,000-node document once it is parsed.

References printed beside them, measured in the same run: ``json.loads`` of the same document
(what a reader pays without any validation), and ``python -c pass``.

Then the cost inside the commands: ``ncclcheck recommend --probe cluster.json`` and
``ncclcheck report cluster.json``, end to end, each with the validation time (``set-up`` +
``validate`` of the chosen validator) as a share of the command's wall time.

    python3 scripts/bench-validate.py [--nodes 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SETUP = {
    "fastjsonschema": "import fastjsonschema\nv = fastjsonschema.compile(schema)\n",
    "jsonschema": "import jsonschema\nv = jsonschema.Draft7Validator(schema)\n",
}
RUN = {
    "fastjsonschema": "v(doc)\n",
    "jsonschema": "v.validate(doc)\n",
}
PROGRAM = """
import json, sys, time
from ncclcheck.validate import definition
schema = definition("cluster")
doc = json.loads(open(sys.argv[1]).read())
t0 = time.perf_counter()
{setup}t1 = time.perf_counter()
{run}t2 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1]))
"""


def bench_recommend():
    spec = importlib.util.spec_from_file_location("bench_recommend",
                                                  REPO / "scripts" / "bench-recommend.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fresh(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO,
                         env={**os.environ, "COLUMNS": "100"})
    if out.returncode not in (0, 3):
        raise SystemExit(f"{argv[:4]} failed: {out.stderr[-500:]}")
    return time.perf_counter() - start, out.stdout


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from ncclcheck.cluster import cluster_document
    from ncclcheck.schema import dumps

    nodes = bench_recommend().synthetic_nodes(args.nodes)
    doc = cluster_document(nodes, [], source="bench")
    with tempfile.TemporaryDirectory(prefix="ncclcheck-bench-validate-") as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(dumps(doc))
        print(f"{args.nodes}-node cluster document: {path.stat().st_size / 1e6:.0f} MB")
        loads = []
        for _ in range(args.runs):
            start = time.perf_counter()
            json.loads(path.read_text())
            loads.append(time.perf_counter() - start)
        startup = median([fresh([sys.executable, "-c", "pass"])[0] for _ in range(args.runs)])
        print(f"{'json.loads (reference)':<36}: {median(loads):7.3f} s")
        print(f"{'python -c pass (reference)':<36}: {startup:7.3f} s")
        chosen = {}
        for name in SETUP:
            if importlib.util.find_spec(name) is None:
                print(f"{name:<36}: not installed, skipped")
                continue
            program = PROGRAM.format(setup=SETUP[name], run=RUN[name])
            got = [json.loads(fresh([sys.executable, "-c", program, str(path)])[1])
                   for _ in range(args.runs)]
            setup, run = median([g[0] for g in got]), median([g[1] for g in got])
            chosen[name] = setup + run
            print(f"{name + ' set-up':<36}: {setup:7.3f} s  ({setup / median(loads):5.2f}x "
                  "json.loads)")
            print(f"{name + ' validate':<36}: {run:7.3f} s  ({run / median(loads):5.2f}x "
                  "json.loads)")
        validation = chosen.get("fastjsonschema")
        commands = {
            "recommend --probe cluster.json": ["recommend", "--probe", str(path), "-q"],
            "report cluster.json": ["report", str(path), "-o", str(Path(tmp) / "r.html")],
        }
        for label, argv in commands.items():
            wall = median([fresh([sys.executable, "-m", "ncclcheck", *argv])[0]
                           for _ in range(args.runs)])
            share = f"; validation {validation:.3f} s = {validation / wall:.0%}" \
                if validation else ""
            print(f"{'ncclcheck ' + label:<36}: {wall:7.3f} s wall{share}")


if __name__ == "__main__":
    main()
