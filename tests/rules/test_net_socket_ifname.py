"""net-socket-ifname: a host bridge (br0) that is the node's network is used, not an ERROR."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ncclcheck.rules import net_socket_ifname
from ncclcheck.rules.engine import evaluate

_SPEC = importlib.util.spec_from_file_location(
    "cluster_rule_fixtures",
    Path(__file__).parent.parent / "fixtures" / "facts" / "make_cluster_rule_fixtures.py")
fx = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fx)


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
