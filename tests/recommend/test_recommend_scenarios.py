"""Scenario clusters assembled from recorded real hosts: golden env files and golden reasons.

Regenerate the goldens after an intended change with ``pytest tests/recommend --update-golden``
and review the diff.
"""

from __future__ import annotations

import json
import re

import pytest
from recommend_scenarios import CLUSTERS, assemble, scenario_names, summary

from ncclcheck.envformat import parse_env_text
from ncclcheck.recommend.document import recommend
from ncclcheck.recommend.text import render_output
from ncclcheck.rules import ALL_RULES

NEVER = re.compile(r"^(docker|virbr|veth|br-|lo$)")


@pytest.fixture(scope="module")
def docs():
    return {name: recommend(assemble(name)) for name in scenario_names()}


def test_there_are_scenarios():
    assert len(scenario_names()) >= 5


@pytest.mark.parametrize("name", scenario_names())
def test_golden_env_and_reasons(name, docs, update_golden):
    doc = docs[name]
    env_text = render_output(doc, "env")
    reasons = json.dumps(summary(doc), indent=2, sort_keys=True) + "\n"
    env_path, reasons_path = CLUSTERS / name / "nccl.env", CLUSTERS / name / "reasons.json"
    if update_golden:
        env_path.write_text(env_text)
        reasons_path.write_text(reasons)
    assert env_text == env_path.read_text(), f"{name}: nccl.env differs from the golden file"
    assert reasons == reasons_path.read_text(), f"{name}: reasons differ from the golden file"


@pytest.mark.parametrize("name", scenario_names())
def test_invariants(name, docs):
    doc = docs[name]
    sets = {v for r in ALL_RULES for v in r.sets}
    assert set(doc["env"]) <= sets
    assert doc["errors"] == []
    for var in doc["env"]:
        assert doc["reasons"][var], var
    ifname = doc["env"].get("NCCL_SOCKET_IFNAME")
    if ifname:
        assert ifname.startswith("=")
        assert not [n for n in ifname[1:].split(",") if NEVER.match(n)]
    # NCCL's own reader gets exactly the recommended values from the file.
    assert parse_env_text(render_output(doc, "env")) == doc["env"]


def test_h100_pair_uses_ib_and_drops_the_roce_front_end(docs):
    doc = docs["h100-ib-pair"]
    assert doc["env"]["NCCL_NET"] == "IB"
    hca = doc["env"]["NCCL_IB_HCA"]
    assert hca.startswith("=") and "mlx5_1:" not in hca and "mlx5_7:" not in hca
    assert hca.count(":1") == 8
    assert "NCCL_SOCKET_IFNAME" not in doc["env"]  # NCCL's default already picks the IPoIB rails
    assert any(o["var"] == "NCCL_IB_HCA" for o in doc["env_overrides"])


def test_broken_verbs_on_one_node_names_it_and_downgrades_nothing(docs):
    doc = docs["ib-broken-on-one"]
    assert not {"NCCL_NET", "NCCL_IB_DISABLE", "NCCL_IB_HCA"} & set(doc["env"])
    [finding] = [f for f in doc["findings"] if f["rule"] == "net-transport"]
    assert finding["severity"] == "error" and finding["hosts"] == ["h100-node-02"]
    assert "libibverbs" in finding["message"] and "leave it out" in finding["fix"]
    assert "NCCL_SOCKET_NTHREADS" not in doc["env"]  # IB stays the fabric once it is fixed
    tie = doc["ties"][0]
    assert tie["var"] == "NCCL_SOCKET_IFNAME" and len(tie["candidates"]) == 8
    assert "bench --hostfile HOSTS --compare" in tie["decide_with"]


def test_roce_pair_keeps_management_and_docker_out(docs):
    doc = docs["roce-pair"]
    assert doc["env"]["NCCL_SOCKET_IFNAME"] == "=bond0,bond0.100"
    assert "NCCL_IB_GID_INDEX" not in doc["env"]  # torch loads 2.21.5: NCCL picks the GID
    gid = [f for f in doc["findings"] if f["rule"] == "ib-roce-gid-index"]
    assert gid and "one fixed index" in gid[0]["message"]


def test_version_drift_names_the_outliers(docs):
    by_rule = {f["rule"]: f for f in docs["version-drift"]["findings"]}
    assert by_rule["cluster-nccl-version-mismatch"]["hosts"] == ["h100-node-03"]
    assert by_rule["cluster-driver-version-mismatch"]["hosts"] == ["h100-node-02"]
    assert by_rule["cluster-ib-ports-down"]["hosts"] == ["h100-node-03"]
    assert docs["version-drift"]["env"]["NCCL_IB_TIMEOUT"] == "20"  # 2.18.3 defaults to 18


def test_names_differ_lists_both_names(docs):
    assert docs["names-differ"]["env"]["NCCL_SOCKET_IFNAME"] == "=bond0,bond0.100,team0,team0.100"


def test_cloud_vm_pair_leaves_the_plugin_alone(docs):
    doc = docs["cloud-vm-pair"]
    assert "NCCL_NET" not in doc["env"] and "NCCL_SOCKET_NTHREADS" not in doc["env"]
    assert any(f["rule"] == "net-transport" and "plugin" in f["message"] for f in doc["findings"])


def test_nodes_needing_different_gid_indexes_conflict(docs):
    doc = docs["gid-conflict"]
    assert "NCCL_IB_GID_INDEX" not in doc["env"]
    conflict = {c["var"]: c for c in doc["conflicts"]}["NCCL_IB_GID_INDEX"]
    assert sorted(conflict["values"].values()) == ["3", "5"]
    assert "roce-node-01" in conflict["why"] and "roce-node-02" in conflict["why"]
    text = " ".join(line.lstrip("# ") for line in render_output(doc, "env").splitlines())
    assert "NOT SET NCCL_IB_GID_INDEX" in text
    # each proposal says why, and the stale /etc/nccl.conf value on node 2 is named
    assert "roce-node-02 configures NCCL_IB_GID_INDEX=3 now" in text


def test_missing_facts_withhold_instead_of_guessing(docs):
    doc = docs["partial-facts"]
    assert "NCCL_SOCKET_IFNAME" not in doc["env"]
    held = {w["var"]: w for w in doc["withheld"]}["NCCL_SOCKET_IFNAME"]
    assert "roce-node-02" in held["why"] and "Permission denied" in held["why"]
    assert any(s["rule"] == "net-socket-ifname" for s in doc["skipped"])
