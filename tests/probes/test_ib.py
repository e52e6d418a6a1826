"""ib probe: sysfs parsers, the recorded hosts, GID tables, /dev/infiniband and GDR readiness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.host.live import LiveHost
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probe import run_section
from ncclcheck.probes import ib
from ncclcheck.probes.ib import Device, Gdr, Gid, IbData, Port
from netfix import copy_host

GARBAGE = [None, "", "\n", "garbage", "\x00\xff", "4:", ":", "1 2 3", "Gb/sec", "9" * 400]


def collect(host) -> tuple[IbData, list[str]]:
    errors: list[str] = []
    return ib.collect(host, errors), errors


def devices(data: IbData) -> dict[str, Device]:
    return {d["name"]: d for d in data["devices"]}


# -- parsers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("parser", [ib.parse_state, ib.parse_rate, ib.parse_gid, ib.gid_ipv4,
                                    ib.parse_kernel_release],
                         ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_never_raise_on_garbage(parser, text):
    parser(text)


@pytest.mark.parametrize("text", GARBAGE)
def test_gid_type_never_raises(text):
    ib.parse_gid_type(text, "Ethernet")


@pytest.mark.parametrize("text, value", [
    # stackhpc/ansible-slurm-appliance#988 (grep of /sys/class/infiniband/*/ports/*/rate)
    ("100 Gb/sec (4X EDR)\n", 100), ("400 Gb/sec (4X NDR)", 400), ("200 Gb/sec (2X NDR)", 200),
    ("10 Gb/sec (4X)", 10), ("56 Gb/sec (4X FDR)", 56), ("2.5 Gb/sec (1X)", 2.5),
    ("53.125 Gb/sec (1X HDR)", 53.125), ("", None), ("Gb/sec", None),
])
def test_parse_rate(text, value):
    assert ib.parse_rate(text) == value


@pytest.mark.parametrize("text, name", [
    ("4: ACTIVE\n", "ACTIVE"), ("1: DOWN", "DOWN"), ("2: INIT", "INIT"), ("3: ARMED", "ARMED"),
    ("5: LinkUp", "LinkUp"), ("2: Polling", "Polling"), ("3: Disabled", "Disabled"), ("  ", None),
])
def test_parse_state(text, name):
    assert ib.parse_state(text) == name


def test_gid_parsing_and_ipv4_mapping():
    # openucx/ucx#9484: show_gids on mlx5_bond_0 (IPv4-mapped 30.153.10.175)
    gid = ib.parse_gid("0000:0000:0000:0000:0000:ffff:1e99:0aaf\n")
    assert gid == "0000:0000:0000:0000:0000:ffff:1e99:0aaf" and ib.gid_ipv4(gid) == "30.153.10.175"
    assert ib.parse_gid("FE80:0000:0000:0000:0AC0:EBFF:FE79:391A") == "fe80:0000:0000:0000:0ac0:ebff:fe79:391a"
    assert ib.gid_ipv4("fe80:0000:0000:0000:0ac0:ebff:fe79:391a") is None
    assert ib.parse_gid("0000:0000:0000:0000:0000:0000:0000:0000") is None
    assert ib.parse_gid("0000:0000:0000:0000:0000:ffff:zzzz:0001") is None


@pytest.mark.parametrize("peermem, legacy, kernel, flavor, ready, dmabuf", [
    (True, False, (5, 15), "proprietary", True, False),
    (False, True, (4, 18), None, True, False),
    (False, False, (6, 8), "open", True, True),
    (False, False, (5, 11), "open", False, False),
    (False, False, (6, 8), "proprietary", False, False),
    (False, False, None, "open", None, None),
    (False, False, (6, 8), None, None, None),
])
def test_gdr_readiness(peermem, legacy, kernel, flavor, ready, dmabuf):
    got_ready, reason, got_dmabuf, basis = ib.gdr_readiness(peermem, legacy, kernel, flavor)
    assert (got_ready, got_dmabuf) == (ready, dmabuf)
    assert reason and basis


# -- recorded hosts ----------------------------------------------------------------------------

def test_h100_ib_ndr_ports_and_ethernet_front_end(recorded):
    data, errors = collect(recorded("h100-ib-8gpu"))
    assert errors == []
    devs = devices(data)
    assert list(devs) == [f"mlx5_{i}" for i in range(12)]
    compute = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    for name in compute:
        (port,) = devs[name]["ports"]
        assert (port["state"], port["phys_state"], port["rate_gbps"], port["link_layer"]) == \
            ("ACTIVE", "LinkUp", 400, "InfiniBand"), name
        assert [g["type"] for g in port["gids"]] == ["IB"]
        assert port["gids"][0]["gid"].startswith("fe80:0000:0000:0000:a088:c203")
        assert port["roce_v2_ipv4_gid_index"] is None and port["netdev"].startswith("ibp")
    assert devs["mlx5_0"]["ports"][0]["netdev"] == "ibp26s0"
    assert (devs["mlx5_0"]["pci_address"], devs["mlx5_0"]["numa_node"]) == ("0000:1a:00.0", 0)
    assert (devs["mlx5_11"]["pci_address"], devs["mlx5_11"]["numa_node"]) == ("0000:dc:00.0", 1)
    assert devs["mlx5_0"]["fw_ver"] == "28.39.1002" and devs["mlx5_0"]["hca_type"] == "MT4129"
    front = devs["mlx5_1"]["ports"][0]
    assert (front["link_layer"], front["state"], front["netdev"]) == ("Ethernet", "ACTIVE", "enp27s0f0np0")
    assert front["roce_v2_ipv4_gid_index"] == 3 and front["gids"][3]["ipv4"] == "10.10.1.11"
    cold = devs["mlx5_2"]["ports"][0]
    assert (cold["state"], cold["phys_state"], cold["rate_gbps"]) == ("DOWN", "Disabled", 10)
    assert cold["roce_v2_ipv4_gid_index"] is None
    assert data["dev_infiniband"]["visible"] and data["dev_infiniband"]["uverbs"] == 12
    gdr = data["gdr"]
    assert (gdr["peermem"], gdr["peermem_version"], gdr["ready"]) == (True, "580.95.05", True)


def test_a100_roce_bond_gid_table(recorded):
    data, errors = collect(recorded("a100-roce-bond"))
    assert errors == []
    (dev,) = data["devices"]
    assert (dev["name"], dev["pci_address"], dev["numa_node"]) == ("mlx5_bond_0", "0000:e1:00.0", 1)
    (port,) = dev["ports"]
    assert (port["link_layer"], port["state"], port["rate_gbps"]) == ("Ethernet", "ACTIVE", 100)
    assert port["netdev"] == "bond0"  # from the GIDs, not device/net (which names the PF)
    table = [(g["index"], g["type"], g["ipv4"], g["netdev"]) for g in port["gids"]]
    assert table == [(0, "RoCE v1", None, "bond0"), (1, "RoCE v2", None, "bond0"),
                     (2, "RoCE v1", "10.20.0.21", "bond0"), (3, "RoCE v2", "10.20.0.21", "bond0"),
                     (4, "RoCE v1", "10.30.0.21", "bond0.100"),
                     (5, "RoCE v2", "10.30.0.21", "bond0.100")]
    assert port["roce_v2_ipv4_gid_index"] == 3
    assert data["dev_infiniband"] == {"visible": True, "entries": ["rdma_cm", "uverbs0"],
                                      "uverbs": 1}
    assert data["gdr"]["peermem"] is False and data["gdr"]["nv_peer_mem"] is False
    assert data["gdr"]["ready"] is not True


def test_cloud_vm_has_no_rdma(recorded):
    section = run_section(recorded("cloud-vm-1nic"), "ib", ib.collect)
    assert section["status"] == "unavailable"
    assert section["errors"] == ["no RDMA devices: /sys/class/infiniband is absent "
                                 "(no RDMA driver loaded, or /sys not mounted)"]


def test_hidden_dev_infiniband_is_reported(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    listings = json.loads((folder / "listings.json").read_text())
    del listings["dev/infiniband"]
    (folder / "listings.json").write_text(json.dumps(listings))
    data, errors = collect(RecordedHost(folder))
    assert data["dev_infiniband"] == {"visible": False, "entries": [], "uverbs": 0}
    assert [d["name"] for d in data["devices"]] == ["mlx5_bond_0"]  # sysfs still shows it
    assert any("/dev/infiniband is not visible" in e for e in errors)


def test_legacy_nv_peer_mem_counts_as_gdr(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    version = folder / "root" / "sys" / "kernel" / "mm" / "memory_peers" / "nv_mem" / "version"
    version.parent.mkdir(parents=True)
    version.write_text("1.1-0\n")
    gdr = collect(RecordedHost(folder))[0]["gdr"]
    assert (gdr["peermem"], gdr["nv_peer_mem"], gdr["ready"]) == (False, True, True)
    assert gdr["reason"] == "nv_peer_mem is loaded"


def _write_port(folder: Path, gids: dict[int, str], size: int) -> None:
    port = folder / "root" / "sys" / "class" / "infiniband" / "rxe0" / "ports" / "1"
    for i in range(size):
        (port / "gids").mkdir(parents=True, exist_ok=True)
        (port / "gids" / str(i)).write_text(gids.get(i, "0000:0000:0000:0000:0000:0000:0000:0000") + "\n")
        if i in gids:
            (port / "gid_attrs" / "types").mkdir(parents=True, exist_ok=True)
            (port / "gid_attrs" / "types" / str(i)).write_text("RoCE v2\n")
    (port / "link_layer").write_text("Ethernet\n")


def test_gid_scan_numeric_order_and_empty_run_stop(tmp_path):
    v4 = "0000:0000:0000:0000:0000:ffff:c612:000{}"
    gids = {0: "fe80:0000:0000:0000:0000:00ff:fe00:0001", 10: v4.format(1), 11: v4.format(2),
            11 + ib.GID_EMPTY_RUN + 1: v4.format(3)}
    _write_port(tmp_path, gids, 64)
    port = collect(RecordedHost(tmp_path))[0]["devices"][0]["ports"][0]
    assert [g["index"] for g in port["gids"]] == [0, 10, 11]  # 44 lies after 32 empty entries
    assert [g["ipv4"] for g in port["gids"]] == [None, "198.18.0.1", "198.18.0.2"]
    assert port["roce_v2_ipv4_gid_index"] == 10
    assert port["netdev"] is None and port["state"] is None and port["rate_gbps"] is None


def test_unreadable_port_files_give_null(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    port_dir = folder / "root" / "sys" / "class" / "infiniband" / "mlx5_bond_0" / "ports" / "1"
    for leaf in ("rate", "state", "gid_attrs/types/3", "gid_attrs/ndevs/0"):
        (port_dir / leaf).unlink()
    (port_dir / "gids" / "1").write_text("not a gid\n")
    port = devices(collect(RecordedHost(folder))[0])["mlx5_bond_0"]["ports"][0]
    assert (port["rate"], port["rate_gbps"], port["state"]) == (None, None, None)
    gids = {g["index"]: g for g in port["gids"]}
    assert 1 not in gids and gids[3]["type"] is None and gids[0]["netdev"] is None
    assert port["roce_v2_ipv4_gid_index"] == 5  # 3 lost its type; 5 is the next v2 IPv4 entry
    assert port["netdev"] == "bond0"


def test_data_shape_matches_typeddicts(recorded):
    data, _ = collect(recorded("h100-ib-8gpu"))
    assert set(data) == set(IbData.__annotations__)
    assert set(data["gdr"]) == set(Gdr.__annotations__)
    for dev in data["devices"]:
        assert set(dev) == set(Device.__annotations__)
        for port in dev["ports"]:
            assert set(port) == set(Port.__annotations__)
            for gid in port["gids"]:
                assert set(gid) == set(Gid.__annotations__)
    json.dumps(data)


def test_live_host_without_rdma_is_unavailable_or_ok():
    section = run_section(LiveHost("/"), "ib", ib.collect)
    assert section["status"] in ("ok", "unavailable"), section["errors"]
