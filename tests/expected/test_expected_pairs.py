"""``bench --pairwise``: each pair against the per-link expectation (pure), its schema, its text;
the qdisc reader the agents use."""

from __future__ import annotations

from ncclcheck import validate
from ncclcheck.expected.pairs import judge_pairs
from ncclcheck.expected.qdisc import parse_qdiscs
from ncclcheck.render.expected import pairwise_lines

LINKS = {h: [{"ifname": "eth0", "qdisc": "tbf", "rate_text": r, "rate_bps": b}]
         for h, r, b in (("node1", "200Mbit", 2e8), ("node2", "200Mbit", 2e8),
                         ("node3", "40Mbit", 4e7))}


def pairwise_doc(pairs):
    return {"schema": "ncclcheck/pairwise", "schema_version": 1, "ncclcheck_version": "t",
            "created_at": "2026-11-26T00:00:00Z", "hosts": ["node1", "node2", "node3"],
            "slow_nodes": [], "slow_links": [], "failed": [], "missing_pairs": [], "nodes": [],
            "fleet": {}, "matrix": {"unit": "GB/s", "gbps": [[None] * 3] * 3},
            "pairs": [{"round": 0, "hosts": list(h), "gbps": g} for h, g in pairs],
            "schedule": {}, "method": {}, "launch": {"mode": "ssh", "links": LINKS}}


def test_pairs_through_the_slow_link_are_low_and_name_it():
    doc = pairwise_doc([(("node1", "node2"), 0.0239), (("node1", "node3"), 0.0048),
                        (("node2", "node3"), 0.0049)])
    exp = judge_pairs(doc)
    assert exp["class"] == "tcp-shaped" and exp["rate_gbps"] == 0.025
    assert exp["rate_from"] == "tc qdisc"
    assert exp["counts"] == {"normal": 1, "low": 2, "above the table": 0}
    assert [p["hosts"] for p in exp["pairs"]] == [["node1", "node3"], ["node2", "node3"]]
    assert exp["pairs"][0]["limits"] == ["node3 eth0: shaped to 40Mbit by tc (tbf), below the "
                                         "200 Mbit/s expected"]
    doc["expected"] = exp
    validate.validate(doc, "pairwise.json")  # the shipped schema accepts it
    text = "\n".join(pairwise_lines(exp))
    assert "expected per link: tcp-shaped at 200 Mbit/s (tc qdisc)" in text
    assert "node1 <-> node3  0.0048 GB/s = 19%: low (node3 eth0: shaped to 40Mbit" in text


def test_link_rate_overrides_and_nothing_shaped_says_what_is_missing():
    doc = pairwise_doc([(("node1", "node2"), 0.0239)])
    exp = judge_pairs(doc, link_rate_gbps=0.1)
    assert exp["rate_from"] == "--link-rate" and exp["counts"]["low"] == 1
    doc["launch"] = {"mode": "ssh"}
    none = judge_pairs(doc)
    assert none["class"] is None and "--link-rate" in none["missing"][0]


def test_qdisc_rates():
    text = ("qdisc htb 1: dev eth0 root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0\n"
            "qdisc netem 8002: dev eth1 root refcnt 2 limit 1000 delay 1ms rate 1Gbit\n"
            "qdisc tbf 8001: dev eth2 root refcnt 2 rate 500Kbit burst 4Kb lat 25ms\n")
    assert [(q["ifname"], q["qdisc"], q["rate_bps"]) for q in parse_qdiscs(text)] == [
        ("eth1", "netem", 1e9), ("eth2", "tbf", 5e5)]
