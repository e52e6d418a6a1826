"""net-rp-filter-strict: strict reverse-path filtering on a node with several NICs."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.net_same_subnet_nics import data_interfaces, effective


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when a node has two or more data interfaces and rp_filter is 1 on any of them."""
    ifaces = [i["name"] for i in data_interfaces(facts)]
    if len(ifaces) < 2:
        return []
    sysctl = fact(facts, "netpath.sysctl", {})
    strict = [n for n in ifaces if effective(sysctl, n, "rp_filter") == 1]
    if not strict:
        return []
    return [Finding(
        message=(f"strict reverse-path filtering (rp_filter=1) on {', '.join(strict)} of "
                 f"{len(ifaces)} interfaces ({', '.join(ifaces)}): a packet that arrives on an "
                 "interface other than the one the reply would leave by is dropped silently"),
        fix=("Use loose mode: sysctl -w net.ipv4.conf.all.rp_filter=2 and "
             + " ".join(f"net.ipv4.conf.{n}.rp_filter=2" for n in strict)
             + " (persist in /etc/sysctl.d/); or give each NIC its own subnet"),
        evidence={"netpath.sysctl.rp_filter": {n: effective(sysctl, n, "rp_filter")
                                               for n in ifaces},
                  "rp_filter.all": (sysctl.get("all") or {}).get("rp_filter")},
    )]


RULE = Rule(
    id="net-rp-filter-strict",
    title="Use loose reverse-path filtering on multi-NIC nodes",
    severity=Severity.WARNING,
    reads=("network.interfaces", "netpath.sysctl"),
    sets=(),
    why=("NCCL opens connections between addresses of the interfaces it selected on each node "
         "(src/misc/socket.cc). With several NICs, and especially several in one subnet, a "
         "peer's packet can arrive on an interface other than the one the kernel would route "
         "the reply through; rp_filter=1 (strict, RFC 3704) then drops it without an error, so "
         "NCCL's bootstrap or socket transport hangs until its timeout. The kernel applies the "
         "larger of conf.all and conf.<if> (Documentation/networking/ip-sysctl.rst)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html",
    fix="Set rp_filter=2 (loose) on all and on each NIC, or 0; or one subnet per NIC.",
    check=check,
    peers=True,
)
