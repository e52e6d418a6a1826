"""Under ``mpirun`` without ``MASTER_ADDR``: learn rank 0's address from the MPI runtime.

MPI does not say where rank 0 runs, but it can tell: a short child process
(``python -m ncclcheck.bench.mpiaddr``) calls ``MPI_Init`` through ctypes on the libmpi that
mpirun itself uses (no mpi4py), rank 0 broadcasts its hostname and IPv4 networks
(``MPI_Bcast``), and every rank prints them and calls ``MPI_Finalize``. The child runs under a
deadline, so a runtime that cannot connect never hangs the bench. Each rank then picks rank 0's
first address on a network it shares (:func:`pick`), else rank 0's first address.

* **Open MPI** (``OMPI_COMM_WORLD_*``): libmpi by name; its handles are global symbols
  (``ompi_mpi_comm_world``, ``ompi_mpi_char``).
* **Hydra** (``mpiexec``/``mpirun`` of Intel MPI and MPICH: ``PMI_RANK``, ``PMI_SIZE``,
  ``MPI_LOCALNRANKS``, ``PMI_FD``; MPICH v4.3.2 ``src/pm/hydra/proxy/pmip_cb.c`` l.891-896,
  960-982). Hydra names no rank-0 host to a rank (``PMI_HOSTNAME``, l.987-990, is the rank's own
  node, and Intel MPI does not set it), and the hostfile is not on the ranks' nodes in an
  MPIJob (the operator mounts ``/etc/mpi`` in the launcher only: mpi-operator v0.8.0
  ``pkg/controller/mpi_job_controller.go`` l.1618-1633, none in ``newWorker``, l.1473-1507), so
  the ranks ask MPI as under Open MPI. The library is the MPICH ABI's ``libmpi.so.12`` (Intel
  MPI's ``$I_MPI_ROOT/lib``, then the loader's path, then beside ``mpiexec.hydra``), whose
  handles are integers: ``MPI_COMM_WORLD`` 0x44000000 (MPICH v4.3.2 ``src/include/mpi.h.in``
  l.258-259), ``MPI_CHAR`` 0x4c000101 (``configure.ac`` l.3451, ``confdb/aclocal_datatype.m4``
  l.89); Intel MPI keeps the MPICH ABI. The child keeps the rank's PMI connection (``PMI_FD``).

Elsewhere :func:`rank0_address` returns None and the clear "set MASTER_ADDR" message stays.
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


def hydra(environ: dict[str, str]) -> bool:
    """Started by Hydra (Intel MPI, MPICH), not Open MPI.

    >>> hydra({"PMI_RANK": "1", "PMI_SIZE": "2"}), hydra({"OMPI_COMM_WORLD_RANK": "1"})
    (True, False)
    """
    return bool(environ.get("PMI_RANK")) and not environ.get("OMPI_COMM_WORLD_RANK")


def mpich_abi_libraries(environ: dict[str, str]) -> list[str]:
    """Where the MPICH ABI's ``libmpi.so.12`` may be, first first.

    >>> mpich_abi_libraries({"I_MPI_ROOT": "/opt/intel/mpi", "PATH": ""})[:2]
    ['/opt/intel/mpi/lib/libmpi.so.12', '/opt/intel/mpi/lib/release/libmpi.so.12']
    """
    out = []
    if environ.get("I_MPI_ROOT"):
        root = environ["I_MPI_ROOT"].rstrip("/")
        out += [f"{root}/lib/libmpi.so.12", f"{root}/lib/release/libmpi.so.12"]
    out.append("libmpi.so.12")
    import shutil

    hydra_bin = shutil.which("mpiexec.hydra", path=environ.get("PATH", ""))
    if hydra_bin:
        import os.path

        prefix = os.path.dirname(os.path.dirname(os.path.realpath(hydra_bin)))
        out.append(os.path.join(prefix, "lib", "libmpi.so.12"))
    return out


def _handles(environ: dict[str, str]):
    """(libmpi, MPI_COMM_WORLD, MPI_CHAR) of the MPI that started this process, or an error."""
    if hydra(environ):
        for path in mpich_abi_libraries(environ):
            try:
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            return lib, ctypes.c_int(0x44000000), ctypes.c_int(0x4C000101)
        return "no libmpi.so.12 (Intel MPI, MPICH)"
    path = ctypes.util.find_library("mpi")
    if not path:
        return "no libmpi"
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    try:
        comm = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_comm_world")))
        char = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_char")))
    except ValueError:
        return "not Open MPI"
    return lib, comm, char


def main() -> int:
    """The child: broadcast rank 0's hostname and networks over MPI, print them as JSON."""
    import os

    found = _handles(dict(os.environ))
    if isinstance(found, str):
        print(found, file=sys.stderr)
        return 3
    lib, comm, char = found
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
    import os

    pmi_fd = os.environ.get("PMI_FD", "")  # Hydra: the rank's PMI connection, kept by the child
    try:
        proc = subprocess.run([sys.executable, "-m", "ncclcheck.bench.mpiaddr"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=timeout,
                              pass_fds=(int(pmi_fd),) if pmi_fd.isdigit() else ())
        info = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(info, dict):
        return None
    addr = pick([str(n) for n in info.get("nets") or []], networks())
    return (str(info.get("host")), addr) if addr else None


def master_address(environ: dict[str, str]) -> str | None:
    """Under mpirun: ``MASTER_ADDR`` when set, else rank 0's address told over MPI when the
    ranks span nodes (Open MPI, Hydra); None when neither says (one node, or another MPI).

    >>> master_address({"MASTER_ADDR": "198.18.0.11"})
    '198.18.0.11'
    >>> master_address({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}) is None
    True
    """
    if environ.get("MASTER_ADDR"):
        return environ["MASTER_ADDR"]
    if hydra(environ):
        local, size = environ.get("MPI_LOCALNRANKS"), environ.get("PMI_SIZE")
    else:
        local, size = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE"), environ.get("OMPI_COMM_WORLD_SIZE")
    if local == size:  # all ranks on this node (or no MPI): nothing to learn
        return None
    found = rank0_address()  # rank 0 tells over MPI where it is (bounded)
    return found[1] if found else None


if __name__ == "__main__":
    sys.exit(main())
