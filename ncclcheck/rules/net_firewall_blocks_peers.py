"""net-firewall-blocks-peers: an INPUT firewall that drops what it does not allow, and allows
only some ports (ssh), while NCCL and the c10d store listen on ephemeral ports."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.net_same_subnet_nics import data_interfaces

#: Words that make an ACCEPT rule narrower than "any new TCP connection".
_NARROW = ("--dport", "--dports", "dport", "--ctstate", "--state", "ct state", "icmp",
           "--icmp-type", "-p udp", "udp ")
_SOURCE = re.compile(r"(?:-s|ip saddr)\s+([0-9./]+)")
_JUMP = re.compile(r"(?:-j|jump|goto)\s+(?!ACCEPT\b|DROP\b|REJECT\b|RETURN\b|LOG\b)([\w-]+)")
_IFACE = re.compile(r"(?:-i|iifname|iif)\s+\"?([\w.+-]+)\"?")


def admits_peers(rule: str, subnets: list[str], names: list[str]) -> bool:
    """Whether an iptables (``-s 10.0.0.0/8 -j ACCEPT``) or nft (``ip saddr 10.0.0.0/8 accept``)
    rule accepts new TCP connections from the node's subnets on any port.

    >>> admits_peers("-p tcp -m tcp --dport 22 -j ACCEPT", ["198.18.0.0/24"], ["eth0"])
    False
    >>> admits_peers("-s 198.18.0.0/16 -j ACCEPT", ["198.18.0.0/24"], ["eth0"])
    True
    >>> admits_peers("-i lo -j ACCEPT", ["198.18.0.0/24"], ["eth0"])
    False
    >>> admits_peers('iifname "eth0" accept', ["198.18.0.0/24"], ["eth0"])
    True
    """
    words = rule.split()
    if not (words[-2:] == ["-j", "ACCEPT"] or (words and words[-1] == "accept")):
        return False
    if any(n in rule for n in _NARROW):
        return False
    source = _SOURCE.search(rule)
    if source:
        try:
            net = ipaddress.ip_network(source.group(1), strict=False)
            if not any(ipaddress.ip_network(s).subnet_of(net) for s in subnets
                       if ipaddress.ip_network(s).version == net.version):
                return False
        except ValueError:
            return False
    iface = _IFACE.search(rule)
    return not iface or iface.group(1) in names


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when INPUT drops by default and no rule admits the node's subnets on every port;
    warn when ufw is enabled but the ruleset could not be read."""
    fw = fact(facts, "netpath.firewall", {})
    ifaces = data_interfaces(facts)
    names = [i["name"] for i in ifaces]
    subnets = sorted({str(a["subnet"]) for i in ifaces for a in i.get("ipv4") or []
                      if a.get("subnet")})
    if not fw.get("readable"):
        if fw.get("ufw_active"):
            return [Finding(
                message=("ufw is enabled and the ruleset could not be read "
                         f"({fw.get('why')}): peers may be refused on NCCL's ephemeral ports"),
                fix="Run `ufw status verbose` as root; allow the cluster subnet: "
                    "ufw allow from <subnet>",
                evidence={"netpath.firewall": fw}, severity=Severity.WARNING)]
        return []
    policy = str(fw.get("input_policy") or "ACCEPT").upper()
    rules = list(fw.get("input_rules") or [])
    if rules and rules[-1].split()[-2:] in (["-j", "DROP"], ["-j", "REJECT"]) and \
            len(rules[-1].split()) == 2:
        policy = rules[-1].split()[-1]
    if policy not in ("DROP", "REJECT") or any(admits_peers(r, subnets, names) for r in rules):
        return []
    allowed = [r for r in rules if r.split()[-1] in ("ACCEPT", "accept")]
    jumps = sorted({m.group(1) for r in rules
                    if not any(n in r for n in _NARROW) and (m := _JUMP.search(r))})
    if jumps:  # ufw, firewalld, kube-proxy: the verdict is in chains not read here
        return [Finding(
            message=(f"the firewall ({fw.get('tool')}) drops incoming connections by default "
                     f"(INPUT policy {policy}) and hands the rest to chains not evaluated here "
                     f"({', '.join(jumps[:4])}): unless they accept every port from the other "
                     "nodes, NCCL's and c10d's ephemeral ports are refused"),
            fix=("Check that the other nodes' subnet is trusted (ufw allow from <subnet>; "
                 "firewall-cmd --zone=trusted --add-source=<subnet>; iptables -I INPUT -s "
                 "<subnet> -j ACCEPT)"),
            evidence={"netpath.firewall": fw, "subnets": subnets}, severity=Severity.WARNING)]
    where = " or ".join(subnets) or "the cluster subnet"
    return [Finding(
        message=(f"the firewall ({fw.get('tool')}) drops incoming connections by default "
                 f"(INPUT policy {policy}) and accepts only: "
                 f"{'; '.join(allowed) or 'nothing'}: NCCL's bootstrap and socket transport and "
                 "the PyTorch c10d store listen on ephemeral ports, so peers cannot connect"),
        fix=(f"Accept everything from the other nodes, e.g. iptables -I INPUT -s {where} -j "
             "ACCEPT (or nft add rule inet filter input ip saddr <subnet> accept; ufw allow "
             "from <subnet>); opening one port is not enough"),
        evidence={"netpath.firewall": fw, "subnets": subnets},
    )]


RULE = Rule(
    id="net-firewall-blocks-peers",
    title="Let the other nodes connect on any port",
    severity=Severity.ERROR,
    reads=("netpath.firewall", "network.interfaces"),
    sets=(),
    why=("NCCL's bootstrap and Socket transport listen on ports the kernel picks "
         "(src/misc/socket.cc ncclSocketListen reads the chosen port back with getsockname; "
         "src/bootstrap.cc sends it to the peers), "
         "and so does every other rank's proxy; the c10d store uses MASTER_PORT. A firewall "
         "that drops INPUT by default and admits only ssh lets the job start and then hangs it "
         "at the first connection ('Connection timed out', 'socketPollConnect'). No port range "
         "setting covers all of NCCL's listeners, so the peers' subnet must be trusted."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html",
    fix="Trust the cluster subnet or interface in the firewall (iptables/nft/ufw).",
    check=check,
)
