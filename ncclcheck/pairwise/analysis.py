"""Name the slow nodes and the slow links from a matrix of pair bandwidths (pure).

The input is an ``N x N`` symmetric matrix of pair bandwidths (GB/s, sendrecv busbw = algbw as
nccl-tests defines it), ``NaN`` where a pair was not measured or failed. Rows are
``array('d')`` so that 4,096 nodes fit in 134 MB and each row is scanned in C.

* **Node level**: the median of the node's pairs. **Score**: level / the fleet's median level.
  The scores' spread is their MAD (x1.4826, a robust sigma). A node is slow when its score is
  below ``min(NODE_CUT, 1 - SIGMAS * sigma)``: well below the fleet, and beyond the noise.
  Its own pairs are all slow, so its level drops; a healthy node meets it once, which moves its
  median by at most one position.
* **Link**: a pair is slow when its bandwidth is below ``min(LINK_CUT, 1 - SIGMAS * sigma_pair)``
  times what its two nodes reach with others, ``min(level_a, level_b)``; so a slow node's pairs
  are held against the slow node's own level and are not called slow links (its slowness
  explains them). ``sigma_pair`` is the robust spread of pair / expected over the fleet.

Every verdict carries its evidence: the figures and the medians they were held against.

>>> nan = float("nan")
>>> m = matrix_from_pairs(4, [(0, 1, 10.0), (0, 2, 10.0), (0, 3, 2.0), (1, 2, 10.0),
...                           (1, 3, 2.0), (2, 3, 2.0)])
>>> [n["host"] for n in analyse(["a", "b", "c", "d"], m)["slow_nodes"]]
['d']
"""

from __future__ import annotations

from array import array
from itertools import compress, repeat
from math import isfinite
from operator import gt
from typing import Any, Iterable, Sequence

#: A node is slow below this fraction of the fleet's median (and beyond the noise).
NODE_CUT = 0.75
#: A link is slow below this fraction of what its two nodes reach with others.
LINK_CUT = 0.6
#: How many robust sigmas below 1 a score must be, when the fleet is noisier than the cuts allow.
SIGMAS = 6.0
MAD_SIGMA = 1.4826
#: Pairs sampled to estimate the pair spread (deterministic stride).
SPREAD_SAMPLE = 20000
#: Evidence pairs kept per slow node in the document (the slowest first, then the rest).
EVIDENCE_PAIRS = 32

NAN = float("nan")


class PairMatrix:
    """An ``N x N`` symmetric matrix of pair figures: dense rows (``array('d')``, ``NaN`` where
    nothing was measured) plus, per node, the peers it was measured with (``array('i')``), so
    that a sparse ``--rounds`` matrix is read through its peers and a full one row by row."""

    def __init__(self, n: int) -> None:
        self.n = n
        row = array("d", [NAN]) * n
        self.rows = [array("d", row) for _ in range(n)]
        self.peers = [array("i") for _ in range(n)]

    def __getitem__(self, a: int) -> array:
        return self.rows[a]

    def __len__(self) -> int:
        return self.n

    def record(self, a: int, b: int, value: float | None) -> None:
        """Store pair ``(a, b)``; a repeated measurement keeps the better figure (a slow link
        is slow every time; a one-off dip is noise). None (a failed pair) keeps NaN."""
        if value is None or not value == value or a == b:
            return
        old = self.rows[a][b]
        if old == old:
            if old >= value:
                return
        else:
            self.peers[a].append(b)
            self.peers[b].append(a)
        self.rows[a][b] = self.rows[b][a] = float(value)

    def dense(self, a: int) -> bool:
        """Whether row ``a`` is better scanned whole than through its peers."""
        return len(self.peers[a]) * 4 > self.n

    def values(self, a: int) -> list[float]:
        """Node ``a``'s measured figures."""
        if self.dense(a):
            return list(filter(isfinite, self.rows[a]))
        return list(map(self.rows[a].__getitem__, self.peers[a]))

    def below(self, a: int, bar: float) -> list[int]:
        """Peers of ``a`` whose figure is below ``bar``."""
        row = self.rows[a]
        if self.dense(a):
            return list(compress(range(self.n), map(gt, repeat(bar), row)))
        return [b for b in self.peers[a] if row[b] < bar]


def empty_matrix(n: int) -> PairMatrix:
    """A matrix of ``n`` nodes with nothing measured."""
    return PairMatrix(n)


def record(matrix: PairMatrix, a: int, b: int, value: float | None) -> None:
    """Store pair ``(a, b)`` (see :meth:`PairMatrix.record`)."""
    matrix.record(a, b, value)


def matrix_from_pairs(n: int, pairs: Iterable[tuple[int, int, float | None]]) -> PairMatrix:
    """A matrix from ``(a, b, bandwidth)`` triples."""
    matrix = PairMatrix(n)
    for a, b, value in pairs:
        matrix.record(a, b, value)
    return matrix


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence (sorts a copy).

    >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 2.0, 3.0])
    (2.0, 2.5)
    """
    s = sorted(values)
    k = len(s)
    mid = k // 2
    return s[mid] if k % 2 else (s[mid - 1] + s[mid]) / 2


def robust_sigma(values: Sequence[float], center: float) -> float:
    """MAD around ``center`` times 1.4826 (a normal sigma); 0 for no values."""
    if not values:
        return 0.0
    return MAD_SIGMA * median([abs(v - center) for v in values])


def node_levels(matrix: PairMatrix, skip: set[int]) -> tuple[list[float | None], list[int]]:
    """Each node's median pair bandwidth (None: failed, or fewer than 2 pairs), and how many
    pairs it had."""
    levels: list[float | None] = []
    counts: list[int] = []
    for i in range(matrix.n):
        vals = matrix.values(i) if i not in skip else []
        levels.append(median(vals) if len(vals) >= 2 else None)
        counts.append(len(vals))
    return levels, counts


def analyse(hosts: Sequence[str], matrix: PairMatrix, failed: Iterable[int] = (),
            node_cut: float = NODE_CUT, link_cut: float = LINK_CUT) -> dict[str, Any]:
    """The verdict: ``slow_nodes``, ``slow_links``, ``failed``, per-node ``nodes`` and the
    ``fleet`` figures the verdicts were held against."""
    n = len(hosts)
    dead = set(failed)
    levels, counts = node_levels(matrix, dead)
    known = [v for v in levels if v is not None]
    fleet = median(known) if known else None
    scores = [None if v is None or not fleet else v / fleet for v in levels]
    judged = [s for s in scores if s is not None]
    sigma = robust_sigma(judged, median(judged)) if judged else 0.0
    cut_n = min(node_cut, 1.0 - SIGMAS * sigma)
    slow = [i for i, s in enumerate(scores) if s is not None and s < cut_n]
    sigma_p = pair_spread(matrix, levels)
    cut_l = min(link_cut, 1.0 - SIGMAS * sigma_p)
    links = slow_link_candidates(matrix, levels, cut_l)
    nodes = [{"host": hosts[i], "level_gbps": levels[i], "score": scores[i],
              "pairs": counts[i],
              "status": ("failed" if i in dead else "unjudged" if scores[i] is None
                         else "slow" if i in slow else "ok")} for i in range(n)]
    return {
        "fleet": {"median_gbps": fleet, "score_sigma": sigma, "node_cut": cut_n,
                  "pair_sigma": sigma_p, "link_cut": cut_l},
        "slow_nodes": [slow_node_evidence(hosts, matrix, levels, fleet, scores, cut_n, i)
                       for i in sorted(slow, key=lambda i: scores[i])],
        "slow_links": [slow_link_evidence(hosts, matrix, levels, cut_l, a, b)
                       for a, b in links],
        "failed": [{"host": hosts[i]} for i in sorted(dead)],
        "nodes": nodes,
    }


def pair_spread(matrix: PairMatrix, levels: list[float | None]) -> float:
    """Robust sigma of pair / expected, from a deterministic sample of measured pairs."""
    total = sum(len(p) for p in matrix.peers) // 2
    stride = max(1, total // SPREAD_SAMPLE)
    ratios: list[float] = []
    k = 0
    for a in range(matrix.n):
        la, peers, row = levels[a], matrix.peers[a], matrix[a]
        if la is not None:
            for b in peers[(-k) % stride::stride]:
                lb = levels[b]
                if b > a and lb is not None:
                    ratios.append(row[b] / min(la, lb))
        k += len(peers)
    return robust_sigma(ratios, median(ratios)) if ratios else 0.0


def slow_link_candidates(matrix: PairMatrix, levels: list[float | None],
                         cut: float) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``, ``a < b``, below ``cut * min(level_a, level_b)``: a C-speed scan of
    each row for entries below ``cut * level_a`` first (the only ones that can qualify)."""
    found: list[tuple[int, int]] = []
    for a in range(matrix.n):
        la = levels[a]
        if la is None:
            continue
        row = matrix[a]
        for b in matrix.below(a, cut * la):
            lb = levels[b]
            if b > a and lb is not None and row[b] < cut * min(la, lb):
                found.append((a, b))
    return found


def slow_node_evidence(hosts: Sequence[str], matrix: PairMatrix, levels: list[float | None],
                       fleet: float | None, scores: list[float | None], cut: float,
                       i: int) -> dict[str, Any]:
    """A slow node's verdict and its pairs (the figures its median came from)."""
    row = matrix[i]
    pairs = sorted((row[j], j) for j in matrix.peers[i])
    return {"host": hosts[i], "level_gbps": levels[i], "fleet_median_gbps": fleet,
            "score": scores[i], "cut": cut, "pair_count": len(pairs),
            "pairs": [{"peer": hosts[j], "gbps": v} for v, j in pairs[:EVIDENCE_PAIRS]],
            "why": (f"{hosts[i]}'s median over {len(pairs)} pairs is {scores[i]:.0%} of the "
                    f"fleet's median ({levels[i]:.4g} vs {fleet:.4g} GB/s; slow below "
                    f"{cut:.0%})")}


def slow_link_evidence(hosts: Sequence[str], matrix: PairMatrix, levels: list[float | None],
                       cut: float, a: int, b: int) -> dict[str, Any]:
    """A slow link's verdict: its figure against what its two nodes reach with others."""
    value, la, lb = matrix[a][b], levels[a], levels[b]
    expected = min(la, lb)  # type: ignore[type-var]
    return {"hosts": [hosts[a], hosts[b]], "gbps": value,
            "levels_gbps": [la, lb], "expected_gbps": expected, "ratio": value / expected,
            "cut": cut,
            "why": (f"{hosts[a]}<->{hosts[b]} reached {value:.4g} GB/s, {value / expected:.0%} "
                    f"of what both reach with others (medians {la:.4g} and {lb:.4g} GB/s; slow "
                    f"below {cut:.0%})")}


def matrix_rows(matrix: PairMatrix) -> list[list[float | None]]:
    """The matrix as JSON-ready lists (``None`` for NaN)."""
    return [[v if v == v else None for v in row] for row in matrix.rows]

