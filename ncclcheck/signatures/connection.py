"""TCP connections between ranks refused, timed out, unreachable or closed (§9 row 20).

NCCL's connect messages by version (src/misc/socket.cc; src/os/linux.cc from 2.30):

* 2.19-2.23: WARN ``socketPollConnect: Connect to <addr> returned 113(No route to host) errno
  115(...)``, ``socketStartConnect: exceeded retries (20000)`` / ``exceeded timeouts (3)``, and
  INFO ``Call to connect returned Connection refused, retrying`` (every 1000th retry, no count:
  not reported, a healthy start-up can print it);
* 2.24-2.26: INFO ``socketPollConnect: connect returned No route to host, retrying (3/34) after
  sleep for 300 msec``, WARN ``... exceeded error retry count (34)`` and ``socketPollConnect
  poll() returned 1, no POLLOUT events``;
* 2.27+: the same with ``connect to <addr> returned``; 2.30 names the functions
  ``ncclOsSocketStartConnect`` / ``ncclOsSocketPollConnect``.

The errno says what happened to the SYN, and the address says which peer address was advertised;
:func:`connect_words` turns both into the cause and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Optional

from ncclcheck.signatures.base import (
    NCCL_ENV,
    NCCL_TROUBLESHOOTING,
    Detail,
    Signature,
    compile_all,
)

_REASONS = (r"Connection refused|Connection timed out|Software caused connection abort|"
            r"No route to host|Network is unreachable")
_FIREWALL_FIX = ("open TCP from the other nodes' subnet (iptables -I INPUT -s <subnet> -p tcp -j ACCEPT; "
                 "firewall-cmd --zone=trusted --add-source=<subnet>; the cloud security group), or "
                 "fix net.ipv4.ip_local_port_range and open that range")


def address_class(peer: Optional[str]) -> Optional[str]:
    """``loopback``, ``link-local`` or ``docker`` for a peer address NCCL printed, else None.

    >>> address_class("127.0.1.1<39953>"), address_class("[fe80::1%eth0]:1234"), address_class("172.17.0.2<5>")
    ('loopback', 'link-local', 'docker')
    >>> address_class("10.0.0.4<56849>") is None, address_class("node1<57557>") is None
    (True, True)
    """
    if not peer:
        return None
    host = peer.split("<")[0].strip("[]")
    if host.count(":") == 1 and "." in host:
        host = host.rsplit(":", 1)[0]                    # 1.2.3.4:port
    host = host.split("]")[0].strip("[").split("%")[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return None
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "link-local"
    if addr.version == 4 and addr in ipaddress.ip_network("172.17.0.0/16"):
        return "docker"
    return None


def connect_words(reason: str, peer: Optional[str]) -> tuple[str, str]:
    """The cause and the fix for a failed connect, from its errno text and the peer address.

    >>> connect_words("No route to host", "10.0.0.4<56849>")[0][:40]
    'No route to host (EHOSTUNREACH): no rout'
    >>> "loopback" in connect_words("Connection refused", "127.0.1.1<1>")[0]
    True
    """
    where = f" {peer}" if peer else " the peer"
    kind = address_class(peer)
    if kind == "loopback":
        return (f"The peer advertised a loopback address ({peer}): its host name resolves to "
                "127.0.0.1/127.0.1.1 (/etc/hosts) or NCCL_SOCKET_IFNAME selected lo, so other "
                "nodes connect to themselves.",
                "Set NCCL_SOCKET_IFNAME to the data NIC on every node (e.g. NCCL_SOCKET_IFNAME=eth0), "
                "and map the host name to the node's routable address in /etc/hosts.")
    if kind == "link-local":
        return (f"The peer advertised a link-local address ({peer}): valid on one link only "
                "(a veth, ip6tnl or unconfigured interface NCCL picked), not routable between "
                "nodes.",
                "Set NCCL_SOCKET_IFNAME to the data NIC on every node (and NCCL_SOCKET_FAMILY=AF_INET "
                "when only IPv6 link-local addresses are on it).")
    if kind == "docker":
        return (f"The peer advertised an address on docker's default bridge network ({peer}): "
                "every host has its own 172.17.0.0/16 behind NAT, so from another host that "
                "address is not the peer's (a container without --network=host, or NCCL picking "
                "docker0 on the host).",
                "Run the containers with --network=host (or give them addresses routable between "
                "hosts: macvlan, SR-IOV) and set NCCL_SOCKET_IFNAME to that interface; on the "
                "host, keep docker0 out (NCCL_SOCKET_IFNAME=^docker0,lo or the NIC's name).")
    if reason in ("No route to host", "Network is unreachable"):
        errno = "EHOSTUNREACH" if reason.startswith("No route") else "ENETUNREACH"
        return (f"{reason} ({errno}): no route from this node to{where}: the peer advertised an "
                "address in a subnet this node cannot reach (a second NIC's subnet, a bridge "
                "address), or a firewall rejected the SYN with ICMP host-prohibited (the RHEL / "
                "firewalld default REJECT gives this errno).",
                f"From this node run `ip route get <peer address>` and `nc -zv <peer address> <port>`; "
                f"pin NCCL_SOCKET_IFNAME to the interface in the subnet all nodes share; "
                f"{_FIREWALL_FIX}.")
    if reason in ("Connection timed out", "no POLLOUT"):
        return (f"The SYN to{where} was never answered: a firewall or security group drops TCP to "
                "NCCL's ephemeral ports (DROP, not REJECT), or the address is not reachable as "
                "advertised (NAT, a container network).",
                f"Check with `nc -zv <peer address> <port>` from this node; {_FIREWALL_FIX}; pin "
                "NCCL_SOCKET_IFNAME to the data NIC.")
    if reason == "Connection refused":
        return (f"{peer or 'The peer'} answered with a reset: nothing listens on that port (the peer "
                "process died, or exited before this rank connected), or a firewall REJECTs with "
                "tcp-reset.",
                "Find the first error of the peer process (its own log); if it is alive, check the "
                f"firewall on its node: {_FIREWALL_FIX}.")
    return ("NCCL's bootstrap and socket connections use ephemeral TCP ports between all nodes; a "
            "firewall or security group dropping them, the wrong interface or route (a docker or "
            "link-local address), or a peer that already died makes connect() fail.",
            "Open TCP between the nodes (or restrict net.ipv4.ip_local_port_range and open that "
            "range); test with `nc -l <port>` on one node and `nc <node> <port>` from the other; pin "
            "NCCL_SOCKET_IFNAME to the data NIC; check that the peer is still alive.")


def _refused_detail(m: re.Match[str]) -> Detail:
    groups = m.groupdict()
    reason = groups.get("reason") or ("no POLLOUT" if groups.get("pollout") else "failed")
    peer = groups.get("peer")
    cause, fix = connect_words(reason, peer)
    if groups.get("pollout"):
        message = ("socketPollConnect: the connection failed before it was established (poll "
                   "returned no POLLOUT; NCCL 2.24-2.26 do not retry this)")
    else:
        message = f"a connection to {peer or 'a peer'} failed: {reason}"
    return Detail(message=message, variant=reason, cause=cause, fix=fix)


CONNECTION_REFUSED = Signature(
    id="log-connection-refused",
    title="a TCP connection between ranks was refused, timed out or had no route",
    severity="error",
    cause="NCCL's bootstrap and socket connections use ephemeral TCP ports between all nodes; a "
          "firewall or security group dropping them, the wrong interface or route (a docker or "
          "link-local address), or a peer that already died makes connect() fail.",
    fix="Open TCP between the nodes (or restrict net.ipv4.ip_local_port_range and open that range); "
        "test with `nc -l <port>` on one node and `nc <node> <port>` from the other; pin "
        "NCCL_SOCKET_IFNAME to the data NIC; check that the peer is still alive.",
    docs=f"{NCCL_TROUBLESHOOTING} (networking: IP ports); {NCCL_ENV}#nccl-socket-retry-cnt; "
         "src/misc/socket.cc (socketConnectCheck); https://github.com/NVIDIA/nccl-tests/issues/162; "
         "https://github.com/NVIDIA/nccl/pull/1618",
    patterns=compile_all(
        r"(?:socketStartConnect: )?[Cc]onnect to (?P<peer>\S+) (?:failed|returned)\s*:?\s*"
        r"(?:\d{1,4}\()?(?P<reason>" + _REASONS + ")",
        r"Call to connect(?: failed| timeout)\s*:\s*(?P<reason>Connection refused|Connection timed out|"
        r"No route to host)",
        r"returned (?P<reason>" + _REASONS + r"), exceeded",
        r"poll\(\) failed, ret \d+, error (?P<reason>" + _REASONS + r")(?:.*?connect to (?P<peer>\S+))?",
        r"socketPollConnect poll\(\) returned \d+(?P<pollout>, no POLLOUT events)",
        r"socket\w*Connect: exceeded (?P<retries>retries|timeouts) \(\d+\)"),
    keywords=("onnect to", "Call to connect", "exceeded error retry", "POLLOUT", "poll() failed",
              "exceeded retries", "exceeded timeouts"),
    explain=lambda m: _exceeded_detail(m) if m.groupdict().get("retries") else _refused_detail(m))


def _exceeded_detail(m: re.Match[str]) -> Detail:
    reason = "Connection refused" if m.group("retries") == "retries" else "Connection timed out"
    cause, fix = connect_words(reason, None)
    return Detail(message=f"NCCL gave up connecting to a peer after repeated '{reason}'",
                  variant=reason, cause=cause, fix=fix)


def _retry_detail(m: re.Match[str]) -> Detail:
    groups = m.groupdict()
    reason, peer = groups["reason"], groups.get("peer")
    cause, fix = connect_words(reason, peer)
    count = f" ({groups['n']}/{groups['max']})" if groups.get("n") else ""
    bad = reason != "Connection refused" or address_class(peer) is not None
    return Detail(message=f"NCCL retried a connection to {peer or 'a peer'}: {reason}{count}",
                  variant=reason, cause=cause, fix=fix, severity="warning" if bad else "info")


CONNECTION_RETRY = Signature(
    id="log-connection-retry",
    title="NCCL retried TCP connections to a peer",
    severity="info",
    cause="connect() failed with an error NCCL retries (refused, timed out, no route); each retry "
          "sleeps longer (NCCL_SOCKET_RETRY_SLEEP_MSEC x attempt, up to NCCL_SOCKET_RETRY_CNT "
          "attempts), so communicator creation stalls, and fails once they run out.",
    fix="See the reason: a route or firewall problem does not go away by retrying.",
    docs=f"{NCCL_ENV}#nccl-socket-retry-cnt; src/misc/socket.cc (socketConnectCheck, NCCL 2.24+; "
         "src/os/linux.cc in 2.30); https://github.com/NVIDIA/nccl/issues/1515",
    patterns=compile_all(
        r"connect (?:to (?P<peer>\S+) )?returned (?P<reason>" + _REASONS + r"), retrying"
        r"(?: \((?P<n>\d+)/(?P<max>\d+)\))?"),
    keywords=("retrying",),
    scope="info",
    info_starts=("socketStartConnect", "socketPollConnect", "ncclOsSocket"),
    explain=_retry_detail)

CONNECTION_CLOSED = Signature(
    id="log-connection-closed",
    title="a peer closed its connection",
    severity="warning",
    cause="The process at the other end of an NCCL socket closed it, usually because that rank "
          "failed or exited first; occasionally a network device reset the connection.",
    fix="Find the first error on the peer named in the message (its own log or stderr); the "
        "closed connection is a consequence.",
    docs="src/misc/socket.cc (socketProgress); https://github.com/NVIDIA/nccl/issues/1232",
    patterns=compile_all(r"Connection closed by remote peer(?: (?P<peer>\S+))?",
                         r"socketProgress(?:Opt)?: Connection reset by peer",
                         r"Call to recv failed\s*:\s*Connection reset by peer"),    # NCCL 2.0-2.3
    keywords=("Connection closed by remote peer", "Connection reset by peer"),
    explain=lambda m: Detail(message=f"the connection from {m.groupdict().get('peer') or 'a peer'} "
                                     "was closed by the remote side"))

SIGNATURES = (CONNECTION_REFUSED, CONNECTION_RETRY, CONNECTION_CLOSED)
