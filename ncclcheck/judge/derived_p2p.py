"""``log-socket-bad-address`` after init: the first point-to-point connection, not the bootstrap.

``ncclSocketInit: connecting to address with family N is neither AF_INET(2) nor AF_INET6(10)``
(src/misc/socket.cc) means a rank was handed bytes that are not a peer address. During init that
is the bootstrap exchange (NCCL_SOCKET_IFNAME naming no interface on some rank, NVIDIA/nccl#1837;
ranks on different NCCL builds): the signature's own words. When every process of the log had
already printed Init COMPLETE, the line comes from the connection NCCL sets up when point-to-point
work is first launched (``ncclTransportP2pSetup`` from src/group.cc, the ``connect`` of the
transport with the peer's connect data, src/transport.cc, v2.29.2-1). In NVIDIA/nccl#2057 (NCCL
2.29.2, two ranks over NET/Socket) both ranks called ncclSend then ncclRecv outside a group: rank 0
read family 1 and rank 1 family 0, and the call returned "internal error"; grouping the calls or
ordering them send/recv on one rank and recv/send on the other made it pass, as NCCL's
point-to-point docs ask ("operations that need to progress concurrently ... need to be grouped").
"""

from __future__ import annotations

from ncclcheck.logparse.state import LogState
from ncclcheck.signatures.base import Detail

P2P_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html"
CAUSE = ("Every rank had finished init, so the address was not the bootstrap's: NCCL connects "
         "point-to-point peers when send/recv work is first launched (ncclTransportP2pSetup, "
         "src/group.cc), with connect data the peer sends once it posts the matching operation. "
         "ncclSend/ncclRecv issued outside a group, send first on both ranks, start connecting "
         "before that data exists, and the socket transport reads an address that was never "
         "filled in (NVIDIA/nccl#2057: family 1 on one rank, 0 on the other, 'internal error'). "
         "Ranks on different NCCL builds or network plugins can print the same line.")
FIX = ("Issue each matching ncclSend/ncclRecv pair inside one ncclGroupStart()/ncclGroupEnd() "
       f"({P2P_DOCS}), or order them send/recv on one rank and recv/send on the other; if they "
       "are grouped already, make NCCL, its network plugin and the NCCL_* environment identical "
       "on every rank.")


def check_bad_address_after_init(state: LogState) -> None:
    """Give ``log-socket-bad-address`` the point-to-point cause when each line of it comes after
    the Init COMPLETE of every process of the same file (a log without NCCL processes, only the
    framework's 'Last error:' text, keeps the signature's bootstrap words)."""
    acc = state.findings.get("log-socket-bad-address")
    if acc is None or not acc.evidence:
        return
    for ev in acc.evidence:
        procs = [p for p in state.procs.values()
                 if p.first is not None and p.first[0] == ev["file"] and p.first[1] < ev["line"]]
        done = [p.evidence.get("init_complete") for p in procs]
        if not procs or not all(d and d["file"] == ev["file"] and d["line"] < ev["line"]
                                for d in done):
            return
    old = acc.detail or Detail()
    acc.detail = Detail(message=old.message, variant=old.variant, severity=old.severity,
                        cause=CAUSE, fix=FIX)
