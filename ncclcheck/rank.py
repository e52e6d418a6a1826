"""``ncclcheck rank``: which node is this one, as shell assignments for torchrun.

Run the same command on every node; each prints its own ``NODE_RANK``::

    $ eval "$(ncclcheck rank --hostfile hosts)"
    $ torchrun --nnodes=$NNODES --node-rank=$NODE_RANK --nproc-per-node=8 \\
          --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py

This node is the hostfile entry that names one of its non-loopback interface addresses
(``psutil.net_if_addrs``) or host names (``socket.gethostname``, FQDN), else whose name resolves
to one (``getaddrinfo``, 2 s per name; Debian's 127.0.1.1 for the own name does not count). A
one-entry hostfile naming ``localhost`` or a loopback address (DeepSpeed's ``localhost slots=8``)
is this node; in several entries it would be a different machine on each node: refused.
``MASTER_ADDR`` is the first entry as written. Without ``--hostfile``, a Kubernetes pod's job
API or mpirun gives the values (:func:`rank_values`).

``MASTER_PORT`` is the same on every node, or the command fails: a worker cannot see the master's
ports, so every node prints the first port of ``--port-range`` (default 29500-29599) and the
master checks that it is free there; when busy, the master exits 1 and names a free port of the
range to pass to every node as ``--master-port``. A single node takes the first free port.
"""

from __future__ import annotations

import ipaddress
import queue
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.hostfile import Target

RESOLVE_TIMEOUT = 2.0
#: Threads that resolve hostfile names at once, and the bound on the whole resolution pass.
RESOLVE_WORKERS = 32
RESOLVE_OVERALL = 30.0
DEFAULT_PORT_RANGE = (29500, 29599)


@dataclass
class Identity:
    """How this node knows itself: non-loopback addresses and lower-case host names."""

    addresses: set
    names: set

    def describe(self) -> str:
        """A short summary for error messages."""
        names = ", ".join(sorted(self.names)) or "none"
        addrs = ", ".join(sorted(self.addresses)[:6]) or "none"
        more = f" (+{len(self.addresses) - 6})" if len(self.addresses) > 6 else ""
        return f"names {names}; addresses {addrs}{more}"


def normalize_address(text: str) -> str | None:
    """An address in canonical form without zone, or None if ``text`` is not an address.

    >>> normalize_address("FD00::0002%eth0"), normalize_address("node1")
    ('fd00::2', None)
    """
    try:
        return str(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        return None


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8 and ::1.

    >>> is_loopback("127.0.1.1"), is_loopback("198.18.0.11")
    (True, False)
    """
    return ipaddress.ip_address(address).is_loopback


def local_identity() -> Identity:
    """This node's non-loopback interface addresses and host names (short, full, FQDN)."""
    import psutil

    addresses = set()
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family in (socket.AF_INET, socket.AF_INET6):
                normal = normalize_address(addr.address)
                if normal and not is_loopback(normal):
                    addresses.add(normal)
    hostname = socket.gethostname().lower()
    names = {hostname, hostname.split(".")[0]}
    fqdn = _with_timeout(socket.getfqdn, RESOLVE_TIMEOUT, hostname)
    if fqdn:
        names.add(fqdn.lower())
    names.discard("localhost")
    names.discard("")
    return Identity(addresses, names)


def _with_timeout(func: Callable, timeout: float, *args: object) -> object:
    """``func(*args)`` in a daemon thread; None when it raises or takes longer than ``timeout``."""
    box: queue.Queue = queue.Queue(maxsize=1)

    def call() -> None:
        try:
            box.put(func(*args))
        except Exception:  # noqa: BLE001 - any resolver failure means "no answer"
            box.put(None)

    threading.Thread(target=call, daemon=True).start()
    try:
        return box.get(timeout=timeout)
    except queue.Empty:
        return None


def resolve_all(hosts: list[str], resolver: Callable[[str], "set | None"] | None = None,
                workers: int = RESOLVE_WORKERS, per_name: float = RESOLVE_TIMEOUT,
                overall: float = RESOLVE_OVERALL) -> list:
    """Resolve ``hosts`` in a pool of at most ``workers`` threads; a list of answers (or None).

    A name whose answer takes longer than ``per_name`` seconds counts as unresolved, and the
    whole pass ends after ``overall`` seconds: names not reached by then are unresolved too.
    A resolver stuck inside getaddrinfo holds one worker (a daemon thread), never more threads.

    >>> resolve_all(["a", "b", "c"], {"a": {"198.18.0.1"}}.get, workers=2)
    [{'198.18.0.1'}, None, None]
    """
    resolver = resolver or _getaddrinfo
    answers: list = [None] * len(hosts)
    work: queue.Queue = queue.Queue()
    for index in range(len(hosts)):
        work.put(index)
    done = threading.Semaphore(0)
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                index = work.get_nowait()
            except queue.Empty:
                return
            started = time.monotonic()
            try:
                answer = resolver(hosts[index])
            except Exception:  # noqa: BLE001 - any resolver failure means "no answer"
                answer = None
            if time.monotonic() - started <= per_name:
                answers[index] = answer
            done.release()

    for _ in range(min(workers, len(hosts))):
        threading.Thread(target=worker, daemon=True).start()
    deadline = time.monotonic() + overall
    for _ in hosts:
        if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
    stop.set()
    return list(answers)


def _getaddrinfo(host: str) -> "set | None":
    found = {normalize_address(info[4][0])
             for info in socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)}
    return {a for a in found if a} or None


LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                            "ip6-loopback"})


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (and its usual aliases) and loopback addresses.

    >>> is_loopback_host("localhost"), is_loopback_host("127.0.0.1"), is_loopback_host("node1")
    (True, True, False)
    """
    address = normalize_address(host)
    if address is not None:
        return is_loopback(address)
    return host.lower().rstrip(".") in LOOPBACK_NAMES


def find_rank(targets: list[Target], me: Identity,
              resolver: Callable[[str], "set | None"] | None = None,
              source: str = "hostfile") -> int:
    """The 0-based position of this node in ``targets``.

    Direct matches (an address of this node, or one of its names) are tried first; only when
    none matches are names resolved, in parallel. Loopback answers are ignored.

    Raises:
        BadInput: this node is not listed, or is listed more than once.

    >>> me = Identity({"198.18.0.12"}, {"node2"})
    >>> find_rank([Target("198.18.0.11"), Target("198.18.0.12")], me, lambda h: None)
    1
    >>> dns = {"node1": {"198.18.0.11"}, "node2.example": {"198.18.0.12"}}
    >>> find_rank([Target("node1"), Target("node2.example")], me, dns.get)
    1
    >>> find_rank([Target("localhost", slots=2)], me, dns.get)
    0
    """
    loopback = [t for t in targets if is_loopback_host(t.host)]
    if loopback and len(targets) == 1:
        return 0
    if loopback:
        where = f"line {loopback[0].line} ({loopback[0].host})" if loopback[0].line \
            else loopback[0].host
        raise BadInput(f"{source}: {where} means a different machine on each node; in a "
                       "hostfile of several nodes, write each node's name or address")
    direct = [i for i, t in enumerate(targets) if _direct_match(t.host, me)]
    if len(direct) > 1:
        raise BadInput(_twice(targets, direct, source))
    if direct:
        return direct[0]
    names = [i for i, t in enumerate(targets) if normalize_address(t.host) is None]
    answers = resolve_all([targets[i].host for i in names], resolver)
    answers = {i: answers[k] for k, i in enumerate(names)}
    matched = [i for i in names
               if {a for a in (answers.get(i) or ()) if not is_loopback(a)} & me.addresses]
    if len(matched) > 1:
        raise BadInput(_twice(targets, matched, source))
    if matched:
        return matched[0]
    unresolved = [targets[i].host for i in names if not answers.get(i)]
    note = f"; {len(unresolved)} names did not resolve: {', '.join(unresolved[:3])}" \
        if unresolved else ""
    raise BadInput(f"this node ({me.describe()}) is not in {source} "
                   f"({len(targets)} entries{note})")


def _direct_match(host: str, me: Identity) -> bool:
    address = normalize_address(host)
    if address is not None:
        return address in me.addresses
    name = host.lower().rstrip(".")
    return name in me.names


def _twice(targets: list[Target], indexes: list[int], source: str) -> str:
    where = ", ".join(f"line {targets[i].line} ({targets[i].host})" if targets[i].line
                      else targets[i].host for i in indexes)
    return f"this node matches {len(indexes)} entries of {source}: {where}; list each node once"


def parse_port_range(text: str) -> tuple[int, int]:
    """``LO-HI`` or a single port.

    >>> parse_port_range("29500-29599"), parse_port_range("6000")
    ((29500, 29599), (6000, 6000))
    """
    lo, _, hi = text.partition("-")
    try:
        if not text.isascii() or len(text) > 20:
            raise ValueError(text)
        low, high = int(lo), int(hi or lo)
    except ValueError:
        raise BadInput(f"--port-range {text!r}: expected LO-HI, e.g. 29500-29599") from None
    if not 1 <= low <= high <= 65535:
        raise BadInput(f"--port-range {text!r}: expected 1 <= LO <= HI <= 65535")
    return low, high


def port_is_free(port: int) -> bool:
    """True when a TCP listener can bind ``port`` on all IPv4 addresses of this node."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def first_free_port(ports: Iterable[int], is_free: Callable[[int], bool] = port_is_free) -> int:
    """The first port that ``is_free``; NcclcheckError when none is."""
    tried = list(ports)
    for port in tried:
        if is_free(port):
            return port
    if not tried:
        raise NcclcheckError("no port to try (use --port-range or --master-port)")
    raise NcclcheckError(f"no free port in {tried[0]}-{tried[-1]} on this node "
                         "(use --port-range or --master-port)")


def rank_assignments(targets: list[Target], me: Identity | None = None,
                     port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
                     master_port: int | None = None,
                     resolver: Callable[[str], "set | None"] | None = None,
                     is_free: Callable[[int], bool] = port_is_free,
                     source: str = "hostfile", notes: list[str] | None = None) -> dict:
    """``NNODES``, ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` (+ ``NPROC_PER_NODE`` when
    the hostfile gives slots) for this node. Messages for the user go to ``notes``.

    >>> me = Identity({"198.18.0.11"}, {"node1"})
    >>> rank_assignments([Target("198.18.0.11", slots=8), Target("198.18.0.12", slots=8)], me,
    ...                  is_free=lambda p: p != 29501)
    {'NNODES': 2, 'NODE_RANK': 0, 'MASTER_ADDR': '198.18.0.11', 'MASTER_PORT': 29500, 'NPROC_PER_NODE': 8}
    """
    me = me or local_identity()
    rank = find_rank(targets, me, resolver, source)
    slots = {t.slots for t in targets}
    return node_values(rank, len(targets), targets[0].host, port_range, master_port, is_free,
                       notes, slots.pop() if len(slots) == 1 else None)


def node_values(rank: int, nnodes: int, master_addr: str,
                port_range: tuple[int, int] = DEFAULT_PORT_RANGE, master_port: int | None = None,
                is_free: Callable[[int], bool] = port_is_free, notes: list[str] | None = None,
                nproc: int | None = None) -> dict:
    """The values for node ``rank`` of ``nnodes``, with the ``MASTER_PORT`` every node prints:
    ``master_port`` (checked free on the master), else the first port of ``port_range`` (the
    master fails when it is busy there; a single node takes the first free one)."""
    low, high = port_range
    if master_port is not None:
        if rank == 0 and not is_free(master_port):
            raise NcclcheckError(f"MASTER_PORT {master_port} is in use on this node "
                                 "(the master): pass a free one to every node as --master-port")
        port = master_port
    elif nnodes == 1:
        port = first_free_port(range(low, high + 1), is_free)
        if port != low and notes is not None:
            notes.append(f"port {low} is busy on this node; MASTER_PORT={port}")
    elif rank == 0 and not is_free(low):
        try:
            free = f"--master-port {first_free_port(range(low + 1, high + 1), is_free)}"
        except NcclcheckError:
            free = "--master-port with a port free on this node"
        raise NcclcheckError(f"MASTER_PORT {low} is busy on this node (the master), and the "
                             "other nodes cannot see that, so they would print "
                             f"{low}: run ncclcheck rank on every node with {free}")
    else:
        port = low  # every node prints the same port; the master has checked it is free
    values = {"NNODES": nnodes, "NODE_RANK": rank, "MASTER_ADDR": master_addr, "MASTER_PORT": port}
    return values if nproc is None else {**values, "NPROC_PER_NODE": nproc}


def rank_values(hostfile: str | None, nodes: int | None = None, port_range: str = "29500-29599",
                master_port: int | None = None, notes: list[str] | None = None,
                environ: dict[str, str] | None = None) -> dict:
    """What ``ncclcheck rank`` prints: this node's entry of ``hostfile``; without one, what the
    Kubernetes job API of its pod or mpirun (once per node) says, read as ``bench`` reads them
    (:func:`ncclcheck.k8s.launcher.detect_launcher`; an MPIJob pod: the operator's hostfile)."""
    import os

    from ncclcheck.bench.environ import rank_env
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.k8s.podenv import pod_job
    from ncclcheck.k8s.launcher import POD_LAUNCHERS, detect_launcher

    ports = parse_port_range(port_range)
    if hostfile:
        return rank_assignments(load_hostfile(hostfile, nodes), port_range=ports,
                                master_port=master_port, source=hostfile, notes=notes)
    if nodes is not None:
        raise BadInput("--nodes needs --hostfile")
    environ = dict(os.environ) if environ is None else environ
    launcher, job = detect_launcher(environ), pod_job(environ)
    if launcher in POD_LAUNCHERS:  # pod_job gave a node rank
        ident = rank_env(environ, launcher)
        return node_values(ident["rank"], ident["world_size"], ident["master_addr"], ports,
                           master_port or job["master_port"], notes=notes,
                           nproc=job["nproc_per_node"])
    if launcher == "mpi":
        from ncclcheck.bench.mpiaddr import master_address

        ident = rank_env(environ, launcher)
        local = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or environ.get("MPI_LOCALNRANKS")
        if local not in (None, "", "1"):
            raise BadInput(f"under mpirun, ncclcheck rank runs once per node, not {local} times "
                           "(mpirun --map-by ppr:1:node; Intel MPI, MPICH: -ppn 1)")
        addr = master_address(environ) or ("127.0.0.1" if ident["world_size"] == 1 else None)
        if not addr:
            raise BadInput("under mpirun: no MASTER_ADDR, and MPI did not tell where rank 0 "
                           "runs: mpirun -x MASTER_ADDR=HOST (Intel MPI, MPICH: -genv)")
        return node_values(ident["rank"], ident["world_size"], addr, ports, master_port,
                           notes=notes)
    if launcher is None and job and job["api"] == "mpijob":  # the operator's hostfile
        if job["role"] == "worker" and not os.path.exists(job["hostfile"]):
            raise BadInput("an MPIJob worker has no hostfile (the launcher has): run ncclcheck "
                           "rank under the launcher's mpirun, once per node")
        return rank_assignments(load_hostfile(job["hostfile"], environ=environ),
                                port_range=ports, master_port=master_port,
                                source=job["hostfile"], notes=notes)
    raise BadInput("--hostfile is needed " + (f"inside {launcher}, whose ranks are set already"
                   if launcher else "outside mpirun and the pods of MPIJob, PyTorchJob, "
                   "TrainJob, JobSet and LWS"))


def format_shell(values: dict, export: bool = False) -> str:
    """Shell assignments, one per line, values quoted with :func:`shlex.quote`.

    >>> print(format_shell({"NNODES": 2, "MASTER_ADDR": "fd00::2"}, export=True), end="")
    export NNODES=2
    export MASTER_ADDR=fd00::2
    """
    prefix = "export " if export else ""
    return "".join(f"{prefix}{k}={shlex.quote(str(v))}\n" for k, v in values.items())
