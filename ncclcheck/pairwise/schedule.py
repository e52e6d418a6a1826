"""Rounds of disjoint pairs: every node meets one peer per round, all pairs at the same time.

The round-robin "circle" method: node ``N-1`` stays put, the others turn around it one step per
round. ``N-1`` rounds cover all ``N(N-1)/2`` pairs once each for even ``N``; odd ``N`` adds a
resting ("bye") seat and needs ``N`` rounds, each node resting once.

For fleets too large for all pairs, ``--rounds K`` keeps the first ``K`` rounds of the circle over
a shuffled node order (a fixed seed, so a rerun measures the same pairs): each node then meets
``K`` different peers, spread over the fleet rather than its neighbours in the hostfile. Nodes and
links that look slow after those rounds are confirmed against known-good peers
(:func:`confirm_rounds`).

>>> circle_rounds(4)
[[(0, 3), (1, 2)], [(1, 3), (0, 2)], [(2, 3), (0, 1)]]
>>> circle_rounds(3)
[[(1, 2)], [(0, 2)], [(0, 1)]]
"""

from __future__ import annotations

import math
import random
from typing import Iterable, Sequence

Pair = tuple[int, int]
Round = list[Pair]


def round_count(n: int) -> int:
    """Rounds for all pairs: ``N-1`` for even ``N``, ``N`` for odd (0 or 1 nodes: none).

    >>> [round_count(n) for n in (1, 2, 3, 8, 9)]
    [0, 1, 3, 7, 9]
    """
    if n < 2:
        return 0
    return n - 1 if n % 2 == 0 else n


def default_rounds(n: int) -> int:
    """About ``2*log2(N)`` rounds, the ``--rounds`` figure the simulations are run at.

    >>> [default_rounds(n) for n in (8, 64, 1024, 4096)]
    [6, 12, 20, 24]
    """
    return min(round_count(n), max(1, round(2 * math.log2(max(n, 2)))))


def circle_round(n: int, r: int, order: Sequence[int] | None = None) -> Round:
    """Round ``r`` of the circle over ``n`` nodes (``order`` maps seats to nodes), each pair
    ``(low, high)``; a pair with the bye seat of odd ``n`` is left out."""
    seats = n if n % 2 == 0 else n + 1
    m = seats - 1
    raw = [(r % m, m)] + [((r + k) % m, (r - k) % m) for k in range(1, seats // 2)]
    out: Round = []
    for a, b in raw:
        if a >= n or b >= n:
            continue
        if order is not None:
            a, b = order[a], order[b]
        out.append((a, b) if a < b else (b, a))
    return out


def circle_rounds(n: int, rounds: int | None = None, seed: int | None = None) -> list[Round]:
    """The first ``rounds`` rounds (all of them when None) of the circle over ``n`` nodes;
    with ``seed``, over a shuffled order of the nodes."""
    total = round_count(n)
    k = total if rounds is None else max(0, min(rounds, total))
    order = None
    if seed is not None:
        order = list(range(n))
        random.Random(seed).shuffle(order)
    return [circle_round(n, r, order) for r in range(k)]


def plan(n: int, rounds: int | None = None, seed: int = 0) -> list[Round]:
    """The schedule ``bench --pairwise`` runs: all pairs, or ``--rounds K`` over a shuffled
    order (unshuffled when ``K`` covers all pairs anyway).

    >>> len(plan(8)), len(plan(4096, 24)), sum(len(r) for r in plan(4096, 24))
    (7, 24, 49152)
    """
    if rounds is None or rounds >= round_count(n):
        return circle_rounds(n)
    return circle_rounds(n, rounds, seed=seed)


def plan_length(n: int, rounds: int | None = None) -> int:
    """``len(plan(n, rounds))`` without building the rounds (4096 nodes: 4095 rounds of 2048
    pairs, most of a minute to build only to count them).

    >>> [plan_length(n, r) for n, r in ((8, None), (8, 3), (8, 99), (4096, 24), (4096, None))]
    [7, 3, 7, 24, 4095]
    """
    total = round_count(n)
    return total if rounds is None else max(0, min(rounds, total))


def check_disjoint(rounds: Iterable[Round]) -> None:
    """Raise ``ValueError`` when a round uses a node twice (a schedule bug, never user input)."""
    for index, rnd in enumerate(rounds):
        seen: set[int] = set()
        for a, b in rnd:
            if a in seen or b in seen or a == b:
                raise ValueError(f"round {index} uses node {a if a in seen or a == b else b} "
                                 "twice")
            seen.update((a, b))


def confirm_rounds(suspects: Iterable[int], links: Iterable[Pair], good: Sequence[int],
                   met: set[Pair], peers_each: int = 3, seed: int = 0) -> list[Round]:
    """Rounds that confirm the suspects: each suspect node against ``peers_each`` known-good
    peers it has not met yet, and each suspect link measured again; packed greedily into rounds
    of disjoint pairs.

    >>> confirm_rounds([5], [(2, 6)], good=[0, 1, 3, 4, 7], met={(0, 5), (2, 6)}, peers_each=2)
    [[(1, 5), (2, 6)], [(3, 5)]]
    """
    rng = random.Random(seed)
    wanted: list[Pair] = []
    pool = list(good)
    for node in sorted(set(suspects)):
        fresh = [g for g in pool if g != node and (min(g, node), max(g, node)) not in met]
        if len(fresh) > 4 * peers_each:  # a spread of peers, not always the first few
            fresh = sorted(rng.sample(fresh, 4 * peers_each))
        for peer in fresh[:peers_each]:
            wanted.append((min(node, peer), max(node, peer)))
    wanted.extend((min(a, b), max(a, b)) for a, b in links)
    return pack(wanted)


def pack(pairs: Sequence[Pair]) -> list[Round]:
    """Pairs packed greedily, in order, into rounds where no node appears twice.

    >>> pack([(0, 1), (0, 2), (1, 2), (3, 4)])
    [[(0, 1), (3, 4)], [(0, 2)], [(1, 2)]]
    """
    rounds: list[Round] = []
    busy: list[set[int]] = []
    seen: set[Pair] = set()
    for pair in pairs:
        if pair in seen or pair[0] == pair[1]:
            continue
        seen.add(pair)
        for rnd, used in zip(rounds, busy):
            if pair[0] not in used and pair[1] not in used:
                rnd.append(pair)
                used.update(pair)
                break
        else:
            rounds.append([pair])
            busy.append(set(pair))
    return rounds
