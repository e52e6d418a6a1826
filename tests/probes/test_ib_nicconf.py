"""ib probe, NIC settings: mlnx_qos and mlxconfig outputs, replayed from the recorded hosts."""

from __future__ import annotations

import json

import pytest

from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probes import ib
from ncclcheck.probes.ib_nicconf import parse_mlnx_qos, parse_mlxconfig, setting
from netfix import copy_host

GARBAGE = [None, "", "\n", "garbage", "\x00\xff", "enabled 1 1", "prio:9 dscp:x",
           "Configurations:", "Configurations:   Next Boot\n  X", "9" * 400]
QOS = "mlnx_qos_-i_enp225s0f0np0"
MLXCONFIG = "mlxconfig_-d_0000_e1_00.0_q_PCI_WR_ORDERING"


@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_never_raise_on_garbage(text):
    parse_mlnx_qos(text)
    setting(parse_mlxconfig(text), "PCI_WR_ORDERING")


def test_mlnx_qos_as_the_community_page_prints_it():
    """Mellanox community DOC-2792 (mlnx_qos, MLNX_OFED 4.2), whitespace lost in the page:
    PFC on priorities 0, 2, 6 and 7."""
    text = ("DCBX mode: OS controlled\nPriority trust state: dscp\ndscp2prio mapping:\n"
            "prio:0 dscp:07,06,05,04,03,02,01,00,\nprio:3 dscp:31,30,29,28,27,26,25,24,\n"
            "Cable len: 10\nPFC configuration:\npriority 0 1 2 3 4 5 6 7\n"
            "enabled 1 0 1 0 0 0 1 1\n\ntc: 0 ratelimit: unlimited, tsa: ets, bw: 10%\n")
    qos = parse_mlnx_qos(text)
    assert qos["pfc_enabled"] == [0, 2, 6, 7] and qos["trust"] == "dscp"
    assert qos["dscp2prio"][3] == list(range(24, 32)) and qos["dscp2prio"][1] == []


def test_recorded_roce_host_reads_both_pfs_and_the_card():
    data = ib.collect(RecordedHost("tests/fixtures/hosts/a100-roce-bond"), errors := [])
    assert errors == []
    assert [(q["port"], q["netdev"], q["trust"], q["pfc_enabled"]) for q in data["qos"]] == [
        ("mlx5_bond_0:1", "enp225s0f0np0", "dscp", [3]),
        ("mlx5_bond_0:1", "enp225s0f1np1", "dscp", [3])]
    assert data["qos"][0]["dscp2prio"][3] == list(range(24, 32))
    assert data["qos"][0]["ecn_rp"] is None and data["qos"][0]["port_traffic_class"] is None
    assert data["pci_ordering"] == [{
        "device": "mlx5_bond_0", "pci_address": "0000:e1:00.0", "tool": "mlxconfig",
        "current": "per_mkey", "next_boot": "per_mkey", "default": None, "basis": "Next Boot"}]


def test_ib_host_without_the_tools_records_nothing():
    data = ib.collect(RecordedHost("tests/fixtures/hosts/h100-ib-8gpu"), errors := [])
    assert data["qos"] == [] and data["pci_ordering"] == []  # IB ports; mlxconfig not installed
    assert not [e for e in errors if "mlx" in e]


def test_absent_tools_are_unknown_not_errors(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    for key in (QOS, QOS.replace("f0np0", "f1np1"), MLXCONFIG):
        (folder / "commands" / f"{key}.txt").unlink()
    data = ib.collect(RecordedHost(folder), errors := [])
    assert data["qos"] == [] and data["pci_ordering"] == [] and errors == []


def test_denied_tools_say_why_and_stop(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    for key in (QOS, MLXCONFIG):
        (folder / "commands" / f"{key}.txt").write_text("")
        (folder / "commands" / f"{key}.json").write_text(json.dumps(
            {"returncode": 3, "stderr": "-E- Failed to open the device: Operation not permitted"}))
    data = ib.collect(RecordedHost(folder), errors := [])
    assert [q["netdev"] for q in data["qos"]] == ["enp225s0f1np1"]
    assert data["pci_ordering"] == []
    assert any(e.startswith("mlnx_qos -i enp225s0f0np0: mlnx_qos: exit 3") for e in errors)
    assert any(e.startswith("mlxconfig: exit 3") for e in errors)


def test_mstflint_answers_where_mft_is_absent(tmp_path):
    folder = copy_host("a100-roce-bond", tmp_path)
    text = (folder / "commands" / f"{MLXCONFIG}.txt").read_text()
    (folder / "commands" / f"{MLXCONFIG}.txt").unlink()
    forced = text.replace("per_mkey(0)", "force_relax(1)")
    (folder / "commands" / f"{MLXCONFIG.replace('mlxconfig', 'mstconfig')}.txt").write_text(forced)
    data = ib.collect(RecordedHost(folder), [])
    assert [(e["tool"], e["current"]) for e in data["pci_ordering"]] == [("mstconfig", "force_relax")]
