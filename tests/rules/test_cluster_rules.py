"""Cluster rules beyond their pass/fail fixtures: the edge cases each one must get right."""

from __future__ import annotations

import importlib.util
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

_SPEC = importlib.util.spec_from_file_location(
    "cluster_rule_fixtures",
    Path(__file__).parent.parent / "fixtures" / "facts" / "make_cluster_rule_fixtures.py")
fx = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fx)


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
    from ncclcheck.recommend import merge

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
    nodes = [fx.node(f"n{i}", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port()))) for i in (1, 2)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {"NCCL_NET": "IB"}


def test_missing_dev_infiniband_counts_as_no_ib():
    nodes = [fx.node("n1", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port()))),
             fx.node("n2", nccl=fx.nccl(), ib=fx.ib(fx.device("mlx5_0", fx.port()), visible=False))]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"]["NCCL_NET"] == "Socket" and "/dev/infiniband" in finding["message"]
    assert finding["hosts"] == ["n2"] and finding["severity"] == "error"


def test_a_plugin_on_some_nodes_only_is_an_error_and_sets_nothing():
    nodes = [fx.node("n1", nccl=fx.nccl(plugin="/usr/lib/libnccl-net.so"), ib=fx.UNAVAILABLE_IB),
             fx.node("n2", nccl=fx.nccl(), ib=fx.UNAVAILABLE_IB)]
    [finding] = run(net_transport.RULE, nodes)
    assert finding["env"] == {} and finding["severity"] == "error" and finding["hosts"] == ["n2"]


def test_a_failed_ib_probe_skips_rather_than_guessing():
    broken = fx.node("n1", nccl=fx.nccl(), ib={"status": "error", "data": None,
                                               "errors": ["OSError: boom"]})
    assert "ib error" in missing_reads(net_transport.RULE, broken)
    assert missing_reads(net_transport.RULE, fx.node("n2", nccl=fx.nccl(), ib=fx.UNAVAILABLE_IB)) is None


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
