"""The ncclcheck/pairwise document: versioned, top-level slow_nodes/slow_links, the matrix,
the schedule; failed nodes and missing pairs; the text table."""

from __future__ import annotations

import json

import pytest

from ncclcheck import schema
from ncclcheck.bench.pairrank import pair_figures
from ncclcheck.errors import BadInput
from ncclcheck.pairwise import document, schedule
from ncclcheck.render.pairwise import render_pairwise

HOSTS = [f"node{i}" for i in range(1, 9)]
SIZE = 2 * 2**20


def raw_result(slow_node=None, slow_link=None, dead=None, n=8):
    """What rank 0 returns, built from per-rank records as the ranks make them."""
    rounds = schedule.plan(n)
    records = [[] for _ in range(n)]
    for index, rnd in enumerate(rounds):
        for a, b in rnd:
            gbps = 0.012 * (1 + 0.02 * ((a * 7 + b * 3) % 5 - 2))
            if slow_node in (a, b):
                gbps = 0.005
            if slow_link == (a, b):
                gbps = 0.005
            t_us = SIZE / 1e9 / gbps * 1e6
            for me, peer in ((a, b), (b, a)):
                if me != dead:
                    records[me].append({"round": index, "peer": peer, "time_us": t_us,
                                        "latency_us": 80.0})
    return {"pairwise_raw": True, "world_size": n, "hosts": [f"h{i}" for i in range(n)],
            "size_bytes": SIZE, "rounds": [[list(p) for p in r] for r in rounds],
            "confirm_rounds": [], "pairs": pair_figures(SIZE, rounds, records),
            "backend": "gloo", "warmup": 1, "iters": 3}


def test_document_names_and_is_versioned():
    doc = document.build(raw_result(slow_node=4, slow_link=(1, 5)), HOSTS, None,
                         launch={"mode": "ssh"}, wall_s=12.5)
    doc = json.loads(schema.dumps(doc))  # JSON-clean (no NaN)
    schema.check(doc, expect=("ncclcheck/pairwise",))
    assert doc["schema_version"] == 1
    assert [v["host"] for v in doc["slow_nodes"]] == ["node5"]
    assert [sorted(v["hosts"]) for v in doc["slow_links"]] == [["node2", "node6"]]
    assert len(doc["matrix"]["gbps"]) == 8 and doc["matrix"]["gbps"][0][0] is None
    assert doc["schedule"]["kind"] == "all-pairs" and len(doc["schedule"]["rounds"]) == 7
    assert doc["schedule"]["rounds"][0][0] == ["node1", "node8"]
    assert doc["method"]["op"] == "sendrecv" and doc["method"]["size_bytes"] == SIZE
    assert len(doc["pairs"]) == 28 and doc["missing_pairs"] == []
    document.check_shape(doc)


def test_failed_node_named_failed_its_pairs_missing():
    doc = document.build(raw_result(dead=2), HOSTS, None, failed=[2])
    assert doc["failed"] == [{"host": "node3"}]
    assert doc["slow_nodes"] == [] and doc["slow_links"] == []
    assert len(doc["missing_pairs"]) == 7
    assert all("node3" in p for p in doc["missing_pairs"])


def test_rounds_kind():
    doc = document.build(raw_result(), HOSTS, 3)
    assert doc["schedule"]["kind"] == "rounds" and doc["schedule"]["requested_rounds"] == 3


def test_check_shape_refuses_a_bad_document():
    with pytest.raises(BadInput, match="slow_links entries need two 'hosts'"):
        document.check_shape({"hosts": [], "slow_nodes": [], "slow_links": [{"hosts": ["a"]}],
                              "matrix": {"gbps": []}}, "p.json")


def test_text_names_then_matrix():
    doc = document.build(raw_result(slow_node=4, slow_link=(1, 5)), HOSTS, None)
    text = render_pairwise(doc)
    head, matrix = text.split("pair bandwidth (GB/s):")
    assert "slow nodes:\n  node5  score" in head
    assert "node2 <-> node6" in head and "% of" in head
    assert "      pairs: node" in head
    lines = matrix.strip().splitlines()
    assert lines[0].split() == HOSTS and len(lines) == 9
    assert lines[1].split()[1] == "."


def test_text_for_a_healthy_fleet_and_a_large_one():
    text = render_pairwise(document.build(raw_result(), HOSTS, None))
    assert "slow nodes: none" in text and "slow links: none" in text
    big = render_pairwise(document.build(raw_result(n=40), [f"n{i}" for i in range(40)], None))
    assert "per node (40 nodes" in big and "pair bandwidth" not in big
