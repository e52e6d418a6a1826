#!/usr/bin/env python3
"""Peak memory of every whole-file reader at its size cap (issue 28): the caps are what a reader
can afford under a 2 GB address-space limit (``prlimit --as=2000000000``).

For each kind of input in ``ncclcheck.infile.LIMITS`` an input just under the cap is written,
made of real content repeated (the recorded ``h100-ib-8gpu`` host cloned into a cluster
document, the rows of a recorded nccl-tests table, hostfile lines, env file lines), and the
command that reads it runs in a fresh process under the address-space limit. Printed per run:
the input's size, the peak resident memory (``ru_maxrss`` of the child), their ratio, the exit
code and whether it ended in MemoryError. The reference, measured in the same run, is
``python -c "import ncclcheck.cli.main"``'s peak (what every command pays before reading).

    python3 scripts/bench-memory.py [--fraction 1.0] [--as-limit 2000000000] [--only table]

``--fraction 0.1`` writes inputs at a tenth of each cap (a quick look at the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ncclcheck.infile import LIMITS, MiB  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
HOST = FIXTURES / "hosts" / "h100-ib-8gpu"


def write_document(path: Path, size: int) -> None:
    """A cluster document of recorded facts cloned until it is ``size`` bytes (not more)."""
    from ncclcheck.cluster import cluster_document
    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.probe import collect_facts

    facts = collect_facts(RecordedHost(HOST))
    one = json.dumps(facts)
    doc = cluster_document([facts], [], source="bench-memory")
    head, _, tail = json.dumps(doc).partition(one)
    count = max(1, (size - len(head) - len(tail)) // (len(one) + 2))
    with open(path, "w", encoding="utf-8") as f:
        f.write(head)
        for i in range(count):
            text = one.replace(facts["hostname"], f"node{i:07d}")
            f.write(text if i == 0 else ", " + text)
        f.write(tail)


def write_lines(path: Path, size: int, lines: list[str], head: str = "") -> None:
    """``head``, then ``lines`` repeated (in order) until the file is ``size`` bytes."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(head)
        written = len(head)
        i = 0
        while True:
            line = lines[i % len(lines)].replace("{i}", str(i)) + "\n"
            if written + len(line) > size:
                break
            f.write(line)
            written += len(line)
            i += 1


def table_parts() -> tuple[str, list[str]]:
    """A recorded table's head, and its data rows (the costly part: each becomes a row)."""
    text = (FIXTURES / "nccl-tests" / "a3mega-h100-2x8-all_reduce.txt").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    rows = [line for line in lines[first:] if line.strip()[:1].isdigit()]
    return "\n".join(lines[:first]) + "\n", rows


def inputs(folder: Path, fraction: float) -> list[tuple[str, Path, list[str]]]:
    """(kind, file, argv) per kind, each file at ``fraction`` of its cap less 1 KiB."""
    out = []
    for kind, cap in LIMITS.items():
        size = int(cap * fraction) - 1024
        path = folder / f"{kind}.input"
        if kind == "document":
            write_document(path, size)
            out.append((kind, path, ["recommend", "--probe", str(path), "-q", "-o", os.devnull]))
            out.append((kind, path, ["report", str(path), "-o", str(folder / "report.html")]))
        elif kind == "table":
            head, rows = table_parts()
            write_lines(path, size, rows, head)
            out.append((kind, path, ["bench", "--import", str(path), "--json", "-o",
                                     os.devnull]))
        elif kind == "hostfile":
            write_lines(path, size, ["198.18.{i} slots=8"])
            out.append((kind, path, ["rank", "--hostfile", str(path)]))
        elif kind == "envfile":
            write_lines(path, size, ["NCCL_SETTING_{i}=1"])
            out.append((kind, path, ["bench", "--compare", str(path), "--procs", "1"]))
    return out


def peak(argv: list[str], as_limit: int) -> tuple[int, float, int, str]:
    """Run ``argv`` under the address-space limit: (exit code, seconds, peak KiB, stderr)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=limit)  # noqa: PLW1509 - no threads here
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return proc.returncode, time.monotonic() - start, usage.ru_maxrss, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=1.0)
    parser.add_argument("--as-limit", type=int, default=2_000_000_000)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    py = [sys.executable, "-m", "ncclcheck"]
    code, _, base, _ = peak([sys.executable, "-c", "import ncclcheck.cli.main"], args.as_limit)
    print(f"address-space limit {args.as_limit / 1e9:g} GB; reference: importing the CLI "
          f"peaks at {base / 1024:.0f} MiB")
    print(f"{'kind':<9} {'command':<10} {'cap MiB':>8} {'input MiB':>10} {'peak MiB':>9} "
          f"{'peak/input':>10} {'exit':>5} {'s':>6}  MemoryError")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="ncclcheck-bench-memory-") as tmp:
        for kind, path, argv in inputs(Path(tmp), args.fraction):
            if args.only and args.only != kind:
                continue
            size = path.stat().st_size
            code, seconds, rss, err = peak(py + argv, args.as_limit)
            memory_error = "MemoryError" in err or code not in (0, 2, 3)
            bad += memory_error
            print(f"{kind:<9} {argv[0]:<10} {LIMITS[kind] / MiB:>8.0f} {size / MiB:>10.1f} "
                  f"{rss / 1024:>9.0f} {rss * 1024 / max(size, 1):>10.1f} {code:>5} "
                  f"{seconds:>6.1f}  {'YES: ' + err.strip()[-200:] if memory_error else 'no'}",
                  flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
