"""net-transport (issue 17): no setting ever downgrades a working fabric; broken, inconclusive
and mismatched nodes are named with their fix instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.cluster import cluster_document
from ncclcheck.recommend.document import recommend
from ncclcheck.rules import net_socket_threads, net_transport
from ncclcheck.rules.engine import evaluate

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")

DOWNGRADE = ("NCCL_NET", "NCCL_IB_DISABLE")


def run(rule, nodes):
    result = evaluate([rule], nodes)
    assert result["errors"] == [] and result["skipped"] == [], result
    return result["findings"]


def ib_node(name, i, loaded=True, **env):
    return fx.node(name, network=fx.two_eth(i), nccl=fx.nccl(loaded=loaded), env=fx.env(**env),
                   ib=fx.ib(fx.device("mlx5_0", fx.port()), fx.device("mlx5_1", fx.port())))


def inconclusive(node):
    node["sections"]["nccl"]["data"]["ibverbs"] = {
        "loaded": None, "path": None, "error": "verbs query: the native helper timed out"}
    return node


def whole(nodes):
    return recommend(cluster_document(nodes, [], source="test"))


def test_hazard_1_inconclusive_libibverbs_sets_nothing_and_names_the_node():
    nodes = [ib_node("n1", 1), inconclusive(ib_node("n2", 2))]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["severity"] == "warning" and finding["env"] == {}
    assert finding["hosts"] == ["n2"] and "could not tell" in finding["message"]
    assert "ibv_devices" in finding["fix"]
    doc = whole(nodes)
    assert not set(DOWNGRADE) & set(doc["env"])
    assert "NCCL_SOCKET_NTHREADS" not in doc["env"]  # sockets do not carry the data


def efa_node(name, i, plugin):
    ofi = [fx.OFI] if plugin else []
    return fx.node(name, network=fx.network(fx.iface("ens32", addr=f"198.18.4.{10 + i}",
                                                    driver="ena", default=True)),
                   nccl=fx.nccl(plugin=fx.OFI if plugin else None, plugins=ofi),
                   ib=fx.efa_ib, env=fx.env(), gpu=fx.gpu())


def test_hazard_2_efa_without_the_plugin_gets_the_plugin_not_sockets():
    doc = whole([efa_node("n1", 1, False), efa_node("n2", 2, False)])
    assert not set(DOWNGRADE) & set(doc["env"])
    assert not [f for f in doc["findings"] if f["rule"] == "net-transport"]
    [efa] = [f for f in doc["findings"] if f["rule"] == "cloud-efa-plugin-owned"]
    assert efa["severity"] == "error" and efa["hosts"] == ["n1", "n2"]
    assert "aws-ofi-nccl" in efa["message"] and "Install aws-ofi-nccl" in efa["fix"]


def test_hazard_3_one_broken_node_is_named_not_forced_on_everyone():
    nodes = [ib_node("n1", 1), ib_node("n2", 2), ib_node("n3", 3, loaded=False)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["severity"] == "error" and finding["env"] == {} and finding["hosts"] == ["n3"]
    assert "n3: libibverbs does not load" in finding["message"]
    assert "leave it out" in finding["fix"] and "NCCL_NET=Socket yourself" in finding["fix"]
    assert not set(DOWNGRADE) & set(whole(nodes)["env"])


def test_a_node_without_rdma_beside_ib_nodes_is_named():
    plain = fx.node("cpu1", network=fx.two_eth(3), nccl=fx.nccl(loaded=False),
                    ib=fx.UNAVAILABLE_IB, env=fx.env())
    [finding] = run(net_transport.RULE, [ib_node("n1", 1), plain])
    assert finding["hosts"] == ["cpu1"] and "no InfiniBand or RoCE device" in finding["message"]


def test_rdma_broken_everywhere_is_a_warning_without_a_setting():
    nodes = [ib_node("n1", 1, loaded=False), ib_node("n2", 2, loaded=False)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["severity"] == "warning" and finding["env"] == {}
    # sockets do carry the data here, so their tuning still applies
    assert run(net_socket_threads.RULE, nodes)[0]["env"]["NCCL_SOCKET_NTHREADS"] == "4"


@pytest.mark.parametrize("configured", [{"NCCL_IB_DISABLE": "1"}, {"NCCL_NET": "socket"}])
def test_a_downgrade_the_user_configured_is_kept_and_named(configured):
    nodes = [ib_node("n1", 1, **configured), ib_node("n2", 2)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {} and finding["severity"] == "warning"  # no NCCL_NET=IB clash
    assert finding["hosts"] == ["n1"] and "turns it off" in finding["message"]


def test_efa_devices_are_not_ib_devices():
    assert net_transport.ib_state(efa_node("n1", 1, True))[0] == net_transport.NONE
