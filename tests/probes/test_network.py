"""network probe: parsers on recorded snippets and garbage, the recorded hosts, this machine."""

from __future__ import annotations

import json
import sys

import pytest

from ncclcheck.host.live import LiveHost
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.host.recording import RecordingHost
from ncclcheck.probe import run_section
from ncclcheck.probes import network
from ncclcheck.probes.network.addrs import (parse_if_inet6, parse_ip_json, parse_net_addrs,
                                            prefix_from_netmask)
from ncclcheck.probes.network.links import (classify, is_virtual_path, parse_carrier, parse_int,
                                            parse_numa_node, parse_pci_address, parse_speed,
                                            parse_uevent)
from ncclcheck.probes.network.routes import parse_ipv6_route, parse_proc_route
from ncclcheck.probes.network.types import KINDS
from ncclcheck.probes.network.types import Interface, NetworkData
from netfix import copy_host


GARBAGE = [None, "", "\n", "garbage", "\x00\xff\xfe", "1 2 3\n4 5 6\n", "-" * 5000, "0x", "[]", "{}"]
PARSERS = [parse_int, parse_uevent, parse_speed, parse_carrier,
           parse_numa_node, parse_pci_address, is_virtual_path,
           prefix_from_netmask, parse_ip_json, parse_if_inet6,
           parse_proc_route, parse_ipv6_route, parse_net_addrs]


def by_name(data: NetworkData) -> dict[str, Interface]:
    return {i["name"]: i for i in data["interfaces"]}


def collect(host) -> tuple[NetworkData, list[str]]:
    errors: list[str] = []
    return network.collect(host, errors), errors


# -- parsers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_never_raise_on_garbage(parser, text):
    parser(text)


def test_parse_net_addrs_handles_psutil_answer_shapes():
    answer = {"source": "psutil 7.2.2", "addrs": {
        "eth0": [{"family": "inet", "address": "192.0.2.2", "netmask": "255.255.255.0",
                  "broadcast": "192.0.2.255", "ptp": None},
                 {"family": "inet", "address": "192.0.2.77", "netmask": None},
                 {"family": "inet6", "address": "fe80::fc:ff:fe00:1%eth0",
                  "netmask": "ffff:ffff:ffff:ffff::"}],
        "eth0:vip": [{"family": "inet", "address": "192.0.2.9", "netmask": "255.255.255.255"}],
        "ib0": [{"family": "inet6", "address": "10.0.0.1", "netmask": "ffff::"}]}}
    out = parse_net_addrs(answer, {"eth0", "ib0"})
    assert [a["address"] for a in out["eth0"]["ipv4"]] == ["192.0.2.2", "192.0.2.77", "192.0.2.9"]
    assert out["eth0"]["ipv4"][1] == {"address": "192.0.2.77", "prefix": 32, "subnet": "192.0.2.77/32"}
    assert out["eth0"]["ipv6"] == [{"address": "fe80::fc:ff:fe00:1", "prefix": 64,
                                    "subnet": "fe80::/64", "scope": "link"}]
    assert out["ib0"] == {"ipv4": [], "ipv6": []}  # a family that does not match is dropped
    assert "eth0:vip" not in out


@pytest.mark.parametrize("kwargs, kind", [
    (dict(name="lo", arphrd=772, devtype=None, has_device=False), "loopback"),
    (dict(name="ib0", arphrd=32, devtype=None, has_device=True), "ipoib"),
    (dict(name="ib0.8001", arphrd=32, devtype=None, has_device=True, link_kind="ipoib"), "ipoib"),
    (dict(name="br-0123456789ab", arphrd=1, devtype="bridge", has_device=False), "docker"),
    (dict(name="br-lan", arphrd=1, devtype="bridge", has_device=False), "bridge"),
    (dict(name="virbr0", arphrd=1, devtype=None, has_device=False, is_bridge=True), "bridge"),
    (dict(name="team0", arphrd=1, devtype=None, has_device=False, is_bond=True), "bond"),
    (dict(name="eth0", arphrd=1, devtype=None, has_device=False, iflink=7, ifindex=7), "virtual"),
    (dict(name="veth12ab", arphrd=1, devtype=None, has_device=False), "veth"),
    (dict(name="eth0", arphrd=1, devtype=None, has_device=False, iflink=9, ifindex=2,
          link_kind="macvlan"), "virtual"),
    (dict(name="tun0", arphrd=65534, devtype=None, has_device=False, iflink=3, ifindex=4), "virtual"),
    (dict(name="enP1p0s2", arphrd=1, devtype=None, has_device=True, link_kind=None), "physical"),
])
def test_classify(kwargs, kind):
    assert classify(**kwargs) == kind


# -- recorded hosts ----------------------------------------------------------------------------

def test_a100_kinds_masters_addresses_and_default_route(recorded):
    data, errors = collect(recorded("a100-roce-bond"))
    assert errors == []
    ifs = by_name(data)
    assert list(ifs) == ["lo", "eno1", "enp225s0f0np0", "enp225s0f1np1", "bond0", "bond0.100",
                         "docker0", "veth3f2a1b9"]  # ifindex order, as `ip link` prints them
    kinds = {n: i["kind"] for n, i in ifs.items()}
    assert kinds == {"lo": "loopback", "eno1": "physical", "enp225s0f0np0": "physical",
                     "enp225s0f1np1": "physical", "bond0": "bond", "bond0.100": "vlan",
                     "docker0": "docker", "veth3f2a1b9": "veth"}
    assert ifs["veth3f2a1b9"]["link_kind"] == "veth" and ifs["bond0"]["link_kind"] == "bond"
    assert ifs["enp225s0f0np0"]["master"] == ifs["enp225s0f1np1"]["master"] == "bond0"
    assert ifs["veth3f2a1b9"]["master"] == "docker0" and ifs["eno1"]["master"] is None
    assert ifs["bond0"]["ipv4"] == [{"address": "10.20.0.21", "prefix": 24,
                                     "subnet": "10.20.0.0/24"}]
    assert ifs["bond0.100"]["ipv4"][0]["subnet"] == "10.30.0.0/24"
    assert ifs["docker0"]["ipv4"][0]["subnet"] == "172.17.0.0/16"
    assert ifs["enp225s0f0np0"]["ipv4"] == [] and ifs["veth3f2a1b9"]["ipv4"] == []
    assert ifs["bond0"]["ipv6"][0]["scope"] == "link"
    assert (ifs["bond0"]["mtu"], ifs["bond0"]["speed_mbps"]) == (9000, 200000)
    slave = ifs["enp225s0f1np1"]
    assert (slave["pci_address"], slave["numa_node"], slave["driver"]) == \
        ("0000:e1:00.1", 1, "mlx5_core")
    eno1 = ifs["eno1"]
    assert (eno1["pci_address"], eno1["numa_node"], eno1["driver"]) == ("0000:c1:00.0", 1, "igb")
    assert ifs["bond0"]["pci_address"] is None and ifs["bond0"]["driver"] is None
    assert data["default_route_interfaces"] == ["eno1"]
    assert data["default_routes"] == [{"family": "inet", "interface": "eno1",
                                       "gateway": "10.10.0.1", "metric": 100}]
    assert [n for n, i in ifs.items() if i["default_route"]] == ["eno1"]
    assert data["address_source"] == "net_addrs query (psutil 5.9.0)"


def test_a100_kinds_from_sysfs_alone_match_netlink(recorded, tmp_path):
    """Without `ip`, DEVTYPE, the device link and iflink give the same kinds."""
    with_ip, _ = collect(recorded("a100-roce-bond"))
    folder = copy_host("a100-roce-bond", tmp_path)
    (folder / "commands" / "ip_-d_-j_addr_show.txt").unlink()
    sysfs_only, errors = collect(RecordedHost(folder))
    assert errors == []
    assert ({n: i["kind"] for n, i in by_name(sysfs_only).items()}
            == {n: i["kind"] for n, i in by_name(with_ip).items()})
    assert all(i["link_kind"] is None for i in sysfs_only["interfaces"])


def test_addresses_fall_back_to_ip_then_if_inet6(recorded, tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    (folder / "queries" / "net_addrs.json").unlink()
    data, errors = collect(RecordedHost(folder))
    assert data["address_source"] == "ip -d -j addr show"
    assert any("net_addrs" in e for e in errors)
    reference, _ = collect(recorded("a100-roce-bond"))
    for name, iface in by_name(reference).items():
        got = by_name(data)[name]
        assert got["ipv4"] == iface["ipv4"], name
        assert sorted(a["address"] for a in got["ipv6"]) == sorted(a["address"] for a in iface["ipv6"])

    (folder / "commands" / "ip_-d_-j_addr_show.txt").unlink()
    data, errors = collect(RecordedHost(folder))
    assert data["address_source"] == "/proc/net/if_inet6"
    assert any("IPv4 addresses unknown" in e for e in errors)
    ifs = by_name(data)
    assert ifs["bond0"]["ipv4"] == [] and ifs["bond0"]["ipv6"][0]["address"] == "fe80::ba3f:d2ff:fea1:b2c4"

    (folder / "root" / "proc" / "net" / "if_inet6").unlink()
    data, errors = collect(RecordedHost(folder))
    assert data["address_source"] is None and any("no address source" in e for e in errors)


def test_h100_ipoib_rails_front_end_and_docker(recorded):
    data, errors = collect(recorded("h100-ib-8gpu"))
    assert errors == []
    ifs = by_name(data)
    ipoib = [n for n, i in ifs.items() if i["kind"] == "ipoib"]
    assert ipoib == ["ibp26s0", "ibp44s0", "ibp60s0", "ibp94s0", "ibp156s0", "ibp173s0",
                     "ibp188s0", "ibp220s0"]
    assert [ifs[n]["ipv4"][0]["subnet"] for n in ipoib] == [f"10.100.{r}.0/24" for r in range(8)]
    assert {ifs[n]["numa_node"] for n in ipoib[:4]} == {0} and {ifs[n]["numa_node"] for n in ipoib[4:]} == {1}
    assert ifs["ibp26s0"]["pci_address"] == "0000:1a:00.0" and ifs["ibp26s0"]["speed_mbps"] == 400000
    assert ifs["ibp26s0"]["mtu"] == 4092
    up, down = ifs["enp27s0f0np0"], ifs["enp27s0f1np1"]
    assert (up["kind"], up["operstate"], up["carrier"], up["speed_mbps"]) == ("physical", "up", True, 200000)
    assert (down["operstate"], down["carrier"], down["speed_mbps"], down["ipv4"]) == ("down", False, None, [])
    assert ifs["docker0"]["kind"] == "docker" and ifs["docker0"]["operstate"] == "down"
    assert data["default_route_interfaces"] == ["enp27s0f0np0"]


def test_cloud_vm_single_nic(recorded):
    data, errors = collect(recorded("cloud-vm-1nic"))
    assert errors == []
    assert [(i["name"], i["kind"]) for i in data["interfaces"]] == [("lo", "loopback"), ("ens5", "physical")]
    ens5 = by_name(data)["ens5"]
    assert (ens5["pci_address"], ens5["numa_node"], ens5["driver"], ens5["mtu"]) == \
        ("0000:00:05.0", None, "ena", 9001)
    assert ens5["speed_mbps"] is None  # ENA reports no speed; the file is unreadable
    assert ens5["ipv4"] == [{"address": "172.31.5.17", "prefix": 20, "subnet": "172.31.0.0/20"}]
    assert ens5["default_route"] and data["default_route_interfaces"] == ["ens5"]


def test_unreadable_sysfs_files_give_null(tmp_path):
    folder = copy_host("cloud-vm-1nic", tmp_path)
    for leaf in ("mtu", "operstate", "carrier", "address", "type", "uevent"):
        (folder / "root" / "sys" / "class" / "net" / "ens5" / leaf).unlink()
    (folder / "root" / "proc" / "net" / "route").write_text("\x00garbage\n1 2 3\n")
    data, _ = collect(RecordedHost(folder))
    ens5 = by_name(data)["ens5"]
    assert (ens5["mtu"], ens5["operstate"], ens5["carrier"], ens5["mac"]) == (None, None, None, None)
    assert ens5["kind"] == "physical"  # the device link still says so
    assert data["default_routes"] == [] and not ens5["default_route"]


def test_no_sysfs_is_unavailable(tmp_path):
    (tmp_path / "root").mkdir()
    section = run_section(RecordedHost(tmp_path), "network", network.collect)
    assert section["status"] == "unavailable"
    assert "no /sys/class/net" in section["errors"][0]


def test_data_shape_matches_typeddicts(recorded):
    data, _ = collect(recorded("a100-roce-bond"))
    assert set(data) == set(NetworkData.__annotations__)
    for iface in data["interfaces"]:
        assert set(iface) == set(Interface.__annotations__)
    json.dumps(data)


# -- this machine ------------------------------------------------------------------------------

def test_net_addrs_query_answers_plain_json():
    from ncclcheck.native.net import net_addrs

    answer = net_addrs(LiveHost("/"))
    assert answer["source"].startswith("psutil ")
    assert {"family": "inet", "address": "127.0.0.1", "netmask": "255.0.0.0", "broadcast": None,
            "ptp": None} in answer["addrs"]["lo"]
    families = {e["family"] for entries in answer["addrs"].values() for e in entries}
    assert families <= {"inet", "inet6"}  # no AF_PACKET: MACs come from sysfs
    assert json.loads(json.dumps(answer)) == answer


def test_net_addrs_without_psutil_is_a_query_failure(monkeypatch):
    from ncclcheck.errors import QueryFailed
    from ncclcheck.native.net import net_addrs

    monkeypatch.setitem(sys.modules, "psutil", None)
    with pytest.raises(QueryFailed, match="psutil unavailable"):
        net_addrs(LiveHost("/"))


def test_live_host_does_not_crash_and_finds_loopback():
    data, errors = collect(LiveHost("/"))
    lo = by_name(data)["lo"]
    assert lo["kind"] == "loopback"
    assert {"address": "127.0.0.1", "prefix": 8, "subnet": "127.0.0.0/8"} in lo["ipv4"]
    assert all(i["kind"] in KINDS for i in data["interfaces"])
    assert data["address_source"].startswith("net_addrs query (psutil")


def test_live_recording_replays_identically(tmp_path):
    """What `ncclcheck record` writes is enough to replay the network section unchanged."""
    live = RecordingHost("/")
    first, _ = collect(live)
    live.save(tmp_path / "rec")
    replayed, _ = collect(RecordedHost(tmp_path / "rec"))
    assert replayed == first
