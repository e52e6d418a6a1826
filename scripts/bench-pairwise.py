#!/usr/bin/env python3
"""Simulated fleet hunts for ``bench --pairwise`` (issue 12 targets): recall, false alarms, time.

Each fleet (:func:`ncclcheck.pairwise.simulate.make_fleet`) has +-10% uniform noise on every
measurement, 1% of its nodes at 0.5x and 0.1% of its pairs (links) at 0.3x. The hunt is the
command's pipeline without the network: the schedule (all pairs, or ``--rounds K`` with
K = about 2*log2(N)), the analysis, and for ``--rounds`` the confirmation rounds of the suspects
against known-good peers and the analysis again.

Printed per fleet size and mode, summed over ``--seeds`` fleets:

* node recall (targets: >= 99%) and node false alarms as a share of the nodes (<= 0.5%);
* link recall among the slow links the schedule measured (a ``--rounds`` schedule measures about
  K/N of all pairs, so it cannot see the others), and link false alarms;
* ``sched+analysis``: seconds in the schedule, the matrix and the analysis (not the simulated
  measuring), the median over seeds; target < 2 s at 4,096 nodes. Beside it, the reference run:
  ``sorted()`` of every node's measured figures, the least work any median-based analysis does,
  and the ratio of the two.

    python3 scripts/bench-pairwise.py [--sizes 64,1024,4096] [--seeds 3] [--no-full-4096]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ncclcheck.pairwise import schedule, simulate  # noqa: E402

TARGET_S = 2.0


def reference_s(matrix) -> float:
    """Seconds to sort every node's measured figures (the reference run)."""
    t = time.perf_counter()
    for i in range(matrix.n):
        sorted(matrix.values(i))
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,1024,4096")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-full-4096", action="store_true",
                        help="skip all pairs at 4,096 nodes (8.4 M simulated pairs, ~20 s)")
    args = parser.parse_args()
    print(f"{'nodes':>6} {'mode':>12} {'node recall':>11} {'node FA':>9} {'links seen':>10} "
          f"{'link recall':>11} {'link FA':>7} {'confirm':>7} {'sched+analysis':>14} "
          f"{'reference':>9} {'ratio':>6}")
    worst_time = 0.0
    ok = True
    for n in (int(x) for x in args.sizes.split(",")):
        for rounds in (None, schedule.default_rounds(n)):
            if rounds is None and n >= 4096 and args.no_full_4096:
                continue
            mode = "all pairs" if rounds is None else f"--rounds {rounds}"
            scores: list[dict] = []
            times: list[float] = []
            refs: list[float] = []
            for seed in range(args.seeds if n < 4096 or rounds else 1):
                fleet = simulate.make_fleet(n, seed=seed)
                timings: dict[str, float] = {}
                verdict = simulate.hunt(fleet, rounds, timings)
                scores.append(simulate.score(fleet, verdict))
                times.append(timings["schedule_and_analysis_s"])
                refs.append(reference_s(verdict["matrix"]))
                del verdict
            a = simulate.aggregate(scores)
            seen, hit, lfa, conf = (a["links_measured"], a["links_found"], a["link_false_alarms"],
                                    a["confirm_rounds"])
            t, ref = statistics.median(times), statistics.median(refs)
            recall = a["nodes_found"] / a["slow_nodes"]
            fa_rate = a["node_false_alarms"] / a["nodes"]
            ok &= recall >= 0.99 and fa_rate <= 0.005
            if n >= 4096 and rounds:
                worst_time = max(worst_time, t)
            print(f"{n:>6} {mode:>12} {recall:>11.1%} {fa_rate:>9.2%} {seen:>10} "
                  f"{(hit / seen if seen else float('nan')):>11.1%} {lfa:>7} {conf:>7} "
                  f"{t:>13.3f}s {ref:>8.3f}s {t / ref if ref else float('nan'):>6.1f}")
    print(f"targets: node recall >= 99%, false alarms <= 0.5% of nodes: "
          f"{'met' if ok else 'NOT met'}; --rounds at 4,096 nodes {worst_time:.3f} s "
          f"(target < {TARGET_S:g} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
