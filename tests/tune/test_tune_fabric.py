"""IB/RoCE candidates from recorded real hosts (replayed through the rooted reader)."""

from __future__ import annotations

import pytest

from ncclcheck.cluster import cluster_document
from ncclcheck.probe import collect_facts, open_host
from ncclcheck.recommend.document import recommend
from ncclcheck.tune.candidates import first_stage, transport_for


def two_of(recording):
    facts = collect_facts(open_host("/", f"tests/fixtures/hosts/{recording}"))
    other = {**facts, "hostname": "twin"}
    return cluster_document([facts, other], [], "test", with_differences=False)


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def test_roce_gid_index_candidates_are_the_v2_ipv4_entry_and_unset():
    doc = two_of("a100-roce-bond")
    assert transport_for(doc["nodes"]) == "IB"
    rec = recommend(doc, [])
    cands = first_stage(rec, doc["nodes"], "nccl", "IB")
    gids = {c["env"].get("NCCL_IB_GID_INDEX") for c in cands if c["id"] != "baseline"}
    assert gids == {None, "3"}
    assert all(c["measure"] for c in cands)


def test_hca_candidates_are_the_rules_list_and_every_active_port_exactly():
    doc = two_of("h100-ib-8gpu")
    rec = recommend(doc, [])
    cands = first_stage(rec, doc["nodes"], "nccl", "IB")
    hcas = [c["env"]["NCCL_IB_HCA"] for c in cands if "NCCL_IB_HCA" in c["env"]]
    assert rec["env"]["NCCL_IB_HCA"] in hcas and len(set(hcas)) == 2
    assert all(h.startswith("=") for h in hcas)  # exact: mlx5_1 must not catch mlx5_10
    # gloo never loads libnccl: the HCA alternatives are listed, not measured
    gloo = first_stage(rec, doc["nodes"], "gloo", "IB")
    alt = [c for c in gloo if c["env"].get("NCCL_IB_HCA") not in (None, rec["env"]["NCCL_IB_HCA"])]
    assert alt and not any(c["measure"] for c in alt)
