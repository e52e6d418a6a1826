"""net-socket-ifname: a host bridge (br0) that is the node's network is used, not an ERROR."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.rules import net_socket_ifname
from ncclcheck.rules.engine import evaluate

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")


def node(i, *ifaces):
    return fx.node(f"n{i}", network=fx.network(*ifaces), nccl=fx.nccl(loaded=False),
                   ib=fx.UNAVAILABLE_IB)


def run(nodes):
    result = evaluate([net_socket_ifname.RULE], nodes)
    assert result["errors"] == [] and result["skipped"] == []
    return result["findings"]


def br0(i, default=False):
    return fx.iface("br0", "bridge", f"198.18.1.{10 + i}", default=default, driver=None)


def enslaved(i):
    return fx.iface("eno1", driver="igb", master="br0")


def test_the_only_address_on_br0_is_no_error():
    nodes = [node(i, br0(i), enslaved(i), fx.iface("docker0", "docker", "172.17.0.1", 16, driver=None))
             for i in (1, 2)]
    assert [f for f in run(nodes) if f["severity"] == "error"] == []


def test_a_default_route_on_br0_is_used_beside_other_nics():
    nodes = [node(i, br0(i, default=True), enslaved(i),
                  fx.iface("virbr0", "bridge", "192.168.122.1", driver=None),
                  fx.iface("mgmt0", addr=f"198.19.{i}.2", speed=1000)) for i in (1, 2)]
    [finding] = run(nodes)
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=br0"} and finding["severity"] != "error"


def test_container_bridges_stay_out():
    nodes = [node(i, fx.iface("br-3f2a", "bridge", f"198.18.1.{10 + i}", default=True, driver=None))
             for i in (1, 2)]
    [finding] = run(nodes)
    assert finding["severity"] == "error" and finding["env"] == {}


# -- a second interface in the peers' subnet on one node (the netns fleet's planted fault) --------

def route(dev, dest="198.18.0.0/24"):
    return {"interface": dev, "destination": dest, "gateway": None, "metric": 0}


def with_routes(doc, *routes):
    doc["sections"]["netpath"] = {"status": "ok", "data": {"routes": list(routes)}}
    return doc


def test_a_duplicate_in_the_peer_subnet_is_pinned_out_exactly():
    nodes = [node(1, fx.iface("eth0", addr="198.18.0.2", default=True)),
             node(2, fx.iface("eth0", addr="198.18.0.3", default=True),
                  fx.iface("eth9", addr="198.18.0.246"))]
    [finding] = run(nodes)
    # '=eth0': exact, the interface both nodes use; never eth9, never the excluding '^' form
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert "n2's eth9 shares a subnet" in finding["message"] and finding["severity"] == "info"
    assert net_socket_ifname.select(nodes).duplicates == {"n2": ["eth9"]}


def test_without_a_shared_name_the_first_route_decides():
    nodes = [with_routes(node(1, fx.iface("ens1", addr="198.18.0.2", default=True)),
                         route("ens1")),
             with_routes(node(2, fx.iface("ens2", addr="198.18.0.3"),
                              fx.iface("ens3", addr="198.18.0.4", default=True)),
                         route("ens3"), route("ens2"))]
    [finding] = run(nodes)
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=ens1,ens3"}


def test_one_interface_per_node_in_the_subnet_sets_nothing():
    nodes = [node(i, fx.iface("eth0", addr=f"198.18.0.{i + 1}", default=True)) for i in (1, 2)]
    assert run(nodes) == []
