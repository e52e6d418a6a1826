"""Cluster rules beyond their pass/fail fixtures: the edge cases each one must get right."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.rules import (
    ib_hca_select,
    ib_roce_gid_index,
    ib_timeout_retry,
    net_socket_ifname,
    net_socket_threads,
    net_transport,
)
from ncclcheck.rules.base import Rule, Severity
from ncclcheck.rules.engine import evaluate, missing_reads

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")


def socket_node(name, *ifaces, **sections):
    return fx.node(name, network=fx.network(*ifaces), nccl=fx.nccl(loaded=False),
                   ib=fx.UNAVAILABLE_IB, **sections)


def run(rule, nodes):
    result = evaluate([rule], nodes)
    assert result["errors"] == [], result["errors"]
    return result["findings"]


# -- net-socket-ifname ---------------------------------------------------------------------------

def test_fastest_shared_subnet_wins_without_a_tie():
    nodes = [fx.node(f"n{i}", network=fx.two_eth(i), nccl=fx.nccl(loaded=False), ib=fx.UNAVAILABLE_IB)
             for i in (1, 2)]
    [finding] = run(net_socket_ifname.RULE, nodes)
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert "candidates" not in finding["evidence"]
    assert "mgmt0" in finding["message"]  # what the default would also have used


def test_names_that_differ_but_collide_need_per_node_values():
    # n1: eth0 shared, eth1 its own management; n2 the other way round.
    n1 = socket_node("n1", fx.iface("eth0", addr="198.18.1.11"), fx.iface("eth1", addr="198.19.1.2"))
    n2 = socket_node("n2", fx.iface("eth1", addr="198.18.1.12"), fx.iface("eth0", addr="198.19.2.2"))
    findings = run(net_socket_ifname.RULE, [n1, n2])
    assert {f["env"]["NCCL_SOCKET_IFNAME"]: f["hosts"] for f in findings} == {
        "=eth0": ["n1"], "=eth1": ["n2"]}
    from ncclcheck.recommend.merge import merge

    merged = merge(findings, [], ["n1", "n2"])
    assert merged["env"] == {} and merged["conflicts"][0]["var"] == "NCCL_SOCKET_IFNAME"
    assert "nodes need different values" in merged["conflicts"][0]["why"]


def test_names_that_differ_without_collision_share_one_list():
    n1 = socket_node("n1", fx.iface("ens5", addr="198.18.1.11"), fx.iface("mgmt0", addr="198.19.1.2"))
    n2 = socket_node("n2", fx.iface("eth0", addr="198.18.1.12"), fx.iface("mgmt0", addr="198.19.2.2"))
    [finding] = run(net_socket_ifname.RULE, [n1, n2])
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=ens5,eth0"}


def test_an_address_on_two_nodes_is_never_used():
    same = lambda: fx.iface("ens9", addr="198.18.9.1", speed=400000)
    n1 = socket_node("n1", fx.iface("eth0", addr="198.18.1.11"), same())
    n2 = socket_node("n2", fx.iface("eth0", addr="198.18.1.12"), same())
    [finding] = run(net_socket_ifname.RULE, [n1, n2])
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    rejected = finding["evidence"]["network.interfaces"]["n1"]["rejected"]
    assert "same address" in rejected["ens9"]


def test_no_shared_subnet_falls_back_to_the_default_route_with_a_warning():
    n1 = socket_node("n1", fx.iface("eth0", addr="198.18.1.11", default=True),
                     fx.iface("eth1", addr="198.18.7.11"))
    n2 = socket_node("n2", fx.iface("eth0", addr="198.18.2.12", default=True),
                     fx.iface("eth1", addr="198.18.8.12"))
    [finding] = run(net_socket_ifname.RULE, [n1, n2])
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert finding["severity"] == "warning" and "route" in finding["message"]


def test_no_usable_interface_is_an_error_without_a_value():
    n1 = socket_node("n1", fx.iface("lo", "loopback", "127.0.0.1", 8),
                     fx.iface("docker0", "docker", "172.17.0.1", 16))
    [finding] = run(net_socket_ifname.RULE, [n1, socket_node("n2", fx.iface("eth0", up=False))])
    assert finding["severity"] == "error" and finding["env"] == {}


def test_equal_links_tie_only_when_sockets_carry_the_data():
    nodes = [fx.node(f"n{i}", network=fx.two_eth(i, fast=100000, slow=100000),
                     nccl=fx.nccl(loaded=False), ib=fx.UNAVAILABLE_IB) for i in (1, 2)]
    [finding] = run(net_socket_ifname.RULE, nodes)
    assert finding["evidence"]["candidates"] == {"NCCL_SOCKET_IFNAME": ["=eth0", "=eth1"]}
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0,eth1"}
    with_ib = [fx.node(f"n{i}", network=fx.two_eth(i, fast=100000, slow=100000), nccl=fx.nccl(),
                       ib=fx.ib(fx.device("mlx5_0", fx.port()))) for i in (1, 2)]
    [finding] = run(net_socket_ifname.RULE, with_ib)
    assert "candidates" not in finding["evidence"] and "IB carries the data" in finding["message"]


def test_ipv6_only_shared_subnet_qualifies():
    def v6(name, i):
        iface = fx.iface(name)
        iface["ipv6"] = [{"address": f"fd00:1::{i}", "prefix": 64, "subnet": "fd00:1::/64",
                          "scope": "global"},
                         {"address": f"fe80::{i}", "prefix": 64, "subnet": "fe80::/64", "scope": "link"}]
        return iface
    n1 = socket_node("n1", v6("eth0", 1), fx.iface("mgmt0", addr="198.19.1.2"))
    n2 = socket_node("n2", v6("eth0", 2), fx.iface("mgmt0", addr="198.19.2.2"))
    [finding] = run(net_socket_ifname.RULE, [n1, n2])
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}


# -- net-transport -------------------------------------------------------------------------------

def test_ib_everywhere_forces_ib():
    nodes = [fx.node(f"n{i}", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port())), env=fx.env())
             for i in (1, 2)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {"NCCL_NET": "IB"}


def test_missing_dev_infiniband_counts_as_no_ib():
    nodes = [fx.node("n1", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port())), env=fx.env()),
             fx.node("n2", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port()), visible=False),
                     env=fx.env())]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {} and "/dev/infiniband" in finding["message"]
    assert finding["hosts"] == ["n2"] and finding["severity"] == "error"


def test_a_plugin_on_some_nodes_only_is_one_error_and_sets_nothing():
    """cluster-net-plugin-partial names it; net-transport says nothing more (issue 23)."""
    from ncclcheck.rules import cluster_net_plugin_partial
    nodes = [fx.node("n1", nccl=fx.nccl(plugin="/usr/lib/libnccl-net.so"), ib=fx.UNAVAILABLE_IB,
                     env=fx.env()),
             fx.node("n2", nccl=fx.nccl(), ib=fx.UNAVAILABLE_IB, env=fx.env())]
    for node in nodes:
        node["sections"]["nccl"]["data"].setdefault("libraries", [{"path": "/usr/lib/libnccl.so.2"}])
    assert run(net_transport.RULE, nodes) == []
    findings = evaluate([net_transport.RULE, cluster_net_plugin_partial.RULE], nodes)["findings"]
    [finding] = findings
    assert finding["rule"] == "cluster-net-plugin-partial" and finding["severity"] == "error"
    assert finding["env"] == {}


def test_nccl_net_ib_reason_says_it_bypasses_plugins():
    nodes = [fx.node(f"n{i}", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port())), env=fx.env())
             for i in (1, 2)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {"NCCL_NET": "IB"}
    assert "bypasses any net plugin installed later" in finding["message"]


def test_a_failed_ib_probe_skips_rather_than_guessing():
    broken = fx.node("n1", nccl=fx.nccl(), ib={"status": "error", "data": None,
                                               "errors": ["OSError: boom"]})
    assert "ib error" in missing_reads(net_transport.RULE, broken)
    assert missing_reads(net_transport.RULE, fx.node("n2", nccl=fx.nccl(), ib=fx.UNAVAILABLE_IB,
                                                     env=fx.env())) is None


# -- ib-hca-select, ib-roce-gid-index, ib-timeout-retry --------------------------------------------

def ib_nodes(*devices, n=2, version="2.21.5", env=None, network=None):
    return [fx.node(f"n{i}", ib=fx.ib(*devices), nccl=fx.nccl(version), env=fx.env(**(env or {})),
                    network=network or fx.two_eth(i)) for i in range(1, n + 1)]


def test_prefix_trap_alone_asks_for_an_exact_list():
    devs = [fx.device(f"mlx5_{i}", fx.port()) for i in (0, 1, 10)]
    [finding] = run(ib_hca_select.RULE, ib_nodes(*devs, env={"NCCL_IB_HCA": "mlx5_0,mlx5_1"}))
    assert finding["env"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_10:1"}
    assert "mlx5_10" in finding["message"]


def test_slower_front_end_port_is_left_out():
    devs = [fx.device("mlx5_0", fx.port(rate=400)), fx.device("mlx5_1", fx.port(rate=400)),
            fx.device("mlx5_2", fx.port(rate=100))]
    [finding] = run(ib_hca_select.RULE, ib_nodes(*devs))
    assert finding["env"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}


def test_roce_gid_index_below_2_21():
    roce = fx.device("mlx5_0", fx.port(layer="Ethernet", rate=100, netdev="eth0", gid_index=3))
    [finding] = run(ib_roce_gid_index.RULE, ib_nodes(roce, version="2.19.3"))
    assert finding["env"] == {"NCCL_IB_GID_INDEX": "3"}
    no_v2 = fx.device("mlx5_0", fx.port(layer="Ethernet", rate=100, netdev="eth0", gid_index=None))
    [finding] = run(ib_roce_gid_index.RULE, ib_nodes(no_v2, version="2.19.3"))
    assert finding["severity"] == "error" and finding["env"] == {}
    assert run(ib_roce_gid_index.RULE, ib_nodes(roce, version="2.21.5")) == []


@pytest.mark.parametrize("version, nodes, expected", [
    ("2.12.12", 2, "20"), ("2.18.3", 2, "20"), ("2.23.4", 2, None), ("2.23.4", 128, "22"),
])
def test_ib_timeout_by_version_and_size(version, nodes, expected):
    found = run(ib_timeout_retry.RULE, ib_nodes(fx.device("mlx5_0", fx.port()), n=nodes,
                                                version=version))
    assert (found[0]["env"].get("NCCL_IB_TIMEOUT") if found else None) == expected


def test_ib_timeout_on_one_node_says_node_not_nodes():
    [finding] = run(ib_timeout_retry.RULE, ib_nodes(fx.device("mlx5_0", fx.port()), n=1,
                                                    version="2.18.3"))
    assert "right for 1 node" in finding["message"] and "1 nodes" not in finding["message"]


def test_lowered_retry_count_is_raised_back():
    [finding] = run(ib_timeout_retry.RULE, ib_nodes(fx.device("mlx5_0", fx.port()),
                                                    version="2.23.4", env={"NCCL_IB_RETRY_CNT": "3"}))
    assert finding["env"] == {"NCCL_IB_RETRY_CNT": "7"} and finding["severity"] == "warning"


# -- net-socket-threads --------------------------------------------------------------------------

def threads_nodes(speed=100000, driver="mlx5_core", env=None):
    return [fx.node(f"n{i}", network=fx.network(
        fx.iface("eth0", addr=f"198.18.1.{10 + i}", speed=speed, driver=driver),
        fx.iface("mgmt0", addr=f"198.19.{i}.2", speed=1000)),
        nccl=fx.nccl(loaded=False), ib=fx.UNAVAILABLE_IB, env=fx.env(**(env or {})))
        for i in (1, 2)]


def test_socket_threads_scale_with_speed_and_stay_within_64():
    [f25] = run(net_socket_threads.RULE, threads_nodes(25000))
    [f100] = run(net_socket_threads.RULE, threads_nodes(100000))
    for f in (f25, f100):
        assert int(f["env"]["NCCL_SOCKET_NTHREADS"]) * int(f["env"]["NCCL_NSOCKS_PERTHREAD"]) <= 64
    assert f100["env"] == {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}
    assert run(net_socket_threads.RULE, threads_nodes(10000)) == []


def test_socket_threads_leave_aws_and_gcp_nics_to_nccl():
    assert run(net_socket_threads.RULE, threads_nodes(100000, driver="ena")) == []
    [warn] = run(net_socket_threads.RULE, threads_nodes(
        100000, driver="gve", env={"NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "8"}))
    assert warn["severity"] == "warning" and warn["env"] == {}


# -- engine: optional reads ------------------------------------------------------------------------

def test_optional_reads_accept_an_absent_subsystem_only():
    rule = Rule(id="test-optional", title="t", severity=Severity.INFO, reads=("ib.devices?",),
                sets=(), why="w", docs="https://x", fix="f", check=lambda n: [])
    assert missing_reads(rule, fx.node("n", ib=fx.UNAVAILABLE_IB)) is None
    assert missing_reads(rule, fx.node("n", ib=fx.ok({}))) is None
    assert "not collected" in missing_reads(rule, fx.node("n"))
    assert "error" in missing_reads(rule, fx.node("n", ib={"status": "error", "errors": ["x"]}))


# -- ib-roce-gid-index: one value for every port of a node ---------------------------------------

def roce_port(gid_index, netdev="eth0"):
    return fx.port(layer="Ethernet", rate=100, netdev=netdev, gid_index=gid_index)


def test_roce_ports_of_one_node_at_different_indexes_set_nothing():
    devs = (fx.device("mlx5_0", roce_port(3)), fx.device("mlx5_1", roce_port(5, "eth1")))
    [finding] = run(ib_roce_gid_index.RULE, ib_nodes(*devs, version="2.19.3"))
    assert finding["env"] == {} and finding["severity"] == "error"
    assert "mlx5_0:1=3" in finding["message"] and "mlx5_1:1=5" in finding["message"]
    assert finding["hosts"] == ["n1", "n2"]


def test_roce_nodes_needing_different_indexes_conflict_in_the_merge():
    from ncclcheck.recommend.merge import merge

    n1, n2 = ib_nodes(fx.device("mlx5_0", roce_port(3)), version="2.19.3")
    n2["sections"]["ib"] = fx.ib(fx.device("mlx5_0", roce_port(5)))
    findings = run(ib_roce_gid_index.RULE, [n1, n2])
    assert {f["env"]["NCCL_IB_GID_INDEX"]: f["hosts"] for f in findings} == {"3": ["n1"], "5": ["n2"]}
    merged = merge(findings, [], ["n1", "n2"])
    assert merged["env"] == {} and merged["conflicts"][0]["var"] == "NCCL_IB_GID_INDEX"


# -- net-transport: IB on some nodes, RoCE on others ----------------------------------------------

def test_ib_and_roce_nodes_cannot_reach_each_other():
    nodes = [fx.node(n, nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", port)), env=fx.env())
             for n, port in (("n1", fx.port()), ("n2", fx.port()), ("n3", roce_port(3)))]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {} and "leave out n3" in finding["fix"]
    assert finding["severity"] == "error" and finding["hosts"] == ["n3"]
    assert "RoCE on n3" in finding["message"] and "InfiniBand on n1, n2" in finding["message"]


def test_ib_beside_roce_on_every_node_is_still_ib():
    both = lambda: fx.ib(fx.device("mlx5_0", fx.port()), fx.device("mlx5_1", roce_port(3)))
    nodes = [fx.node(f"n{i}", nccl=fx.nccl(), ib=both(), env=fx.env()) for i in (1, 2)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {"NCCL_NET": "IB"}


# -- ib-timeout-retry: what the nodes already configure -------------------------------------------

@pytest.mark.parametrize("configured, expected, in_message", [
    ({"n1": "14"}, "20", "n1=14"),           # one node lowers it: everyone gets the target
    ({"n1": "23"}, "23", "already configured on n1"),  # a raised value is kept, never lowered
    ({"n1": "20", "n2": "20"}, None, None),  # every node already has the target
    ({"n1": "0"}, None, None),               # 0 means "wait forever" in verbs: left alone
])
def test_ib_timeout_counts_configured_values(configured, expected, in_message):
    nodes = ib_nodes(fx.device("mlx5_0", fx.port()), version="2.23.4")
    for node in nodes:
        if node["hostname"] in configured:
            node["sections"]["env"] = fx.env(NCCL_IB_TIMEOUT=configured[node["hostname"]])
    found = run(ib_timeout_retry.RULE, nodes)
    assert (found[0]["env"].get("NCCL_IB_TIMEOUT") if found else None) == expected
    if in_message:
        assert in_message in found[0]["message"]


def test_ib_timeout_from_a_config_file_counts_too():
    nodes = ib_nodes(fx.device("mlx5_0", fx.port()), version="2.23.4")
    nodes[1]["sections"]["nccl"] = fx.nccl("2.23.4", conf={"NCCL_IB_TIMEOUT": "12"})
    [finding] = run(ib_timeout_retry.RULE, nodes)
    assert finding["env"] == {"NCCL_IB_TIMEOUT": "20"} and finding["severity"] == "warning"


# -- net-socket-threads: the product NCCL really computes -----------------------------------------

@pytest.mark.parametrize("driver, env, over", [
    ("mlx5_core", {"NCCL_SOCKET_NTHREADS": "32", "NCCL_NSOCKS_PERTHREAD": "8"}, "16 x 8"),
    ("ena", {"NCCL_NSOCKS_PERTHREAD": "40"}, "2 x 40"),  # ENA's automatic 2 threads
    ("mlx5_core", {"NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "4"}, None),
    ("mlx5_core", {"NCCL_NSOCKS_PERTHREAD": "128"}, None),  # no helper threads: no sockets
])
def test_socket_threads_product_as_nccl_computes_it(driver, env, over):
    found = run(net_socket_threads.RULE, threads_nodes(10000, driver=driver, env=env))
    if over is None:
        assert found == []
    else:
        [warn] = found
        assert warn["severity"] == "warning" and over in warn["message"]


# -- cloud-efa-plugin-owned: the whole recommendation leaves the plugin's variables alone ----------

def efa_nodes(**env):
    ena = lambda i: fx.network(fx.iface("ens32", addr=f"198.18.4.{10 + i}", speed=100000,
                                        driver="ena", default=True))
    return [fx.node(f"n{i}", network=ena(i), nccl=fx.nccl(plugin=fx.OFI, plugins=[fx.OFI]),
                    ib=fx.efa_ib, env=fx.env(**env), gpu=fx.gpu()) for i in (1, 2)]


def test_efa_cluster_sets_nothing_the_plugin_owns():
    from ncclcheck.cluster import cluster_document
    from ncclcheck.recommend.document import recommend
    from ncclcheck.rules.cloud_efa_plugin_owned import PLUGIN_OWNED

    doc = recommend(cluster_document(efa_nodes(NCCL_BUFFSIZE="8388608", NCCL_SOCKET_NTHREADS="4",
                                               NCCL_NET="AWS Libfabric"), [], source="test"))
    assert not set(doc["env"]) & set(PLUGIN_OWNED)
    assert "NCCL_NET" not in doc["env"] and "NCCL_IB_TIMEOUT" not in doc["env"]
    [owned] = [f for f in doc["findings"] if f["rule"] == "cloud-efa-plugin-owned"]
    assert "aws-ofi-nccl sets per instance type: NCCL_BUFFSIZE=8388608" in owned["message"]
    assert "EFA guidance" in owned["message"] and "NCCL_SOCKET_NTHREADS=4" in owned["message"]
    assert "NCCL_NET" not in owned["message"]  # choosing the plugin's network is the user's call


# -- the mismatch helper -------------------------------------------------------------------------

def test_mismatch_names_outliers_and_ignores_unknown_values():
    from ncclcheck.rules.cluster_driver_version_mismatch import RULE

    nodes = [fx.node(f"n{i:02d}", gpu=fx.gpu(driver="535.129.03")) for i in range(12)]
    nodes += [fx.node(f"odd{i}", gpu=fx.gpu(driver=f"550.{i}")) for i in range(9)]
    nodes.append(fx.node("blank", gpu=fx.gpu(driver=None)))
    [finding] = run(RULE, nodes)
    assert finding["hosts"] == [f"odd{i}" for i in range(9)]
    assert "most nodes have 535.129.03" in finding["message"] and finding["message"].endswith("and more")
    assert "blank" not in finding["evidence"]["gpu.driver_version"]


def test_a_configured_gid_index_that_points_elsewhere_is_named():
    nodes = ib_nodes(fx.device("mlx5_0", roce_port(5)), version="2.19.3")
    nodes[0]["sections"]["nccl"] = fx.nccl("2.19.3", conf={"NCCL_IB_GID_INDEX": "3"})
    [finding] = run(ib_roce_gid_index.RULE, nodes)
    assert finding["env"] == {"NCCL_IB_GID_INDEX": "5"} and finding["severity"] == "error"
    assert "n1 (NCCL_IB_GID_INDEX=3, its entry is 5)" in finding["message"]
