"""The analysis names slow nodes and slow links, each with its evidence, and nothing on a
healthy fleet; failed nodes are failed, not slow."""

from __future__ import annotations

import itertools
import random

from ncclcheck.pairwise import analysis

HOSTS = [f"node{i}" for i in range(1, 9)]


def fleet(bw, noise=0.1, seed=0, failed=()):
    rng = random.Random(seed)
    pairs = []
    for a, b in itertools.combinations(range(len(HOSTS)), 2):
        if a in failed or b in failed:
            continue
        pairs.append((a, b, bw(a, b) * rng.uniform(1 - noise, 1 + noise)))
    return analysis.matrix_from_pairs(len(HOSTS), pairs)


def slowest_end(slow_node=None, slow_link=None):
    def bw(a, b):
        v = 0.025
        if slow_node in (a, b):
            v = 0.005
        if slow_link == (a, b):
            v *= 0.2
        return v
    return bw


def names(verdict):
    return ([v["host"] for v in verdict["slow_nodes"]],
            [set(v["hosts"]) for v in verdict["slow_links"]])


def test_healthy_fleet_names_nothing():
    for seed in range(20):
        assert names(analysis.analyse(HOSTS, fleet(slowest_end(), seed=seed))) == ([], [])


def test_slow_node_named_not_its_links():
    # node5 (index 4) at 40 of 200 Mbit/s
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(slow_node=4)))
    assert names(verdict) == (["node5"], [])
    ev = verdict["slow_nodes"][0]
    assert ev["pair_count"] == 7 and len(ev["pairs"]) == 7
    assert ev["score"] < 0.3 and ev["fleet_median_gbps"] > 0.02
    assert "node5's median over 7 pairs" in ev["why"]


def test_slow_link_named_not_its_nodes():
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(slow_link=(1, 5))))
    assert names(verdict) == ([], [{"node2", "node6"}])
    ev = verdict["slow_links"][0]
    assert ev["ratio"] < 0.3 and ev["expected_gbps"] > 0.02 and len(ev["levels_gbps"]) == 2


def test_slow_node_and_slow_link_together():
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(slow_node=4, slow_link=(1, 5))))
    assert names(verdict) == (["node5"], [{"node2", "node6"}])


def test_slow_link_on_a_slow_node_is_still_a_link():
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(slow_node=4, slow_link=(2, 4))))
    assert names(verdict) == (["node5"], [{"node3", "node5"}])


def test_failed_node_is_failed_and_its_pairs_missing_not_slow():
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(), failed={2}), failed=[2])
    assert names(verdict) == ([], [])
    assert verdict["failed"] == [{"host": "node3"}]
    assert verdict["nodes"][2]["status"] == "failed"
    assert [n["pairs"] for n in verdict["nodes"]] == [6, 6, 0, 6, 6, 6, 6, 6]


def test_a_repeated_measurement_keeps_the_better_figure():
    m = analysis.matrix_from_pairs(3, [(0, 1, 1.0), (1, 0, 3.0), (0, 1, 2.0), (0, 2, None)])
    assert m[0][1] == m[1][0] == 3.0
    assert list(m.peers[0]) == [1] and m[0][2] != m[0][2]


def test_noisy_fleet_widens_the_cut_instead_of_crying_wolf():
    # +-40% noise: a node at 0.7 of the fleet would be "slow" by the fixed cut alone
    verdict = analysis.analyse(HOSTS, fleet(slowest_end(), noise=0.4, seed=3))
    assert verdict["fleet"]["link_cut"] <= analysis.LINK_CUT
    assert names(verdict)[1] == []


def test_matrix_rows_are_json_ready():
    rows = analysis.matrix_rows(analysis.matrix_from_pairs(2, [(0, 1, 2.5)]))
    assert rows == [[None, 2.5], [2.5, None]]
