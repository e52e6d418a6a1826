"""Under ``mpirun`` without ``MASTER_ADDR``: learn rank 0's address from the MPI runtime.

MPI does not say where rank 0 runs, but it can tell: a short child process
(``python -m ncclcheck.bench.mpiaddr``) calls ``MPI_Init`` through ctypes on the libmpi that
mpirun itself uses (no mpi4py), rank 0 broadcasts its hostname and IPv4 networks
(``MPI_Bcast``), and every rank prints them and calls ``MPI_Finalize``. The child runs under a
deadline, so a runtime that cannot connect never hangs the bench. Each rank then picks rank 0's
first address on a network it shares (:func:`pick`), else rank 0's first address.

Open MPI only (its handles are global symbols: ``ompi_mpi_comm_world``, ``ompi_mpi_char``);
elsewhere :func:`rank0_address` returns None and the clear "set MASTER_ADDR" message stays.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import ipaddress
import json
import socket
import struct
import subprocess
import sys

SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B
BUF = 4096
SKIP = ("lo", "docker", "virbr", "veth", "br-")


def networks() -> list[str]:
    """This node's IPv4 interfaces as ``addr/prefix`` in kernel order (no loopback or
    container bridges)."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            if name.startswith(SKIP):
                continue
            req = struct.pack("256s", name.encode()[:15])
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, req)[20:24])
            except OSError:
                continue
            out.append(str(ipaddress.ip_interface(f"{addr}/{mask}")))
    return out


def pick(rank0: list[str], mine: list[str]) -> str | None:
    """Rank 0's first address on a network this node is on, else its first address.

    >>> pick(["10.9.0.5/16", "198.18.0.11/24"], ["198.18.0.12/24"])
    '198.18.0.11'
    >>> pick(["10.9.0.5/16"], ["198.18.0.12/24"]), pick([], ["198.18.0.12/24"])
    ('10.9.0.5', None)
    """
    nets = [ipaddress.ip_interface(m).network for m in mine]
    for cand in rank0:
        iface = ipaddress.ip_interface(cand)
        if any(iface.ip in net for net in nets):
            return str(iface.ip)
    return str(ipaddress.ip_interface(rank0[0]).ip) if rank0 else None


def main() -> int:
    """The child: broadcast rank 0's hostname and networks over MPI, print them as JSON."""
    path = ctypes.util.find_library("mpi")
    if not path:
        print("no libmpi", file=sys.stderr)
        return 3
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    try:
        comm = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_comm_world")))
        char = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_char")))
    except ValueError:
        print("not Open MPI", file=sys.stderr)
        return 3
    if lib.MPI_Init(None, None) != 0:
        return 4
    rank = ctypes.c_int(-1)
    lib.MPI_Comm_rank(comm, ctypes.byref(rank))
    buf = ctypes.create_string_buffer(BUF)
    if rank.value == 0:
        info = {"host": socket.gethostname(), "nets": networks()}
        buf.value = json.dumps(info).encode()[:BUF - 1]
    code = lib.MPI_Bcast(buf, ctypes.c_int(BUF), char, ctypes.c_int(0), comm)
    lib.MPI_Finalize()
    if code != 0:
        return 5
    print(buf.value.decode())
    return 0


def rank0_address(timeout: float = 15.0) -> tuple[str, str] | None:
    """(rank 0's hostname, the address this rank should use), or None when MPI cannot say."""
    try:
        proc = subprocess.run([sys.executable, "-m", "ncclcheck.bench.mpiaddr"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=timeout)
        info = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(info, dict):
        return None
    addr = pick([str(n) for n in info.get("nets") or []], networks())
    return (str(info.get("host")), addr) if addr else None


def master_address(environ: dict[str, str]) -> str | None:
    """Under mpirun: ``MASTER_ADDR`` when set, else rank 0's address told over MPI when the
    ranks span nodes (Open MPI); None when neither says (one node, or another MPI).

    >>> master_address({"MASTER_ADDR": "198.18.0.11"}), master_address({"PMI_RANK": "0"})
    ('198.18.0.11', None)
    """
    if environ.get("MASTER_ADDR"):
        return environ["MASTER_ADDR"]
    if environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") == environ.get("OMPI_COMM_WORLD_SIZE"):
        return None
    found = rank0_address()  # rank 0 tells over MPI where it is (Open MPI, bounded)
    return found[1] if found else None


if __name__ == "__main__":
    sys.exit(main())
