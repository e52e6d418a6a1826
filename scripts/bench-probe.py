#!/usr/bin/env python3
"""Time `ncclcheck probe --json` and `ncclcheck --help` against `python -m torch.utils.collect_env`.

All three run in this one process's run, as fresh subprocesses (what a user waits for), several
times each; the median is reported. Targets (issue 2, on a 2-core machine): probe --json <= 1 s,
--help <= 0.3 s. collect_env is the reference: the tool users run today to report their setup.

    python3 scripts/bench-probe.py [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> float:
    """Median wall time of ``argv`` over ``runs`` runs (one warm-up run first)."""
    subprocess.run(argv, capture_output=True, timeout=300)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, timeout=300)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 3):
            sys.exit(f"{' '.join(argv)} failed: {proc.stderr.decode()[-300:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    exe = shutil.which("ncclcheck")
    base = [exe] if exe else [sys.executable, "-m", "ncclcheck"]
    probe = timed(base + ["probe", "--json"], args.runs)
    helps = timed(base + ["--help"], args.runs)
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except ValueError:
        has_torch = False
    ref = timed([sys.executable, "-m", "torch.utils.collect_env"], max(3, args.runs // 2)) \
        if has_torch else None
    print(f"ncclcheck probe --json : {probe:6.3f} s   (target <= 1.000 s)  "
          f"{'OK' if probe <= 1.0 else 'OVER'}")
    print(f"ncclcheck --help       : {helps:6.3f} s   (target <= 0.300 s)  "
          f"{'OK' if helps <= 0.3 else 'OVER'}")
    if ref is not None:
        print(f"torch collect_env      : {ref:6.3f} s   (reference)")
        print(f"ratio probe / collect_env : {probe / ref:5.2f}")
        print(f"ratio help  / collect_env : {helps / ref:5.2f}")
    else:
        print("torch not installed: no collect_env reference (pip install torch==2.13.0)")


if __name__ == "__main__":
    main()
