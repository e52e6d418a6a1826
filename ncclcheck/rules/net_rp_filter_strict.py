"""net-rp-filter-strict: strict reverse-path filtering on a node with several NICs, on an
interface NCCL's sockets use (NCCL_SOCKET_IFNAME's, or not an RDMA port's netdev: RDMA traffic
never passes the kernel's reverse-path check)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact
from ncclcheck.rules.common import configured
from ncclcheck.rules.net_same_subnet_nics import data_interfaces, effective


def ifname_matches(spec: str, names: list[str]) -> list[str]:
    """The interfaces an NCCL_SOCKET_IFNAME value selects (``^`` excludes, ``=`` is exact,
    otherwise a prefix; matchIfList in src/misc/utils.cc@v2.30.7-1).

    >>> ifname_matches("=eth0", ["eth0", "eth01"]), ifname_matches("^eth1", ["eth0", "eth1"])
    (['eth0'], ['eth0'])
    >>> ifname_matches("ens,bond", ["ens5", "bond0", "eth0"])
    ['ens5', 'bond0']
    """
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    parts = [p.strip() for p in text.lstrip("=").split(",") if p.strip()]

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in parts)
    return [n for n in names if hit(n) != exclude]


def socket_interfaces(facts: dict[str, Any]) -> list[str]:
    """The data interfaces NCCL's sockets use: those NCCL_SOCKET_IFNAME selects; unset, those
    that are not the netdev of an RDMA port (RoCE rails carry RDMA, which rp_filter does not
    see), unless nothing else is left."""
    names = [i["name"] for i in data_interfaces(facts)]
    spec = configured(facts, "NCCL_SOCKET_IFNAME")
    if spec and len(spec.strip()) > 1:
        return ifname_matches(spec, names)
    rdma = {p.get("netdev") for d in fact(facts, "ib.devices", []) or []
            for p in d.get("ports") or [] if p.get("netdev")}
    rest = [n for n in names if n not in rdma]
    return rest or names


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when a node has two or more data interfaces and rp_filter is 1 on one that NCCL's
    sockets use."""
    ifaces = [i["name"] for i in data_interfaces(facts)]
    if len(ifaces) < 2:
        return []
    sysctl = fact(facts, "netpath.sysctl", {})
    used = socket_interfaces(facts)
    strict = [n for n in used if effective(sysctl, n, "rp_filter") == 1]
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
    reads=("network.interfaces", "netpath.sysctl", "env.nccl?", "nccl.conf_env?", "ib.devices?"),
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
