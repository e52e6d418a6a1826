"""net-firewall-blocks-peers walks INPUT as the kernel does (first match, then policy) for a
peer's new TCP connection to an ephemeral port: issue 27's three variants, issue 23's
conntrack-scoped trust, ufw's and firewalld's chains, each through the netpath parsers on the
texts the tools print."""

from __future__ import annotations

import pytest

from ncclcheck.probes.netpath import parse_iptables_chains, parse_nft_chains
from ncclcheck.rules import net_firewall_blocks_peers
from ncclcheck.rules.common import cluster_of
from ncclcheck.rules.engine import evaluate

RHEL = """-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -m state --state RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p icmp -j ACCEPT
-A INPUT -i lo -j ACCEPT
-A INPUT -p tcp -m state --state NEW -m tcp --dport 22 -j ACCEPT
-A INPUT -j REJECT --reject-with icmp-host-prohibited
"""
SOURCE_DROP = "-P INPUT ACCEPT\n-A INPUT -s 198.18.0.0/16 -p tcp -j DROP\n"
POLICY_DROP = "-P INPUT DROP\n-A INPUT -i lo -j ACCEPT\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n"
CONNTRACK_TRUST = ("-P INPUT DROP\n-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
                   "-A INPUT -s 10.0.0.0/8 -m conntrack --ctstate NEW -j ACCEPT\n")
#: ufw 0.36 on Ubuntu 22.04 after `ufw default deny incoming; ufw allow 22/tcp` (cut to the
#: chains a peer's SYN passes through); ALLOW adds `ufw allow from 198.18.0.0/24`.
UFW = """-P INPUT DROP
-N ufw-before-input
-N ufw-user-input
-N ufw-after-input
-N ufw-reject-input
-A INPUT -j ufw-before-input
-A INPUT -j ufw-after-input
-A INPUT -j ufw-reject-input
-A ufw-before-input -i lo -j ACCEPT
-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw-before-input -m conntrack --ctstate INVALID -j DROP
-A ufw-before-input -p udp -m udp --sport 67 --dport 68 -j ACCEPT
-A ufw-before-input -j ufw-user-input
-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT
-A ufw-after-input -p udp -m udp --dport 137 -j ufw-skip-to-policy-input
"""
ALLOW = "-A ufw-user-input -s 198.18.0.0/24 -j ACCEPT\n"
#: firewalld 1.x (nftables backend), public zone with ssh, cut to the input path.
FIREWALLD = """table inet firewalld {
	chain filter_INPUT {
		type filter hook input priority filter + 10; policy accept;
		ct state { established, related } accept
		ct status dnat accept
		iifname "lo" accept
		ct state invalid drop
		jump filter_INPUT_ZONES
		reject with icmpx admin-prohibited
	}
	chain filter_INPUT_ZONES {
%s		goto filter_IN_public
	}
	chain filter_IN_public {
		jump filter_IN_public_allow
		meta l4proto { icmp, ipv6-icmp } accept
	}
	chain filter_IN_public_allow {
		tcp dport 22 accept
	}
	chain filter_IN_trusted {
		accept
	}
}
"""


def node(fw: dict, subnet: str = "198.18.0.0/24", address: str = "198.18.0.2",
         iface: str = "eth0") -> dict:
    network = {"interfaces": [{"name": iface, "kind": "physical", "operstate": "up",
                               "ipv4": [{"address": address, "prefix": 24, "subnet": subnet}]}]}
    job = {"launcher": {"kind": "slurm", "nnodes": 2}}
    return {"hostname": "node1", "sections": {
        "netpath": {"status": "ok", "data": {"firewall": fw}},
        "network": {"status": "ok", "data": network}, "host": {"status": "ok", "data": job}}}


def iptables(text: str) -> dict:
    policies, chains = parse_iptables_chains(text)
    return {"readable": True, "tool": "iptables", "input_policy": policies.get("INPUT"),
            "input_rules": chains.get("INPUT"), "ufw_active": None, "why": None,
            "chains": chains, "bases": [{"chain": "INPUT", "policy": policies.get("INPUT"),
                                         "syntax": "iptables"}]}


def nft(text: str) -> dict:
    found, chains = parse_nft_chains(text)
    return {"readable": True, "tool": "nft", "input_policy": "ACCEPT", "input_rules": [],
            "ufw_active": None, "why": None, "chains": chains, "bases": found}


def findings(doc: dict) -> list[dict]:
    return evaluate([net_firewall_blocks_peers.RULE], [doc])["findings"]


@pytest.mark.parametrize("text, decides", [
    (RHEL, "-j REJECT --reject-with icmp-host-prohibited"),
    (SOURCE_DROP, "-s 198.18.0.0/16 -p tcp -j DROP"),
    (POLICY_DROP, "INPUT policy DROP"),
])
def test_the_three_variants_are_errors_with_one_command_per_subnet(text, decides):
    doc = node(iptables(text))
    doc["sections"]["network"]["data"]["interfaces"].append(
        {"name": "eth1", "kind": "physical", "operstate": "up",
         "ipv4": [{"address": "198.18.1.2", "prefix": 24, "subnet": "198.18.1.0/24"}]})
    [f] = findings(doc)
    assert f["severity"] == "error" and decides in f["message"], f["message"]
    assert "iptables -I INPUT -s 198.18.0.0/24 -j ACCEPT; " \
           "iptables -I INPUT -s 198.18.1.0/24 -j ACCEPT" in f["fix"]
    assert " or 198.18" not in f["fix"]


def test_conntrack_new_from_the_peers_subnet_is_trust():
    assert findings(node(iptables(CONNTRACK_TRUST), "10.1.0.0/16", "10.1.0.5", "ib0")) == []
    # ... but only for peers inside 10/8
    [f] = findings(node(iptables(CONNTRACK_TRUST)))
    assert f["severity"] == "error" and "policy DROP" in f["message"]


def test_healthy_rulesets_stay_quiet():
    for text in ("-P INPUT ACCEPT\n", "-P INPUT DROP\n-A INPUT -s 198.18.0.0/16 -j ACCEPT\n",
                 "-P INPUT DROP\n-A INPUT -i eth0 -j ACCEPT\n",
                 "-P INPUT DROP\n-A INPUT -p tcp -m tcp --dport 32768:60999 -j ACCEPT\n",
                 RHEL.replace("-A INPUT -j REJECT", "-A INPUT -s 198.18.0.0/24 -j ACCEPT\n"
                              "-A INPUT -j REJECT")):
        assert findings(node(iptables(text))) == [], text
    # the range NCCL's docs restrict with ip_local_port_range, opened as they show
    fw = iptables("-P INPUT DROP\n-A INPUT -p tcp -m multiport --dports 50000:51000 -j ACCEPT\n")
    assert findings(node(dict(fw, local_port_range=[50000, 51000]))) == []
    assert findings(node(fw))  # the default range is not open


def test_ufw_chains_are_followed():
    [f] = findings(node(dict(iptables(UFW), ufw_active=True)))
    assert f["severity"] == "error" and "ufw allow from 198.18.0.0/24" in f["fix"]
    assert findings(node(dict(iptables(UFW + ALLOW), ufw_active=True))) == []


def test_firewalld_zones_are_followed():
    [f] = findings(node(nft(FIREWALLD % "")))
    assert "reject with icmpx admin-prohibited" in f["message"] and f["severity"] == "error"
    assert "firewall-cmd --permanent --zone=trusted --add-source=198.18.0.0/24" in f["fix"]
    trusted = FIREWALLD % "\t\tip saddr 198.18.0.0/24 goto filter_IN_trusted\n"
    assert findings(node(nft(trusted))) == []


def test_native_nft_drop_policy_and_its_accepts():
    text = ("table inet filter {\n  chain input {\n"
            "    type filter hook input priority filter; policy drop;\n"
            "    ct state established,related accept\n    iif \"lo\" accept\n"
            "    tcp dport 22 accept\n  }\n}\n")
    [f] = findings(node(nft(text)))
    assert "nft insert rule inet filter input ip saddr 198.18.0.0/24 accept" in f["fix"]
    ok = text.replace("tcp dport 22 accept", "ip saddr { 10.0.0.0/8, 198.18.0.0/15 } accept")
    assert findings(node(nft(ok))) == []


def test_a_chain_not_read_makes_it_a_warning():
    fw = iptables("-P INPUT DROP\n-A INPUT -j KUBE-FIREWALL\n")
    [f] = findings(node(fw))
    assert f["severity"] == "warning" and "KUBE-FIREWALL" in f["message"]


def test_one_node_gets_info_and_a_cluster_of_two_the_error():
    doc = node(iptables(RHEL))
    del doc["sections"]["host"]
    doc["sections"]["env"] = {"status": "ok", "data": {"other": {"MASTER_ADDR": "127.0.0.1"}}}
    [f] = findings(doc)
    assert f["severity"] == "info"
    with cluster_of(2):
        [f] = findings(doc)
    assert f["severity"] == "error"
