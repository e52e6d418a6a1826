"""Issue 23's table: each setup built as facts from a recorded host (replayed through the rooted
reader, then edited the way the setup differs), and the "right" column checked: no ERROR where it
says so, no warning where it says none. Plus the suite-wide check: no single-node scenario gets an
ERROR from a rule about peers."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ncclcheck.probes.netpath import parse_iptables_chains
from ncclcheck.rules import ALL_RULES, CLUSTER_RULES, NODE_RULES
from ncclcheck.rules.common import facts_frozen
from ncclcheck.rules.engine import evaluate

from scriptload import load

TESTS = Path(__file__).resolve().parent.parent
scenarios = load(TESTS / "recommend" / "recommend_scenarios.py", "recommend_scenarios_23")
PEER_RULES = {r.id for r in ALL_RULES if r.peers}


def host(name: str) -> dict:
    """A recorded host's facts, as the probe writes them when it replays the folder."""
    return json.loads(scenarios.replayed(name))


def data(doc: dict, section: str) -> dict:
    sec = doc["sections"][section]
    sec.update(status="ok", errors=[])
    if sec.get("data") is None:
        sec["data"] = {}
    return sec["data"]


def run(nodes: list[dict]) -> list[dict]:
    with facts_frozen():
        return evaluate(NODE_RULES + CLUSTER_RULES, nodes)["findings"]


def worst(findings: list[dict], rule: str) -> str | None:
    order = ["info", "warning", "error"]
    found = [f["severity"] for f in findings if f["rule"] == rule]
    return max(found, key=order.index) if found else None


# -- 1. one workstation, PyTorch's DDP tutorial ----------------------------------------------------

def workstation() -> dict:
    """this-machine (Debian, no GPU) made into issue 23's workstation: MASTER_ADDR=localhost,
    the hostname on 127.0.1.1 as Debian writes it, two consumer GPUs each on a CPU root port
    with ACS on, Ethernet and Wi-Fi in one subnet with strict rp_filter, and a ufw-style firewall
    that drops what it does not allow."""
    doc = host("this-machine")
    data(doc, "env")["other"] = {"MASTER_ADDR": "localhost", "MASTER_PORT": "12355"}
    data(doc, "host")["launcher"] = {"kind": None, "master_addr": "localhost", "nnodes": None,
                                     "world_size": None}
    net = data(doc, "network")
    eth = next(i for i in net["interfaces"] if i["name"] == "eth0")
    wlan = copy.deepcopy(eth)
    wlan.update(name="wlan0", kind="physical")
    addr = wlan["ipv4"][0]
    addr["address"] = addr["address"].rsplit(".", 1)[0] + ".77"
    net["interfaces"].append(wlan)
    path = data(doc, "netpath")
    path["resolve"].update(hostname_addrs=["127.0.1.1"], master_addr="localhost",
                           master_addrs=["127.0.0.1"])
    path["sysctl"]["all"] = {"rp_filter": 1, "arp_ignore": 0, "arp_announce": 0}
    policies, chains = parse_iptables_chains(
        "-P INPUT DROP\n-A INPUT -i lo -j ACCEPT\n"
        "-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n")
    path["firewall"] = {"readable": True, "tool": "iptables", "input_policy": "DROP",
                        "input_rules": chains["INPUT"], "ufw_active": True, "why": None,
                        "chains": chains, "bases": [{"chain": "INPUT", "policy": "DROP",
                                                     "syntax": "iptables"}]}
    acs = {"SrcValid": True, "ReqRedir": True, "CmpltRedir": True}
    data(doc, "platform").update(virtualized=False, iommu={"cmdline": {}, "groups": 20},
                                 pci_paths=[{"device": f"0000:0{i}:00.0", "kind": "gpu",
                                             "iommu_group_type": "identity",
                                             "bridges": [{"bdf": f"0000:00:0{i}.1", "acs": acs}]}
                                            for i in (1, 2)])
    return doc


def test_workstation_gets_no_error_and_no_peer_warning():
    findings = run([workstation()])
    assert not [f for f in findings if f["severity"] == "error"], findings
    for rule in PEER_RULES:
        assert worst(findings, rule) in (None, "info"), rule
    assert worst(findings, "host-hostname-loopback") == "info"   # still said, as INFO
    assert worst(findings, "net-same-subnet-nics") == "info"
    assert worst(findings, "platform-acs-iommu") is None          # root ports, not switches


# -- 2. GCP A3 with GPUDirect-TCPX and GKE's required environment ---------------------------------

#: container-engine-accelerators gpudirect-tcpx/nccl-config.yaml (the knowledge notes, 8.3).
TCPX_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple",
            "NCCL_CROSS_NIC": "0", "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_P2P_PXN_LEVEL": "0",
            "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4",
            "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0", "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
            "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
            "NCCL_P2P_NVL_CHUNKSIZE": "1048576", "NCCL_BUFFSIZE": "4194304",
            "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "1",
            "NCCL_MAX_NCHANNELS": "8", "NCCL_MIN_NCHANNELS": "8"}


def a3_tcpx(name: str) -> dict:
    doc = host("cloud-vm-1nic")
    doc["hostname"] = name
    data(doc, "env")["nccl"] = dict(TCPX_ENV)
    data(doc, "env")["other"]["LD_LIBRARY_PATH"] = "/usr/local/tcpx/lib64:/usr/local/nvidia/lib64"
    nccl = data(doc, "nccl")
    nccl["net_plugin"] = {"path": "/usr/local/tcpx/lib64/libnccl-net.so", "version": None,
                          "reason": "NCCL opens libnccl-net.so; the loader finds it in LD_LIBRARY_PATH"}
    nccl["net_plugins"] = [{"kind": "net", "name": "libnccl-net.so",
                            "path": "/usr/local/tcpx/lib64/libnccl-net.so"}]
    return doc


def test_gcp_tcpx_required_settings_are_left_alone():
    findings = run([a3_tcpx("a3-1"), a3_tcpx("a3-2")])
    debug = [f for f in findings if f["rule"] == "env-debug-vars-set"]
    said = " ".join(f["message"] for f in debug)
    for var in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                "NCCL_P2P_NET_CHUNKSIZE", "NCCL_BUFFSIZE", "NCCL_P2P_PXN_LEVEL"):
        assert var not in said, said
    # and nothing is recommended that bypasses the plugin
    assert not any(f["env"].get("NCCL_NET") for f in findings)


def test_gib_on_disk_gets_no_nccl_net_ib():
    nodes = []
    for i, name in enumerate(("a3u-1", "a3u-2")):
        doc = host("h100-ib-8gpu")
        doc["hostname"] = name
        data(doc, "nccl")["net_plugins"] = [
            {"kind": "net", "name": "libnccl-net.so", "path": "/usr/local/gib/lib64/libnccl-net.so"}]
        nodes.append(doc)
    assert not any(f["env"].get("NCCL_NET") for f in run(nodes))
    bare = [host("h100-ib-8gpu") for _ in range(2)]
    bare[1]["hostname"] = "other"
    assert any(f["env"].get("NCCL_NET") == "IB" for f in run(bare))  # without gIB: IB is pinned


# -- 3. AWS p5: EFA with aws-ofi-nccl, multi-ENI, driver 535 with torch for CUDA 12.4 -------------

def p5(name: str, offset: int) -> dict:
    doc = host("cloud-vm-1nic")
    doc["hostname"] = name
    ib = data(doc, "ib")
    ib.update(devices=[{"name": f"rdmap{16 + b}s0", "ports": [{"port": 1, "state": "ACTIVE",
                                                                "link_layer": "Unspecified"}]}
                       for b in range(32)],
              gdr={"peermem": False, "nv_peer_mem": False, "dmabuf": None, "ready": False,
                   "reason": "no nvidia_peermem or nv_peer_mem module"},
              dev_infiniband=["uverbs0"])
    net = data(doc, "network")
    ens5 = next(i for i in net["interfaces"] if i["name"] == "ens5")
    ens5["ipv4"][0]["address"] = f"172.31.5.{17 + offset}"
    for k in range(1, 4):  # AWS's standard multi-ENI layout: every ENI in the subnet
        eni = copy.deepcopy(ens5)
        eni["name"] = f"ens{5 + k * 16}"
        eni["default_route"] = False
        eni["ipv4"][0]["address"] = f"172.31.{6 + k}.{17 + offset}"
        net["interfaces"].append(eni)
    data(doc, "gpu").update(driver_version="535.183.01", cuda_driver_version="12.2")
    data(doc, "nccl")["torch"].update(version="2.5.1+cu124", cuda="12.4")
    data(doc, "netpath")["sysctl"]["all"] = {"rp_filter": 1, "arp_ignore": 0, "arp_announce": 0}
    return doc


def test_aws_p5_gets_none_of_the_three_warnings():
    findings = run([p5("p5-1", 0), p5("p5-2", 1)])
    assert worst(findings, "ib-gdr-not-ready") is None
    assert worst(findings, "gpu-cuda-driver-too-old") is None
    assert worst(findings, "net-same-subnet-nics") in (None, "info")


# -- 4. two DGX nodes, firewall trusting 10/8 for new connections ---------------------------------

def test_conntrack_trust_of_the_peers_subnet_is_no_error():
    text = ("-P INPUT DROP\n-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
            "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n"
            "-A INPUT -s 10.0.0.0/8 -m conntrack --ctstate NEW -j ACCEPT\n")
    policies, chains = parse_iptables_chains(text)
    doc = scenarios.assemble("h100-ib-pair")
    for node in doc["nodes"]:
        data(node, "netpath")["firewall"] = {
            "readable": True, "tool": "iptables", "input_policy": "DROP",
            "input_rules": chains["INPUT"], "ufw_active": None, "why": None, "chains": chains,
            "bases": [{"chain": "INPUT", "policy": policies["INPUT"], "syntax": "iptables"}]}
    assert worst(run(doc["nodes"]), "net-firewall-blocks-peers") is None


# -- 5. Kubernetes, one GPU per pod, no host networking ------------------------------------------

def pods(same_hostname: bool) -> list[dict]:
    out = []
    for i in range(2):
        doc = host("cloud-vm-1nic")
        doc["hostname"] = "gpu-node-7" if same_hostname else f"trainer-{i}"
        data(doc, "gpu")["count"] = 1
        data(doc, "netpath")["identity"] = {"boot_id": "5a1e0c3b-81a4-4e0c-9f6a-0e5b3c9d7a11",
                                           "netns": f"net:[40265322{i}0]"}
        out.append(doc)
    return out


def test_pods_with_their_own_hostnames_are_a_warning_and_the_fix_is_version_gated():
    findings = run(pods(False))
    assert worst(findings, "cluster-ranks-split-netns") == "warning"
    [f] = [f for f in findings if f["rule"] == "cluster-ranks-split-netns"]
    assert "through the NIC" in f["message"]
    findings = run(pods(True))
    [f] = [f for f in findings if f["rule"] == "cluster-ranks-split-netns"]
    assert f["severity"] == "error" and "only from NCCL 2.29.2 (here: 2.20.5)" in f["fix"]


# -- the whole suite: no single node gets an ERROR from a rule about peers ------------------------

def single_nodes() -> list[tuple[str, dict]]:
    """Every node of every scenario, and every recorded host, judged alone."""
    out = [(f"host:{name}", host(name)) for name in sorted(p.name for p in scenarios.HOSTS.iterdir()
                                                           if (p / "README.md").exists())]
    for name in scenarios.scenario_names():
        for node in scenarios.assemble(name)["nodes"]:
            out.append((f"{name}:{node['hostname']}", node))
    out.append(("workstation", workstation()))
    return out


@pytest.mark.parametrize("label, node", single_nodes(), ids=lambda v: v if isinstance(v, str) else "")
def test_no_single_node_gets_a_peer_error(label, node):
    """A node judged alone whose facts do not say it has peers never gets an ERROR from a peer
    rule (a one-node launcher or MASTER_ADDR on loopback: INFO at most)."""
    alone = copy.deepcopy(node)
    data(alone, "host")["launcher"] = {"kind": None, "nnodes": None, "world_size": None,
                                       "master_addr": None}
    data(alone, "env")["other"] = {"MASTER_ADDR": "127.0.0.1"}
    findings = evaluate(NODE_RULES, [alone])["findings"]
    assert not [f for f in findings if f["rule"] in PEER_RULES and f["severity"] != "info"], label
    # and with no word on the node count, a peer rule says WARNING at most
    data(alone, "env")["other"] = {}
    findings = evaluate(NODE_RULES, [alone])["findings"]
    assert not [f for f in findings if f["rule"] in PEER_RULES and f["severity"] == "error"], label


# -- 6. 8-rail RoCE, routed L3: a /31 per NIC, routes in per-NIC policy tables --------------------

def routed_l3(policy_readable: bool = True) -> list[dict]:
    """a100-roce-bond's RoCE ports as eight rails, each netdev on a /31 whose gateway is in a
    table of its own chosen by source address (ip rule), the main table holding only the /31s."""
    nodes = []
    for n in range(2):
        doc = host("a100-roce-bond")
        doc["hostname"] = f"roce-{n}"
        devices = [{"name": f"mlx5_{k}", "ports": [{"port": 1, "state": "ACTIVE",
                                                    "link_layer": "Ethernet", "netdev": f"rail{k}"}]}
                   for k in range(8)]
        data(doc, "ib")["devices"] = devices
        net = data(doc, "network")
        ifaces, rules, routes, main = [], [], [], []
        for k in range(8):
            me = f"10.{k}.{n}.1"
            ifaces.append({"name": f"rail{k}", "kind": "physical", "operstate": "up",
                           "ipv4": [{"address": me, "prefix": 31, "subnet": f"10.{k}.{n}.0/31"}]})
            rules.append(f"from {me} lookup rail{k}")
            routes.append({"destination": "0.0.0.0/0", "gateway": f"10.{k}.{n}.0",
                           "interface": f"rail{k}", "table": f"rail{k}"})
            main.append({"interface": f"rail{k}", "destination": f"10.{k}.{n}.0/31",
                         "gateway": None, "metric": 0})
        front = {"name": "eth0", "kind": "physical", "operstate": "up", "default_route": True,
                 "ipv4": [{"address": f"192.168.10.{n + 5}", "prefix": 24,
                           "subnet": "192.168.10.0/24"}]}
        net["interfaces"] = [i for i in net["interfaces"] if i.get("kind") == "loopback"] + \
            [front] + ifaces
        path = data(doc, "netpath")
        path["routes"] = main
        path["policy"] = ({"readable": True, "rules": rules, "routes": routes, "why": None}
                          if policy_readable else
                          {"readable": False, "rules": [], "routes": [], "why": "ip: not found"})
        # CIS-hardened: strict on every rail netdev, loose on the front-end NCCL's sockets use
        path["sysctl"] = {"all": {"rp_filter": 0, "arp_ignore": 0, "arp_announce": 0},
                          "eth0": {"rp_filter": 0},
                          **{f"rail{k}": {"rp_filter": 1} for k in range(8)}}
        data(doc, "env")["nccl"] = {}
        data(doc, "nccl")["conf_env"] = {}
        nodes.append(doc)
    return nodes


def test_routed_l3_rails_get_no_cross_nic_from_the_main_table_alone():
    for readable in (True, False):
        findings = run(routed_l3(readable))
        assert worst(findings, "cluster-rail-cross-nic") is None, readable
        assert not any(f["env"].get("NCCL_CROSS_NIC") for f in findings)
        # rp_filter=1 on netdevs that carry only RDMA is not reported
        assert worst(findings, "net-rp-filter-strict") is None
    # strict everywhere (conf.all=1): only the socket interface eth0 is named
    nodes = routed_l3()
    for node in nodes:
        node["sections"]["netpath"]["data"]["sysctl"]["all"]["rp_filter"] = 1
    found = [f for f in run(nodes) if f["rule"] == "net-rp-filter-strict"]
    assert found and all("on eth0 of" in f["message"] and "rail0" not in f["fix"] for f in found)
    # the same rails with no route out of them in any table: NCCL_CROSS_NIC=0, as before
    nodes = routed_l3()
    for node in nodes:
        node["sections"]["netpath"]["data"]["policy"].update(rules=[], routes=[])
    [f] = [f for f in run(nodes) if f["rule"] == "cluster-rail-cross-nic"]
    assert f["env"] == {"NCCL_CROSS_NIC": "0"}
