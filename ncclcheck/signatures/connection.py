"""TCP connections between ranks refused, timed out or closed (§9 row 20)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import (
    NCCL_ENV,
    NCCL_TROUBLESHOOTING,
    Detail,
    Signature,
    compile_all,
)


def _refused_detail(m: re.Match[str]) -> Detail:
    groups = m.groupdict()
    reason = groups.get("reason") or "failed"
    peer = groups.get("peer")
    return Detail(message=f"a connection to {peer or 'a peer'} failed: {reason}", variant=reason)


CONNECTION_REFUSED = Signature(
    id="log-connection-refused",
    title="a TCP connection between ranks was refused or timed out",
    severity="error",
    cause="NCCL's bootstrap and socket connections use ephemeral TCP ports between all nodes; a "
          "firewall or security group dropping them, the wrong interface or route (a docker or "
          "link-local address), or a peer that already died makes connect() fail.",
    fix="Open TCP between the nodes (or restrict net.ipv4.ip_local_port_range and open that range); "
        "test with `nc -l <port>` on one node and `nc <node> <port>` from the other; pin "
        "NCCL_SOCKET_IFNAME to the data NIC; check that the peer is still alive.",
    docs=f"{NCCL_TROUBLESHOOTING} (networking: IP ports); {NCCL_ENV}#nccl-socket-retry-cnt; "
         "src/misc/socket.cc; https://github.com/NVIDIA/nccl-tests/issues/162",
    patterns=compile_all(
        r"(?:socketStartConnect: )?[Cc]onnect to (?P<peer>\S+) (?:failed|returned)\s*:?\s*"
        r"(?P<reason>Connection refused|Connection timed out|Software caused connection abort|"
        r"No route to host|Network is unreachable)",
        r"Call to connect(?: failed| timeout)\s*:\s*(?P<reason>Connection refused|Connection timed out|"
        r"No route to host)",
        r"returned (?P<reason>Connection refused|Connection timed out|No route to host), exceeded"),
    keywords=("onnect to", "Call to connect", "exceeded error retry"),
    explain=_refused_detail)

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

SIGNATURES = (CONNECTION_REFUSED, CONNECTION_CLOSED)
