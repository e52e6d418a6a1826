"""The rendezvous, checked before any collective: it resolves, it is reachable, everyone came.

torch.distributed waits ``--timeout`` (300 s) for a rendezvous address that does not resolve,
that no one listens on, or that a rank never reaches. Every rank runs :func:`join` first and
fails within :data:`DEADLINE_S` naming the address, the rank and node, and the fix:

1. :func:`resolve` the address (bounded: a resolver may stall on DNS). Inside a Slurm job a
   node name that does not resolve is looked up in Slurm (``scontrol show node NAME`` gives
   ``NodeAddr``), as clusters whose node names are Slurm's own need.
2. Rank 0 hosts the store: the address must be one of this node's (:func:`is_local`).
3. Every other rank connects to ``ADDR:PORT`` until rank 0's store listens
   (:func:`wait_reachable`), then joins the store and signs in; rank 0 waits for every sign-in
   and names the ranks that never came.

``join`` gets ``torch.distributed`` from :mod:`ncclcheck.bench.worker`, the only module that
imports torch; everything else here is plain sockets.
"""

from __future__ import annotations

import datetime
import errno
import ipaddress
import re
import socket
import subprocess
import threading
import time
from typing import Any

#: Seconds within which a rank that cannot rendezvous fails.
DEADLINE_S = 15.0
SCONTROL_TIMEOUT_S = 5.0
FIX = ("pass --master-addr (or MASTER_ADDR) with an address of the first node that every node "
       "can reach, or make the name resolve on every node (/etc/hosts, DNS)")
#: What a firewall means for NCCL beyond the rendezvous: every rank's bootstrap connects to the
#: next rank and accepts the previous one (socketRingConnect: ncclSocketConnect, then
#: ncclSocketAccept, in src/bootstrap.cc at v2.23.4-1), and the socket transport listens and
#: accepts on every rank (ncclNetSocketListen/Accept, src/transport/net_socket.cc): every node
#: must accept TCP from the others, where gloo's full mesh connects each pair once, one way.
BOTH_WAYS = ("NCCL needs TCP both ways between the nodes: a gloo run over one-way connections "
             "does not prove NCCL's rings")


def port_taken(ip: str, port: int) -> bool:
    """Whether ``ip:port`` is already bound here (another listener: a busy --master-port).

    >>> with socket.socket() as s:
    ...     s.bind(("127.0.0.1", 0)); s.listen(); port_taken("127.0.0.1", s.getsockname()[1])
    True
    """
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, port))
            return False
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE


def firewall_hint(where: str) -> str:
    """The firewall as the likely cause, where to look, and what it means for NCCL.

    >>> firewall_hint("node1")
    "a firewall on node1 likely drops it: run `ncclcheck probe` on node1 (its INPUT rules) and accept TCP from the nodes' subnet; NCCL needs TCP both ways between the nodes: a gloo run over one-way connections does not prove NCCL's rings"
    """
    return (f"a firewall on {where} likely drops it: run `ncclcheck probe` on {where} (its INPUT "
            f"rules) and accept TCP from the nodes' subnet; {BOTH_WAYS}")


class RendezvousError(Exception):
    """A rank cannot rendezvous: a one-line message naming the address and the fix (the caller
    prefixes ``rank R on NODE``, as every rank failure is named)."""


def parse_node_addr(text: str) -> str | None:
    """``NodeAddr`` from ``scontrol show node NAME`` (recorded on Slurm 22.05)::

        NodeName=node1 Arch=x86_64 CoresPerSocket=1
           CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.25
           NodeAddr=198.18.0.11 NodeHostName=node1 Version=22.05.8

    >>> parse_node_addr("NodeName=node1 Arch=x86_64\\n   NodeAddr=198.18.0.11 NodeHostName=node1")
    '198.18.0.11'
    >>> parse_node_addr("Node node9 not found") is None
    True
    """
    match = re.search(r"(?:^|\s)NodeAddr=(\S+)", text)
    return match.group(1) if match and match.group(1) not in ("(null)", "") else None


def slurm_node_addr(name: str, timeout: float = SCONTROL_TIMEOUT_S) -> str | None:
    """What Slurm knows as ``name``'s address, or None (no scontrol, unknown node, no answer)."""
    try:
        proc = subprocess.run(["scontrol", "show", "node", "--", name], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_node_addr(proc.stdout) if proc.returncode == 0 else None


def getaddr(name: str, timeout: float) -> str:
    """The first IPv4 address ``name`` resolves to, within ``timeout`` s (OSError if not)."""
    found: dict[str, Any] = {}

    def look() -> None:
        try:
            infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
            found["ip"] = infos[0][4][0]
        except OSError as exc:
            found["err"] = exc

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(timeout)
    if "ip" in found:
        return found["ip"]
    if "err" in found:
        raise OSError(getattr(found["err"], "strerror", None) or str(found["err"]))
    raise OSError(f"no answer from the resolver within {timeout:g} s")


def resolve(addr: str, environ: dict[str, str],
            timeout: float = DEADLINE_S / 3) -> tuple[str, str]:
    """The IPv4 address of ``addr`` and how it was found (``literal``, ``resolver``, ``slurm``).

    >>> resolve("198.18.0.11", {})
    ('198.18.0.11', 'literal')
    """
    try:
        return str(ipaddress.IPv4Address(addr)), "literal"
    except ValueError:
        pass
    try:
        return getaddr(addr, timeout), "resolver"
    except OSError as exc:
        why = str(exc)
    if environ.get("SLURM_JOB_ID"):
        node_addr = slurm_node_addr(addr)
        if node_addr and node_addr != addr:
            try:
                return str(ipaddress.IPv4Address(node_addr)), "slurm"
            except ValueError:
                try:
                    return getaddr(node_addr, timeout), "slurm"
                except OSError as exc:
                    why += f"; Slurm's NodeAddr {node_addr} does not resolve either ({exc})"
        else:
            why += "; Slurm knows no NodeAddr for it"
    raise RendezvousError(f"the rendezvous address {addr} does not resolve ({why}); "
                          f"fix: {FIX}")


def is_local(ip: str) -> bool:
    """Whether ``ip`` is an address of this node (rank 0 can listen on it)."""
    if ipaddress.ip_address(ip).is_loopback:
        return True
    with socket.socket() as s:
        try:
            s.bind((ip, 0))
            return True
        except OSError:
            return False


def wait_reachable(ip: str, port: int, label: str, deadline: float) -> None:
    """Connect to ``ip:port`` until it answers, or raise once ``deadline`` (monotonic) passes."""
    last = "no attempt"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            if last == "Connection refused":  # a host that answers: no listener there
                raise RendezvousError(f"cannot reach the rendezvous at {label}:{port} within "
                                      f"{DEADLINE_S:g} s ({last}); rank 0 did not start its "
                                      f"store there; fix: {FIX}")
            raise RendezvousError(f"cannot reach the rendezvous at {label}:{port} within "
                                  f"{DEADLINE_S:g} s ({last}): {firewall_hint(label)}")
        with socket.socket() as s:
            s.settimeout(min(2.0, max(left, 0.1)))
            try:
                s.connect((ip, port))
                return
            except OSError as exc:
                last = exc.strerror or str(exc) or type(exc).__name__
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def describe(addr: str, ip: str) -> str:
    """``node1 (198.18.0.11)``, or just the address when it is one."""
    return ip if addr == ip else f"{addr} ({ip})"


def check_address(addr: str, rank: int, environ: dict[str, str]) -> tuple[str, str]:
    """What :func:`join` refuses before any connection: an address that does not resolve, or
    one that is not rank 0's own. Inside a launcher the rank checks this before it imports
    torch (seconds of a rank's start), so a wrong address fails at once; :func:`join` then
    takes the answer as ``resolved``. The address as :func:`resolve` gives it.

    >>> check_address("198.18.254.254", 0, {})
    Traceback (most recent call last):
    ...
    ncclcheck.bench.meet.RendezvousError: rank 0 hosts the rendezvous store but 198.18.254.254 is not an address of this node; fix: pass --master-addr (or MASTER_ADDR) with an address of the first node that every node can reach, or make the name resolve on every node (/etc/hosts, DNS)
    >>> check_address("198.18.254.254", 1, {})
    ('198.18.254.254', 'literal')
    """
    ip, how = resolve(addr, environ)
    if rank == 0 and not is_local(ip):
        raise RendezvousError(f"rank 0 hosts the rendezvous store but {describe(addr, ip)} is "
                              f"not an address of this node; fix: {FIX}")
    return ip, how


def join(dist: Any, ident: dict[str, Any], timeout_s: float, environ: dict[str, str],
         host: str | None = None, deadline_s: float = DEADLINE_S,
         resolved: tuple[str, str] | None = None) -> Any:
    """Meet every rank at the rendezvous store and return it (its timeout then ``timeout_s``).

    Sets ``ident["master_addr"]`` to the address it resolved to (``resolved``: what
    :func:`check_address` already answered for it).

    Raises:
        RendezvousError: within about ``deadline_s``, naming the address, rank and node.
    """
    host = host or socket.gethostname()
    rank, world = int(ident["rank"]), int(ident["world_size"])
    addr, port = str(ident["master_addr"]), int(ident["master_port"])
    deadline = time.monotonic() + deadline_s
    ip, _how = resolved or check_address(addr, rank, environ)
    ident["master_addr"] = ip
    label = describe(addr, ip)
    short = datetime.timedelta(seconds=deadline_s)
    if rank == 0:
        # No check before: under torchrun the agent's own store already listens on this port
        # and torch's TCPStore still starts (its listeners share the port); only a failure is
        # told apart, as a port in use or a firewall.
        try:
            store = dist.TCPStore(ip, port, world, True, short, wait_for_workers=False)
        except Exception as exc:  # noqa: BLE001 - port taken, or a firewall: one line
            if port_taken(ip, port) or "in use" in str(exc):
                raise RendezvousError(f"cannot listen on {label}:{port} for the rendezvous "
                                      f"(the port is in use); fix: pass a free "
                                      "--master-port") from None
            # it listened, and its own connection to itself got no answer
            raise RendezvousError(f"its own connection to the rendezvous store at "
                                  f"{label}:{port} got no answer within {deadline_s:g} s though "
                                  f"the port is free: {firewall_hint(host)}") from None
        keys = [f"ncclcheck/joined/{r}" for r in range(1, world)]
        while keys and not store.check(keys):
            if time.monotonic() > deadline:
                missing = [k.rsplit("/", 1)[1] for k in keys if not store.check([k])]
                raise RendezvousError(
                    f"rank{'s' if len(missing) > 1 else ''} {', '.join(missing)} did "
                    f"not reach the rendezvous at {label}:{port} within {deadline_s:g} s (their "
                    f"own errors say why); fix: {FIX}")
            time.sleep(0.05)
    else:
        wait_reachable(ip, port, label, deadline)
        try:
            store = dist.TCPStore(ip, port, world, False, short)
            store.set(f"ncclcheck/joined/{rank}", host)
        except Exception as exc:  # noqa: BLE001
            raise RendezvousError(f"joined {label}:{port} but the store did not "
                                  f"answer ({str(exc).splitlines()[0] if str(exc) else exc}); "
                                  f"fix: {FIX}") from None
    store.set_timeout(datetime.timedelta(seconds=float(timeout_s)))
    return store
