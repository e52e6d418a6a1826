"""net-firewall-blocks-peers: the INPUT firewall, walked as the kernel walks it (first match,
then policy), refuses a peer's new TCP connection to an ephemeral port, where NCCL and the c10d
store listen: a DROP policy that admits only ssh, RHEL's final
``-j REJECT --reject-with icmp-host-prohibited``, a ``-s <subnet> -j DROP``."""

from __future__ import annotations

import ipaddress
from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.firewall_walk import EPHEMERAL, Packet, Verdict, bases, chains_of, walk
from ncclcheck.rules.net_same_subnet_nics import data_interfaces

def _peers(facts: dict[str, Any]) -> list[tuple[Any, str, str]]:
    """(peer subnet, interface, this node's address) for each IPv4 subnet of a data interface."""
    out, seen = [], set()
    for iface in data_interfaces(facts):
        for addr in iface.get("ipv4") or []:
            sub = addr.get("subnet")
            if not sub or sub in seen:
                continue
            try:
                out.append((ipaddress.ip_network(sub, strict=False), iface["name"],
                            str(addr.get("address") or "")))
                seen.add(sub)
            except ValueError:
                continue
    return out


def fix_command(fw: dict[str, Any], base: dict[str, Any], subnet: str) -> str:
    """One runnable command that admits ``subnet`` ahead of the rule that refused it.

    >>> fix_command({"ufw_active": True}, {"chain": "INPUT", "syntax": "iptables"}, "10.0.0.0/8")
    'ufw allow from 10.0.0.0/8'
    >>> fix_command({}, {"chain": "inet filter/input", "syntax": "nft"}, "10.0.0.0/8")
    'nft insert rule inet filter input ip saddr 10.0.0.0/8 accept'
    """
    chain = str(base.get("chain"))
    names = " ".join(fw.get("chains") or {})
    if "firewalld" in chain or "INPUT_ZONES" in names:
        return (f"firewall-cmd --permanent --zone=trusted --add-source={subnet} && "
                "firewall-cmd --reload")
    if base.get("syntax") == "nft":
        table, _, name = chain.partition("/")
        return f"nft insert rule {table} {name} ip saddr {subnet} accept"
    if fw.get("ufw_active"):
        return f"ufw allow from {subnet}"
    return f"iptables -I {chain} -s {subnet} -j ACCEPT"


def check(facts: dict[str, Any]) -> list[Finding]:
    """Walk each input-hook chain for a new TCP connection from each data subnet to an
    ephemeral port: error when it is dropped for sure, warning when a rule or chain that could
    not be judged decides it; warn when ufw is enabled but the ruleset could not be read."""
    fw = fact(facts, "netpath.firewall", {})
    if not fw.get("readable"):
        if fw.get("ufw_active"):
            return [Finding(
                message=("ufw is enabled and the ruleset could not be read "
                         f"({fw.get('why')}): peers may be refused on NCCL's ephemeral ports"),
                fix="Run `ufw status verbose` as root; allow the cluster subnet: "
                    "ufw allow from <subnet>",
                evidence={"netpath.firewall": fw}, severity=Severity.WARNING)]
        return []
    chains = chains_of(fw)
    span = fw.get("local_port_range") or []
    ports = (int(span[0]), int(span[1])) if len(span) == 2 else EPHEMERAL
    blocked: list[tuple[str, str, dict[str, Any], Verdict]] = []
    for subnet, iface, address in _peers(facts):
        pkt = Packet(subnet, iface, address, ports)
        for base in bases(fw):
            verdict = walk(chains, base["chain"], base.get("policy"), base.get("syntax", ""), pkt)
            if verdict.action == "drop":
                blocked.append((str(subnet), iface, base, verdict))
                break
    if not blocked:
        return []
    sure = all(v.sure for *_, v in blocked)
    first = blocked[0][3]
    where = ", ".join(f"{s} on {i}" for s, i, *_ in blocked)
    chain = first.chain.rsplit("/", 1)[-1]
    if first.rule.startswith("policy "):
        allowed = [r for r in chains.get(first.chain, [])
                   if r.split()[-1:] in (["ACCEPT"], ["accept"])]
        decides = (f"drops it by default (INPUT policy {first.rule.split()[-1]}) and accepts "
                   f"only: {'; '.join(allowed) or 'nothing'}")
    else:
        decides = f"drops it at the rule '{first.rule}' of {chain} (the first that matches)"
    unknown = sorted({c for *_, v in blocked for c in v.unknown_chains})
    doubt = ("" if sure else
             f"; rules or chains it could not judge came first ({', '.join(unknown[:4])})"
             if unknown else "; a rule it could not judge (a set, a rate limit) came first")
    return [Finding(
        message=(f"the firewall ({fw.get('tool')}) refuses a new TCP connection from {where} to "
                 f"an ephemeral port: it {decides}{doubt}. NCCL's bootstrap and socket "
                 "transport and the PyTorch c10d store listen on ephemeral ports, so peers "
                 "cannot connect"),
        fix=("Accept everything from the other nodes, one command per subnet: "
             + "; ".join(fix_command(fw, base, s) for s, _, base, _ in blocked)
             + " (persist it in the firewall's configuration); or open the whole "
             "net.ipv4.ip_local_port_range to them, as NCCL's docs show; one port is not enough"),
        evidence={"netpath.firewall": {k: fw.get(k) for k in ("tool", "input_policy",
                                                                  "input_rules", "ufw_active")},
                  "blocked": {s: {"interface": i, "chain": v.chain, "rule": v.rule,
                                  "sure": v.sure} for s, i, _, v in blocked}},
        severity=None if sure else Severity.WARNING,
    )]


RULE = Rule(
    id="net-firewall-blocks-peers",
    title="Let the other nodes connect on any port",
    severity=Severity.ERROR,
    reads=("netpath.firewall", "network.interfaces"),
    sets=(),
    why=("NCCL's bootstrap and Socket transport listen on port 0, so the kernel picks an "
         "ephemeral port from net.ipv4.ip_local_port_range (src/misc/socket.cc@v2.30.7-1 "
         "ncclSocketListen reads it back with getsockname; src/bootstrap.cc sends it to the "
         "peers), and so does every rank's proxy; the c10d store uses MASTER_PORT. NCCL's "
         "networking troubleshooting page (IP ports) restricts that range with the sysctl to "
         "open it in a firewall. The kernel walks INPUT rule by rule, the first match "
         "decides, then the policy: a chain that refuses a peer's new connection to that range "
         "lets the job start and hangs it at the first connection ('Connection timed out', "
         "'socketPollConnect')."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html",
    fix="Trust the cluster subnet or interface in the firewall (iptables/nft/ufw).",
    check=check,
    peers=True,
)
