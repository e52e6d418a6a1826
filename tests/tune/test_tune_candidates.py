"""The candidate set: baseline, the rules' env, ties, every shared interface; never a trap;
variables the backend ignores are listed and not measured."""

from __future__ import annotations

import json

from tunefix import cluster

from ncclcheck.recommend.document import recommend
from ncclcheck.tune.candidates import (backend_for, first_stage, holder, shared_interfaces,
                                       socket_stage, transport_for)

TRAPS = ("mgmt0", "docker0", "lo")


def test_shared_interfaces_are_the_three_links_alone():
    nodes = cluster()["nodes"]
    values = [v for _, v in shared_interfaces(nodes)]
    assert values == ["=eno1", "=ens1f0", "=ens2f0"]


def test_first_stage_holds_baseline_rules_ties_and_links_once_each():
    doc = cluster()
    rec = recommend(doc, [])
    cands = first_stage(rec, doc["nodes"], "gloo")
    ids = [c["id"] for c in cands]
    assert ids == ["baseline", "recommended", "NCCL_SOCKET_IFNAME==eno1",
                   "NCCL_SOCKET_IFNAME==ens1f0", "NCCL_SOCKET_IFNAME==ens2f0"]
    assert cands[0]["env"] == {}
    assert cands[1]["env"] == rec["env"]
    ens1 = cands[3]
    # the tie and the shared subnet proposed the same env: merged, both sources kept
    assert len(ens1["sources"]) == 2 and ens1["env"]["NCCL_SOCKET_IFNAME"] == "=ens1f0"
    assert all(c["measure"] for c in cands)
    for cand in cands:
        assert not any(t in str(cand["env"]) for t in TRAPS), cand


def test_gloo_ignores_socket_threads_nccl_measures_them():
    gloo = socket_stage({"NCCL_SOCKET_IFNAME": "=ens1f0"}, "gloo", "Socket")
    assert gloo and not any(c["measure"] for c in gloo)
    assert all("gloo ignores" in c["not_measured"] for c in gloo)
    nccl = socket_stage({"NCCL_SOCKET_IFNAME": "=ens1f0"}, "nccl", "Socket")
    assert [c["measure"] for c in nccl] == [True] * 3
    for cand in nccl:
        threads, socks = int(cand["env"]["NCCL_SOCKET_NTHREADS"]), int(cand["env"]["NCCL_NSOCKS_PERTHREAD"])
        assert threads <= 16 and threads * socks <= 64
        assert cand["env"]["NCCL_SOCKET_IFNAME"] == "=ens1f0" and cand["stage"] == 2
    assert socket_stage({}, "nccl", "IB") == []


def test_backend_and_transport_from_facts():
    assert backend_for(cluster()["nodes"]) == "gloo"
    assert backend_for(cluster(gpus=8)["nodes"]) == "nccl"
    assert backend_for(cluster(gpus=8)["nodes"], "gloo") == "gloo"
    assert transport_for(cluster()["nodes"]) == "Socket"


def test_one_link_the_rules_env_merges_and_is_still_found():
    doc = cluster(links=("eth0",))
    rec = recommend(doc, [])
    cands = first_stage(rec, doc["nodes"], "gloo")
    rules = holder(cands, rec["env"])
    assert rules in {c["id"] for c in cands}
    assert len({json.dumps(c["env"], sort_keys=True) for c in cands}) == len(cands)
