"""The twelve rules for the failures users hit after the basics: each one registered, each fail
fixture node (or cluster) firing with the severity its case deserves, and the cases that must
stay quiet (a single-node job in a bridged container, a routable veth, an unreadable firewall)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ncclcheck.rules import ALL_RULES
from ncclcheck.rules.engine import evaluate

FACTS = Path(__file__).parent.parent / "fixtures" / "facts"
BY_ID = {r.id: r for r in ALL_RULES}

#: rule -> {host: severity} its fail fixture must give (node rules: node by node).
EXPECTED = {
    "net-same-subnet-nics": {"node2": "warning"},
    "net-rp-filter-strict": {"node2": "warning", "node-if": "warning"},
    "net-firewall-blocks-peers": {"node1": "error", "node-nft": "error", "node-ufw": "warning",
                                  "node-ufw-chains": "warning"},
    "cluster-container-bridged": {"gpu01": "error", "gpu02": "error"},
    "host-hostname-loopback": {"gpu01": "warning", "gpu02": "error"},
    "gpu-nic-affinity": {"a100-roce-bond": "warning"},
    "cluster-net-plugin-partial": {"gpu01": "error", "gpu02": "error"},
    "platform-acs-iommu": {"bare-acs": "error", "bare-iommu": "warning", "vm-acs": "warning"},
    "platform-fabric-not-ready": {"gpu-operator-2511": "error", "azhpc-images-506": "error",
                                  "hgx-fm-failed": "error"},
    "cluster-rail-cross-nic": {"gpu01": "warning", "gpu02": "warning"},
    "cluster-ranks-split-netns": {"pod-gpu0": "warning", "pod-gpu1": "warning", "dgx-07": "error"},
    "gpu-cuda-driver-too-old": {"old-major": "error", "compat-unused": "error"},
}


def load(rule_id: str, kind: str) -> list[dict]:
    return json.loads((FACTS / f"{rule_id}.{kind}.json").read_text())


def severities(rule_id: str, nodes: list[dict]) -> dict[str, str]:
    rule = BY_ID[rule_id]
    groups = [[n] for n in nodes] if rule.scope == "node" else [nodes]
    out = {}
    for group in groups:
        for f in evaluate([rule], group)["findings"]:
            for host in f["hosts"]:
                out[host] = f["severity"]
    return out


@pytest.mark.parametrize("rule_id", sorted(EXPECTED))
def test_registered_and_fail_fixture_fires_with_its_severity(rule_id):
    assert rule_id in BY_ID, f"{rule_id} is not in the registry"
    assert severities(rule_id, load(rule_id, "fail")) == EXPECTED[rule_id]
    assert severities(rule_id, load(rule_id, "pass")) == {}


def test_bridged_container_is_quiet_for_one_node_and_for_a_routable_veth():
    nodes = load("cluster-container-bridged", "fail")
    assert severities("cluster-container-bridged", nodes[:1]) == {}
    routable = copy.deepcopy(nodes)
    for i, node in enumerate(routable):  # the veth is the real network: peers share its subnet
        addr = node["sections"]["network"]["data"]["interfaces"][1]["ipv4"][0]
        addr.update(address=f"198.18.0.{i + 2}", prefix=24, subnet="198.18.0.0/24")
    assert severities("cluster-container-bridged", routable) == {}


def test_each_finding_says_what_to_do():
    for rule_id in EXPECTED:
        rule = BY_ID[rule_id]
        nodes = load(rule_id, "fail")
        groups = [[n] for n in nodes] if rule.scope == "node" else [nodes]
        for group in groups:
            for f in evaluate([rule], group)["findings"]:
                assert f["fix"] and f["message"] and f["docs"].startswith("https://")


def test_fixes_name_the_system_change_or_the_variable():
    [fw] = evaluate([BY_ID["net-firewall-blocks-peers"]],
                    load("net-firewall-blocks-peers", "fail")[:1])["findings"]
    assert "-s 198.18.0.0/24" in fw["fix"] and "198.18.1.0/24" in fw["fix"]
    [vm] = evaluate([BY_ID["platform-acs-iommu"]], load("platform-acs-iommu", "fail")[2:])["findings"]
    assert "ATS" in vm["fix"]
    [rail] = evaluate([BY_ID["cluster-rail-cross-nic"]], load("cluster-rail-cross-nic", "fail"))[
        "findings"]
    assert rail["env"] == {"NCCL_CROSS_NIC": "0"}
    # advice only where a variable could hurt: no rule here disables a transport or NVLS by itself
    for rule_id in EXPECTED:
        assert not set(BY_ID[rule_id].sets) - {"NCCL_CROSS_NIC"}


def test_split_netns_fix_is_version_gated():
    """NCCL_IPC_USE_ABSTRACT_SOCKET exists from 2.29.2: not offered to NCCL 2.21.5."""
    nodes = load("cluster-ranks-split-netns", "fail")
    [err] = [f for f in evaluate([BY_ID["cluster-ranks-split-netns"]], nodes)["findings"]
             if f["severity"] == "error"]
    assert "only from NCCL 2.29.2 (here: 2.21.5)" in err["fix"]
    assert "NCCL_CUMEM_ENABLE=0" in err["fix"]
    newer = copy.deepcopy(nodes)
    for n in newer[2:]:
        n["sections"]["nccl"]["data"]["torch_loads"]["version"] = "2.29.2"
    [err] = [f for f in evaluate([BY_ID["cluster-ranks-split-netns"]], newer)["findings"]
             if f["severity"] == "error"]
    assert "NCCL_IPC_USE_ABSTRACT_SOCKET=0 with a /tmp" in err["fix"]


def test_forward_compatibility_on_the_library_path_is_info():
    nodes = load("gpu-cuda-driver-too-old", "fail")
    [unused] = evaluate([BY_ID["gpu-cuda-driver-too-old"]], nodes[1:])["findings"]
    assert "export LD_LIBRARY_PATH=/usr/local/cuda-12.4/compat:$LD_LIBRARY_PATH" in unused["fix"]
    used = copy.deepcopy(nodes[1])
    used["sections"]["env"]["data"]["other"]["LD_LIBRARY_PATH"] = "/usr/local/cuda/compat:/usr/lib"
    [f] = evaluate([BY_ID["gpu-cuda-driver-too-old"]], [used])["findings"]
    assert f["severity"] == "info" and "forward compatibility" in f["message"]
