"""The circle schedule: disjoint rounds that cover every pair once; --rounds; confirmations."""

from __future__ import annotations

import itertools

import pytest

from ncclcheck.pairwise import schedule


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 16, 33])
def test_all_pairs_once_in_n_minus_1_or_n_rounds(n):
    rounds = schedule.plan(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    schedule.check_disjoint(rounds)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))
    # every round keeps everyone busy (all but one node for odd n)
    assert all(len(r) == n // 2 for r in rounds)


def test_rounds_k_gives_each_node_k_distinct_peers():
    n, k = 1024, schedule.default_rounds(1024)
    rounds = schedule.plan(n, k)
    assert len(rounds) == k == 20
    schedule.check_disjoint(rounds)
    peers = {i: set() for i in range(n)}
    for a, b in (p for r in rounds for p in r):
        peers[a].add(b)
        peers[b].add(a)
    assert all(len(p) == k for p in peers.values())
    # spread over the fleet, not the hostfile neighbours: few peers within +-k positions
    near = sum(1 for i, p in peers.items() for j in p if abs(i - j) <= k)
    assert near < n * k * 0.2


def test_rounds_beyond_all_pairs_is_all_pairs():
    assert schedule.plan(8, 50) == schedule.plan(8)


def test_check_disjoint_catches_a_node_used_twice():
    with pytest.raises(ValueError, match="node 1 twice"):
        schedule.check_disjoint([[(0, 1), (1, 2)]])


def test_confirm_rounds_pick_good_unmet_peers_and_remeasure_links():
    met = {(0, 5), (1, 5), (2, 6)}
    rounds = schedule.confirm_rounds([5], [(2, 6)], good=[0, 1, 3, 4, 7], met=met)
    schedule.check_disjoint(rounds)
    pairs = {p for r in rounds for p in r}
    assert (2, 6) in pairs
    five = {a if b == 5 else b for a, b in pairs if 5 in (a, b)}
    assert len(five) == 3 and five <= {3, 4, 7}  # unmet, good peers only
