"""Merging proposals into one environment: agreement, conflicts, ties decided by bench runs."""

from __future__ import annotations

import pytest
from recommend_scenarios import assemble

from ncclcheck.bench.document import bench_document, compare_document
from ncclcheck.recommend.document import recommend
from ncclcheck.recommend.inputs import bench_runs
from ncclcheck.recommend.merge import merge


def finding(rule, env, hosts=("n1", "n2"), **evidence):
    return {"rule": rule, "severity": "info", "message": f"{rule} says so", "why": "w",
            "docs": "https://x", "fix": "f", "env": env, "evidence": evidence, "hosts": list(hosts)}


def test_agreeing_rules_set_the_value_with_both_reasons():
    merged = merge([finding("a", {"NCCL_X": "1"}), finding("b", {"NCCL_X": "1"})], [], ["n1", "n2"])
    assert merged["env"] == {"NCCL_X": "1"}
    assert [r["rule"] for r in merged["reasons"]["NCCL_X"]] == ["a", "b"]


def test_disagreeing_rules_conflict_and_nothing_is_picked():
    merged = merge([finding("a", {"NCCL_X": "1"}), finding("b", {"NCCL_X": "2"})], [], ["n1", "n2"])
    assert merged["env"] == {}
    [conflict] = merged["conflicts"]
    assert conflict["values"] == {"a": "1", "b": "2"} and "rules disagree" in conflict["why"]


def test_a_rule_skipped_on_some_nodes_has_its_value_withheld():
    skipped = [{"rule": "a", "hosts": ["n2"], "reason": "n2: network error: boom"}]
    merged = merge([finding("a", {"NCCL_X": "1"}, hosts=("n1",))], skipped, ["n1", "n2"])
    assert merged["env"] == {} and merged["withheld"][0]["var"] == "NCCL_X"


def run_doc(ifname, peak):
    """A bench run as ``ncclcheck bench`` writes it (one row, the candidate's env)."""
    row = {"size_bytes": 1 << 20, "count": 262144, "type": "float", "redop": "sum", "root": -1,
           "out_of_place": {"time_us": 1.0, "time_us_mean": 1.0, "algbw_gbps": peak,
                            "busbw_gbps": peak, "wrong": 0}, "in_place": None}
    return bench_document(source="ncclcheck", op="all_reduce", dtype="float", backend="gloo",
                          world_size=2, nodes=["n1", "n2"], ranks_per_node=1, warmup=1, iters=3,
                          check=1, env={"NCCL_SOCKET_IFNAME": ifname}, versions={},
                          transport={"network": "Socket", "interfaces": [ifname.lstrip("=")]},
                          rows=[row], candidate_env={"NCCL_SOCKET_IFNAME": ifname})


def compare(*pairs):
    return compare_document([{"label": f"{v.lstrip('=')}.env", "env_file": f"{v}.env",
                              "bench": run_doc(v, peak)} for v, peak in pairs])


@pytest.fixture(scope="module")
def tied():
    return assemble("ib-broken-on-one")  # eight equal IPoIB rails, sockets carry the data


def test_bench_decides_a_tie(tied):
    runs = bench_runs(compare(("=ibp26s0", 40.0), ("=ibp44s0", 20.0)), "cmp.json")
    doc = recommend(tied, runs)
    assert doc["env"]["NCCL_SOCKET_IFNAME"] == "=ibp26s0"
    [tie] = doc["ties"]
    assert tie["decided_by"] == "bench" and len(tie["measurements"]) == 2
    assert doc["reasons"]["NCCL_SOCKET_IFNAME"][0]["rule"] == "bench"


def test_all_rails_together_can_win(tied):
    together = tied_value(tied)
    runs = bench_runs(compare((together, 80.0), ("=ibp26s0", 40.0)), "cmp.json")
    doc = recommend(tied, runs)
    assert doc["env"]["NCCL_SOCKET_IFNAME"] == together and doc["ties"][0]["decided_by"] == "bench"


def tied_value(cluster):
    return recommend(cluster)["env"]["NCCL_SOCKET_IFNAME"]


def test_measurements_within_noise_do_not_decide(tied):
    runs = bench_runs(compare(("=ibp26s0", 40.0), ("=ibp44s0", 39.5)), "cmp.json")
    doc = recommend(tied, runs)
    assert doc["ties"][0]["decided_by"] is None and "within" in doc["ties"][0]["verdict"]
    assert doc["env"]["NCCL_SOCKET_IFNAME"].count(",") == 7  # still every rail


def test_one_measured_candidate_cannot_decide(tied):
    doc = recommend(tied, bench_runs(compare(("=ibp26s0", 40.0)), "cmp.json"))
    assert doc["ties"][0]["decided_by"] is None and "only" in doc["ties"][0]["verdict"]


def test_single_bench_runs_count_too(tied):
    runs = bench_runs(run_doc("=ibp60s0", 30.0), "a.json") + bench_runs(run_doc("=ibp94s0", 10.0), "b.json")
    assert recommend(tied, runs)["env"]["NCCL_SOCKET_IFNAME"] == "=ibp60s0"


def test_unmeasured_candidates_are_ignored(tied):
    runs = bench_runs(compare(("=eth7", 99.0), ("=ibp26s0", 10.0)), "cmp.json")
    doc = recommend(tied, runs)
    assert doc["ties"][0]["decided_by"] is None
    assert [m["value"] for m in doc["ties"][0]["measurements"]] == ["=ibp26s0"]


def test_unsafe_values_are_refused_not_written():
    cluster = assemble("roce-pair")
    for node in cluster["nodes"]:
        for iface in node["sections"]["network"]["data"]["interfaces"]:
            if iface["name"] == "bond0":
                iface["name"] = "bond$(id)"
    doc = recommend(cluster)
    assert "NCCL_SOCKET_IFNAME" not in doc["env"]
    assert doc["refused"][0]["var"] == "NCCL_SOCKET_IFNAME" and "'$'" in doc["refused"][0]["why"]
