"""net-socket-ifname: a host bridge (br0) that is the node's network is used, not an ERROR."""

from __future__ import annotations

import ipaddress
import json
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


# -- routed hosts: a /32 (/128) on the NIC, every peer through the gateway (Hetzner, OVH, BGP) --

scenarios = load(Path("tests/recommend/recommend_scenarios.py"), "recommend_scenarios_23")


def routed(i, address=None, routes=None, v6=None):
    """The recorded cloud VM (tests/fixtures/hosts/cloud-vm-1nic, ens5 with the default route)
    as node i of a routed fleet: its address alone on ens5, the gateway on-link."""
    doc = json.loads(scenarios.replayed("cloud-vm-1nic"))
    doc["hostname"] = f"vm{i}"
    [ens5] = [n for n in doc["sections"]["network"]["data"]["interfaces"] if n["name"] == "ens5"]
    address = address or (f"198.18.{7 * i}.{10 + i}", 32)
    ens5["ipv4"] = [{"address": address[0], "prefix": address[1],
                     "subnet": str(ipaddress.ip_network(f"{address[0]}/{address[1]}", strict=False))}]
    if v6:
        ens5["ipv4"] = []
        ens5["ipv6"].append({"address": v6, "prefix": 128, "scope": "global", "subnet": f"{v6}/128"})
    gateway = f"198.18.{7 * i}.1"
    doc["sections"]["netpath"]["data"]["routes"] = routes if routes is not None else [
        {"destination": "0.0.0.0/0", "gateway": gateway, "interface": "ens5", "metric": 0},
        {"destination": f"{gateway}/32", "gateway": None, "interface": "ens5", "metric": 0}]
    return doc


def test_routed_32_hosts_get_the_default_route_interface_as_info():
    [finding] = run([routed(1), routed(2)])
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=ens5"}
    assert finding["severity"] == "info", finding["message"]
    assert "routed hosts: every node holds its address as a /32 or /128" in finding["message"]
    assert "they must route to each other" not in finding["message"]


def test_routed_128_hosts_too():
    nodes = [routed(i, v6=f"2001:db8:{i}::11") for i in (1, 2)]
    [finding] = run(nodes)
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=ens5"} and finding["severity"] == "info"


def test_a_routed_host_without_a_route_to_a_peer_is_said_with_a_warning():
    # vm2 lost its default route: only its gateway and its own /16 remain
    vm2 = routed(2, routes=[{"destination": "198.18.14.1/32", "gateway": None, "interface": "ens5",
                             "metric": 0},
                            {"destination": "198.19.0.0/16", "gateway": "198.18.14.1",
                             "interface": "ens5", "metric": 0}])
    [finding] = run([routed(1), vm2])
    assert finding["severity"] == "warning"
    assert "vm2 has no route to 198.18.7.11" in finding["message"]


def test_nccl_comm_id_on_routed_hosts_stays_a_warning():
    nodes = [routed(1), routed(2)]
    for doc in nodes:
        doc["sections"]["env"]["data"]["nccl"]["NCCL_COMM_ID"] = "198.18.7.11:29500"
    [finding] = run(nodes)
    assert finding["severity"] == "warning" and "bootstrapNetInit" in finding["message"]


def test_different_subnets_that_are_not_host_routes_keep_the_warning():
    nodes = [routed(1, ("198.18.7.11", 24)), routed(2, ("198.19.14.12", 24))]
    [finding] = run(nodes)
    assert finding["env"] == {"NCCL_SOCKET_IFNAME": "=ens5"} and finding["severity"] == "warning"
    assert "they must route to each other" in finding["message"]
