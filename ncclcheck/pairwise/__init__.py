"""``ncclcheck bench --pairwise``: find the slow node and the slow link among N nodes.

An all-reduce over N nodes cannot name the slow one: every rank waits for it. Pairs can. This
package holds the pure parts, testable on simulated fleets of thousands of nodes:

* :mod:`~ncclcheck.pairwise.schedule`: rounds of disjoint pairs (the circle method), the
  ``--rounds K`` subset, and confirmation rounds against known-good peers (pure).
* :mod:`~ncclcheck.pairwise.analysis`: per-node scores (median and MAD), slow nodes, slow links,
  each verdict with its evidence (pure).
* :mod:`~ncclcheck.pairwise.simulate`: simulated fleets with noise, slow nodes and slow links,
  and recall / false-alarm figures (pure; used by scripts/bench-pairwise.py and the tests).
* :mod:`~ncclcheck.pairwise.document`: the ``ncclcheck/pairwise`` JSON document (pure).

The measuring side lives with bench: :mod:`ncclcheck.bench.pairrank` (one rank's loop, handed
torch by the worker) and :mod:`ncclcheck.bench.pairlaunch` (the launch and the verdict).
"""
