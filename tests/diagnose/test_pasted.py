"""Pasted command output (issue 13): real ibstat / ibstatus / ibv_devinfo / show_gids pastes from
public threads (tests/fixtures/pasted/INDEX.json names each source), read by ``diagnose`` in the
same run as logs, into the ``ib`` probe's facts, with findings under the rules' ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.logparse.pasted_ib import PastedIb

PASTED = Path(__file__).resolve().parents[1] / "fixtures" / "pasted"
INDEX = json.loads((PASTED / "INDEX.json").read_text())


def test_every_paste_has_a_source_and_an_expectation():
    assert sorted(INDEX) == sorted(p.stem for p in PASTED.glob("*.txt"))
    for name, entry in INDEX.items():
        assert entry["source"].startswith("https://github.com/"), name
    kinds = {k for e in INDEX.values() for k in e["kinds"]}
    assert kinds >= {"ibstat", "ibstatus", "ibv_devinfo", "show_gids"}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_paste_gives_the_expected_findings(name):
    entry = INDEX[name]
    doc = diagnose_files([str(PASTED / f"{name}.txt")])
    assert doc["pasted"]["kinds"] == entry["kinds"]
    found = {f["id"]: f for f in doc["findings"]}
    assert sorted(found) == sorted(entry["expect"]), [f["message"] for f in doc["findings"]]
    for fid, words in entry["expect"].items():
        for word in words:
            assert word in found[fid]["message"], (word, found[fid]["message"])
    assert doc["healthy"] is False
    if not found:
        assert doc["summary"]["verdict"].startswith("no NCCL")


def test_pasted_facts_have_the_probes_shape():
    doc = diagnose_files([str(PASTED / "ibstat-port-disabled-nccl-tests.txt")])
    devices = doc["pasted"]["ib_devices"]["pasted"]
    assert [d["name"] for d in devices] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    port = devices[1]["ports"][0]
    assert port == {"port": 1, "state": "DOWN", "phys_state": "Disabled", "rate_gbps": 10,
                    "link_layer": "InfiniBand", "gids": [], "roce_v2_ipv4_gid_index": None}


def test_two_pastes_one_after_the_other_at_different_rates(tmp_path):
    """One file may hold several outputs; here two real ibstat pastes (400 Gb/s IB, 200 Gb/s
    RoCE) put one after the other: the ACTIVE ports run at different rates."""
    both = tmp_path / "both.txt"
    both.write_text((PASTED / "ibstat-400-elided-nccl.txt").read_text()
                    + (PASTED / "ibstat-200-ethernet-mooncake.txt").read_text())
    doc = diagnose_files([str(both)])
    f = {f["id"]: f for f in doc["findings"]}["ib-hca-select"]
    assert "400 Gb/s: mlx5_5:1; 200 Gb/s: mlx5_0:1, mlx5_1:1" in f["message"]
    assert f["fix"].startswith("Keep the slow ports out: NCCL_IB_HCA==mlx5_5")


def test_a_paste_inside_a_log_is_read_with_it(tmp_path):
    log = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "healthy-init-complete-32-ranks.log"
    mixed = tmp_path / "report.txt"
    mixed.write_text(log.read_text() + "\n" + (PASTED / "ibstatus-ports-down.txt").read_text())
    doc = diagnose_files([str(mixed)])
    assert {f["id"] for f in doc["findings"]} == {"cluster-ib-ports-down"}
    assert doc["healthy"] is False and doc["summary"]["processes"] == 12


def test_garbage_and_hostile_values_stay_bounded():
    p = PastedIb()
    p.feed("CA 'mlx5_0'", {})
    p.feed("Port 1:", {})
    p.feed("Rate: 1e999", {})
    p.feed("Rate: nan", {})
    for i in range(10_000):
        p.feed(f"mlx5_{i}  1  3  0000:0000:0000:0000:0000:ffff:0b00:0048 11.0.0.72 v2 eth0", {})
    assert p.devices()["pasted"][0]["ports"][0]["rate_gbps"] is None
    assert sum(len(d) for d in p.devices().values()) <= 256


def test_ip_addr_paste_is_read_into_the_network_probes_shape():
    doc = diagnose_files([str(PASTED / "ip-addr-lo-slash32-bgp.txt")])
    (lo,) = doc["pasted"]["network_interfaces"]["pasted"]
    assert lo["name"] == "lo" and lo["kind"] == "loopback" and lo["operstate"] == "unknown"
    assert lo["ipv4"] == [{"address": "127.0.0.1", "prefix": 8, "subnet": "127.0.0.0/8"}]


def test_ip_addr_with_a_user_bridge_gets_the_rules_exact_value(tmp_path):
    """A constructed ``ip addr`` (not a corpus sample: no public NCCL thread with this shape was
    found): a docker user-network bridge that NCCL's default would also pick. The
    ``net-socket-ifname`` rule itself gives the value."""
    paste = tmp_path / "ip.txt"
    paste.write_text(
        "root@gpu-a:~# ip addr\n"
        "2: ens5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9001 qdisc mq state UP group default\n"
        "    inet 198.18.0.11/24 brd 198.18.0.255 scope global ens5\n"
        "5: br-5f2a1c3d4e5f: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n"
        "    inet 172.19.0.1/16 brd 172.19.255.255 scope global br-5f2a1c3d4e5f\n"
        "7: veth1a2b3c4@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 master br-5f2a1c3d4e5f state UP\n")
    doc = diagnose_files([str(paste)])
    f = {f["id"]: f for f in doc["findings"]}["net-socket-ifname"]
    assert f["fix"] == "Set NCCL_SOCKET_IFNAME==ens5 on every node."
    assert "br-5f2a1c3d4e5f" in f["message"] and f["hosts"] == ["gpu-a"]
    kinds = {i["name"]: i["kind"] for i in doc["pasted"]["network_interfaces"]["gpu-a"]}
    assert kinds == {"ens5": "physical", "br-5f2a1c3d4e5f": "docker", "veth1a2b3c4": "veth"}


def test_ip_brief_paste_after_its_command():
    from ncclcheck.logparse.pasted import Pasted

    pasted = Pasted()
    for line in ("user@node7:~$ ip -br addr", "lo               UNKNOWN        127.0.0.1/8 ::1/128",
                 "bond0            UP             10.20.0.21/24 fe80::1/64",
                 "docker0          DOWN           172.17.0.1/16"):
        pasted.feed(line, {})
    ifaces = {i["name"]: i for i in pasted.ip.facts()[0]["sections"]["network"]["data"]["interfaces"]}
    assert pasted.ip.facts()[0]["hostname"] == "node7"
    assert ifaces["bond0"]["kind"] == "bond" and ifaces["bond0"]["ipv4"][0]["subnet"] == "10.20.0.0/24"
    assert ifaces["bond0"]["ipv6"][0]["scope"] == "link" and ifaces["docker0"]["operstate"] == "down"


def test_nccl_tests_wrong_values_and_zero_busbw(tmp_path):
    """Constructed from the recorded table in bench/importer.py's docstring (one rank, and a
    '#wrong' of 3 put in by hand): not a corpus sample."""
    table = ("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: "
             "10 iters: 50 agg iters: 1 validation: 1 graph: 0\n"
             "#  Rank  0 Group  0 Pid 2994447 on        lab device  0 [0000:02:00] NVIDIA GeForce RTX 5090\n"
             "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
             "time   algbw   busbw  #wrong\n"
             "     1048576        262144     float     sum      -1  4366.46    0.24    0.00       3  "
             "4365.21    0.24    0.00       0\n"
             "# Out of bounds values : 3 FAILED\n"
             "# Avg bus bandwidth    : 0\n")
    path = tmp_path / "t.txt"
    path.write_text(table)
    doc = diagnose_files([str(path)])
    found = {f["id"]: f for f in doc["findings"]}
    assert found["log-nccl-tests-wrong"]["message"] == "nccl-tests: 3 wrong values, from 1048576 bytes on"
    assert "busbw is 0 in every row while algbw reaches 0.24 GB/s" in found["log-nccl-tests-one-rank"]["message"]


# -- issue 27 item 12: a paste's finding is titled by what the paste shows -------------------------
@pytest.mark.parametrize("name", sorted(INDEX))
def test_paste_titles_do_not_contradict_their_bodies(name):
    """The line signatures' titles describe log lines ("ibv_modify_qp rejected the address", "P2P
    disabled between NVLink-connected GPUs"); a finding read from a pasted table has its own."""
    doc = diagnose_files([str(PASTED / f"{name}.txt")])
    from ncclcheck.signatures import BY_ID
    for f in doc["findings"]:
        if f["id"] in ("ib-roce-gid-index", "gpu-p2p-unsupported", "cluster-ib-ports-down",
                       "ib-gdr-not-ready", "ib-hca-select", "net-socket-ifname"):
            assert f["title"] != BY_ID[f["id"]].title, (name, f["title"])
    titles = {f["id"]: f["title"] for f in doc["findings"]}
    assert "ibv_modify_qp" not in titles.get("ib-roce-gid-index", "")
    assert "NVLink-connected" not in titles.get("gpu-p2p-unsupported", "")


@pytest.mark.parametrize("name,index", [("show-gids-container-index7-tabs", 7),
                                        ("show-gids-index3-prompt-indented", 3)])
def test_gid_evidence_is_the_row_of_the_index_meant(name, index):
    doc = diagnose_files([str(PASTED / f"{name}.txt")])
    (f,) = [f for f in doc["findings"] if f["id"] == "ib-roce-gid-index"]
    assert f["evidence"][0]["text"].split()[2] == str(index), f["evidence"][0]


def test_gid_index_set_to_the_v1_entry_is_a_warning_with_both_rows():
    doc = diagnose_files([str(PASTED / "show-gids-index5-v1-set.txt")])
    (f,) = [f for f in doc["findings"] if f["id"] == "ib-roce-gid-index"]
    assert f["severity"] == "warning"
    texts = [e["text"] for e in f["evidence"]]
    assert texts[0] == "export NCCL_IB_GID_INDEX=4"
    assert [t.split()[2] for t in texts[1:3]] == ["4", "5"]
    assert "NCCL_IB_GID_INDEX=5" in f["fix"]


# -- issue 24: pasted ip addr gives the NCCL_SOCKET_IFNAME to set ----------------------------------
# A real bond paste is in the corpus (ip-addr-bond-beside-mgmt-nic-roce, below). No complete public
# paste of the /32-on-lo and docker-bridge shapes was found (NVIDIA/nccl#1053 redacts its /32 and is
# cut after lo; NVIDIA/nccl#177 is ifconfig), so these three are written here in `ip addr`'s own
# format, with documentation-free 10/8 addresses.
_BOND = """$ ip addr
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    inet 127.0.0.1/8 scope host lo
2: eno1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 1000
    link/ether 3c:ec:ef:10:20:30 brd ff:ff:ff:ff:ff:ff
    inet 192.168.1.21/24 brd 192.168.1.255 scope global eno1
3: enp65s0f0: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 9000 qdisc mq master bond0 state UP group default qlen 1000
    link/ether b8:ce:f6:01:02:03 brd ff:ff:ff:ff:ff:ff
4: enp65s0f1: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 9000 qdisc mq master bond0 state UP group default qlen 1000
    link/ether b8:ce:f6:01:02:03 brd ff:ff:ff:ff:ff:ff
5: bond0: <BROADCAST,MULTICAST,MASTER,UP,LOWER_UP> mtu 9000 qdisc noqueue state UP group default qlen 1000
    link/ether b8:ce:f6:01:02:03 brd ff:ff:ff:ff:ff:ff
    inet 10.20.0.21/24 brd 10.20.0.255 scope global bond0
6: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN group default
    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0
"""
_BGP = """$ ip a
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
    inet 10.200.3.17/32 scope global lo
       valid_lft forever preferred_lft forever
2: lan0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP group default qlen 1000
    inet6 fe80::ac0:ebff:fedd:eeff/64 scope link
       valid_lft forever preferred_lft forever
3: lan1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP group default qlen 1000
    inet6 fe80::ac0:ebff:feaa:bbcc/64 scope link
       valid_lft forever preferred_lft forever
"""
_DOCKER = """root@gpu-a:~# ip addr
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    inet 127.0.0.1/8 scope host lo
2: br-3f2a1c3d4e5f: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default
    inet 172.18.0.1/16 brd 172.18.255.255 scope global br-3f2a1c3d4e5f
3: ens5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9001 qdisc mq state UP group default qlen 1000
    inet 172.31.5.10/20 brd 172.31.15.255 scope global dynamic ens5
4: docker0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default
    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0
"""


def _ifname_finding(tmp_path, text):
    path = tmp_path / "ip.txt"
    path.write_text(text)
    doc = diagnose_files([str(path)])
    (f,) = [f for f in doc["findings"] if f["id"] == "net-socket-ifname"]
    return f


def test_real_ip_addr_with_nics_enslaved_to_a_bond_is_read_and_says_nothing_when_cut():
    """sgl-project/sglang#3514: the slaves name their bond; bond0's own block (its address) is
    not in the public text, so no interface can be told to set."""
    doc = diagnose_files([str(PASTED / "ip-addr-bond-slaves-sglang.txt")])
    ifaces = {i["name"]: i for i in doc["pasted"]["network_interfaces"]["pasted"]}
    assert [n for n, i in ifaces.items() if i["master"] == "bond0"] == ["ens8f0np0", "ens8f1np1"]
    assert ifaces["ens16f0"]["operstate"] == "down" and not doc["findings"]


def test_ip_addr_bond_over_two_nics_is_chosen_over_the_management_nic(tmp_path):
    f = _ifname_finding(tmp_path, _BOND)
    assert "NCCL_SOCKET_IFNAME==bond0" in f["message"] and f["fix"].startswith(
        "Set NCCL_SOCKET_IFNAME==bond0 on every node")
    assert "enp65s0f0, enp65s0f1" in f["message"] and "NCCL would take eno1 first" in f["message"]
    assert f["severity"] == "warning" and "eno1" not in f["fix"]


def test_ip_addr_routable_slash32_on_lo_is_the_bgp_unnumbered_trap(tmp_path):
    f = _ifname_finding(tmp_path, _BGP)
    assert f["severity"] == "warning"
    assert "10.200.3.17/32 is on lo" in f["message"] and "127.0.0.1" in f["message"]
    assert "lan0's fe80:: address" in f["message"]
    assert "ip addr add 10.200.3.17/32 dev nccl0" in f["fix"] and "NCCL_SOCKET_IFNAME==nccl0" in f["fix"]
    assert "issues/1053" in f["cause"]


def test_ip_addr_docker_bridges_beside_the_nic(tmp_path):
    f = _ifname_finding(tmp_path, _DOCKER)
    assert f["severity"] == "warning" and f["fix"] == "Set NCCL_SOCKET_IFNAME==ens5 on every node."
    assert "br-3f2a1c3d4e5f" in f["message"]
    assert f["title"] == "the NCCL_SOCKET_IFNAME to set, read from the pasted interfaces"


def test_real_ip_addr_bond_beside_the_management_nic_gives_bond0():
    """grantcurell/projects (PowerScale RoCE report): eno8303 (MTU 1500, first) beside bond0 over
    ens6f0/ens6f1 (MTU 9000): NCCL's default would take eno8303; the value to set is bond0."""
    doc = diagnose_files([str(PASTED / "ip-addr-bond-beside-mgmt-nic-roce.txt")])
    (f,) = [f for f in doc["findings"] if f["id"] == "net-socket-ifname"]
    assert f["severity"] == "warning"
    assert f["fix"].startswith("Set NCCL_SOCKET_IFNAME==bond0 on every node") and "eno8303" not in f["fix"]
    ifaces = {i["name"]: i for i in doc["pasted"]["network_interfaces"]["pasted"]}
    assert [n for n, i in ifaces.items() if i["master"] == "bond0"] == ["ens6f0", "ens6f1"]
    assert ifaces["bond0"]["ipv4"][0]["subnet"] == "10.99.99.96/29"


def test_real_ifconfig_old_format_docker0_first_gives_the_nic_and_the_mpi_note():
    """horovod/horovod#310 (net-tools 1.60): docker0 listed before enp159s0. NCCL's default skips
    docker0 already, so the value comes as info, with the reason; the thread's failure was Open
    MPI's TCP transport dialling 172.17.0.1, which the fix names."""
    doc = diagnose_files([str(PASTED / "ifconfig-docker0-first-horovod.txt")])
    ifaces = {i["name"]: i for i in doc["pasted"]["network_interfaces"]["pasted"]}
    assert list(ifaces) == ["docker0", "enp159s0"]
    assert ifaces["docker0"]["kind"] == "docker" and ifaces["enp159s0"]["kind"] == "physical"
    assert ifaces["enp159s0"]["ipv4"] == [{"address": "172.30.160.6", "prefix": 20,
                                           "subnet": "172.30.160.0/20"}]
    assert ifaces["enp159s0"]["operstate"] == "up" and ifaces["enp159s0"]["mtu"] == 1500
    (f,) = doc["findings"]
    assert f["id"] == "net-socket-ifname" and f["severity"] == "info"
    assert "btl_tcp_if_exclude lo,docker0" in f["fix"] and "NCCL_SOCKET_IFNAME==enp159s0" in f["fix"]


def test_real_ifconfig_new_format_per_host_prompts_and_no_carrier():
    """pytorch/pytorch#52916 (net-tools 2.10): 'GPU14:~$ ifconfig' names the host (a prompt
    without user@); docker0 UP without RUNNING is down (no carrier); the /32 and the IPv6
    scopes are kept; the second host is cut, so nothing is said."""
    doc = diagnose_files([str(PASTED / "ifconfig-slash32-nic-and-docker0-pytorch.txt")])
    by_host = doc["pasted"]["network_interfaces"]
    assert sorted(by_host) == ["GPU14", "GPU9"]
    nic, lo = by_host["GPU14"]
    assert nic["ipv4"][0]["subnet"] == "148.251.86.243/32" and lo["kind"] == "loopback"
    assert [a["scope"] for a in nic["ipv6"]] == ["global", "link"]
    assert [(i["name"], i["operstate"]) for i in by_host["GPU9"]] == [("docker0", "down")]
    assert doc["findings"] == []


def test_ifconfig_with_a_user_bridge_is_the_same_trap_as_ip_addr(tmp_path):
    """The same judgement as ``ip addr``: a ``br-*`` bridge NCCL's default would take."""
    f = _ifname_finding(tmp_path, "ifconfig\n"
                        "br-5f2a1c3d4e5f: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500\n"
                        "        inet 172.19.0.1  netmask 255.255.0.0  broadcast 172.19.255.255\n"
                        "ens5: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 9001\n"
                        "        inet 198.18.0.11  netmask 255.255.255.0  broadcast 198.18.0.255\n")
    assert f["severity"] == "warning" and f["fix"] == "Set NCCL_SOCKET_IFNAME==ens5 on every node."
    assert "br-5f2a1c3d4e5f" in f["message"] and "ifconfig" in f["message"]
