"""Hostfiles and host names: DeepSpeed/MPI slot lists, pssh host lists, plain lists.

Every format is one host per line; ``#`` starts a comment; blank lines are skipped::

    # DeepSpeed / Open MPI                # pssh                  # plain
    worker-1 slots=8                      root@10.0.0.1:2222      node1
    worker-2 slots=8 max_slots=8          [fd00::2]:22            node2.cluster.local

``host:N`` with a small ``N`` is refused: MPICH reads ``N`` as process slots and pssh as an ssh
port, so guessing would send traffic to the wrong place. Write ``host slots=N`` instead (or put a
low port in ``~/.ssh/config``). Inside an MPI job the launcher settles it: the hostfile that
Intel MPI or MPICH reads (named by ``I_MPI_HYDRA_HOST_FILE`` or ``HYDRA_HOST_FILE``, which the
Kubernetes MPI operator sets and fills with ``host:N`` lines, kubeflow/mpi-operator v0.8.0
``pkg/controller/mpi_job_controller.go`` l.198-209, 1324-1325), or any hostfile in a pod of an
MPIJob (``K_MPI_JOB_ROLE``, l.169-180), reads ``host:N`` as N slots (:func:`colon_means_slots`).

Host names are validated before they reach an ``ssh`` argv: RFC 1123 names (letters, digits,
``-``, plus ``_`` that ssh_config aliases use), dotted IPv4, or IPv6 (bracketed when a port
follows). Anything with a space, a shell metacharacter or a leading ``-`` is refused, so a
hostfile line can never become an ssh option or a shell word.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from ncclcheck.errors import BadInput

_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
_SCOPE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
#: Ports below this, written as ``host:N``, could be MPICH slot counts: refused as ambiguous.
_LOWEST_UNAMBIGUOUS_PORT = 1024
#: No node runs more processes than this: a larger slots= is a typo or hostile input.
MAX_SLOTS = 65536


@dataclass(frozen=True)
class Target:
    """One node to reach: a host and how to log in to it.

    Attributes:
        host: a validated host name, IPv4 address or IPv6 address (without brackets).
        user: login user, or None to let ssh decide (``~/.ssh/config``, current user).
        port: ssh port, or None for ssh's default.
        slots: processes per node from ``slots=N``, or None when the file does not say.
        line: the 1-based line of the hostfile this came from (None when not from a file).
    """

    host: str
    user: str | None = None
    port: int | None = None
    slots: int | None = None
    line: int | None = None

    @property
    def destination(self) -> str:
        """What ssh gets as its destination argument: ``host`` or ``user@host``.

        >>> Target("fd00::2", user="root").destination
        'root@fd00::2'
        """
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def label(self) -> str:
        """How the node is named in messages and result dicts: ``host``, or ``host:port``.

        >>> Target("node1").label, Target("fd00::2", port=2222).label
        ('node1', '[fd00::2]:2222')
        """
        if self.port is None:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def validate_host(host: str) -> str:
    """Return ``host`` if it is a safe host name or address, else raise ``ValueError`` saying why.

    >>> validate_host("gpu-node-01.cluster.local")
    'gpu-node-01.cluster.local'
    >>> validate_host("fe80::1%eth0")
    'fe80::1%eth0'
    >>> validate_host("-oProxyCommand=sh")
    Traceback (most recent call last):
    ...
    ValueError: '-oProxyCommand=sh' is not a valid host name (it starts with '-')
    >>> validate_host("node1;reboot")
    Traceback (most recent call last):
    ...
    ValueError: 'node1;reboot' is not a valid host name (only letters, digits, '-', '_' and '.' are allowed)
    """
    if not host:
        raise ValueError("empty host name")
    if host.startswith("-"):
        raise ValueError(f"{host!r} is not a valid host name (it starts with '-')")
    if ":" in host:
        addr, _, scope = host.partition("%")
        if scope and not _SCOPE.match(scope):
            raise ValueError(f"{host!r} has an invalid IPv6 zone {scope!r}")
        try:
            ipaddress.IPv6Address(addr)
        except ValueError:
            raise ValueError(f"{host!r} is not a valid IPv6 address") from None
        return host
    if len(host) > 253:
        raise ValueError(f"{host[:40]!r}... is longer than 253 characters")
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    for label in labels:
        if not _LABEL.match(label):
            why = ("an empty label" if not label else
                   "a label longer than 63 characters" if len(label) > 63 else
                   "a label starting or ending with '-'"
                   if re.fullmatch(r"[A-Za-z0-9_-]+", label) else None)
            if why:
                raise ValueError(f"{host!r} is not a valid host name ({why})")
            raise ValueError(f"{host!r} is not a valid host name "
                             "(only letters, digits, '-', '_' and '.' are allowed)")
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not a valid IPv4 address") from None
    return host


def colon_means_slots(path: str | Path, environ: dict[str, str]) -> bool:
    """Whether ``host:N`` in the hostfile at ``path`` means N slots: the file is the one the
    MPI launcher of this job reads (``I_MPI_HYDRA_HOST_FILE``, ``HYDRA_HOST_FILE``), or this
    is a pod of a Kubernetes MPIJob (``K_MPI_JOB_ROLE``).

    >>> colon_means_slots("/etc/mpi/hostfile", {"K_MPI_JOB_ROLE": "launcher"})
    True
    >>> colon_means_slots("hosts", {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile"})
    False
    """
    if environ.get("K_MPI_JOB_ROLE") in ("launcher", "worker"):
        return True
    named = {environ.get(v) for v in ("I_MPI_HYDRA_HOST_FILE", "HYDRA_HOST_FILE")} - {None, ""}
    try:
        return any(Path(n).resolve() == Path(path).resolve() for n in named)
    except (OSError, RuntimeError):
        return False


def parse_host_spec(spec: str, colon_slots: bool = False) -> Target:
    """Parse one pssh-style host spec ``[user@]host[:port]`` (``[v6addr]:port`` for IPv6).

    >>> parse_host_spec("root@10.0.0.1:2222")
    Target(host='10.0.0.1', user='root', port=2222, slots=None, line=None)
    >>> parse_host_spec("[fd00::2]:22").port
    22
    >>> parse_host_spec("node1:8")
    Traceback (most recent call last):
    ...
    ValueError: 'node1:8' is ambiguous: MPICH reads 8 as slots, pssh as an ssh port; write 'node1 slots=8' for slots, or set a port below 1024 in ~/.ssh/config
    >>> parse_host_spec("w-0.j.default.svc:8", colon_slots=True)
    Target(host='w-0.j.default.svc', user=None, port=None, slots=8, line=None)
    """
    user = None
    rest = spec
    if "@" in spec:
        user, _, rest = spec.rpartition("@")
        if not _USER.match(user):
            raise ValueError(f"{spec!r} has an invalid user name {user!r}")
    port_text = None
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise ValueError(f"{spec!r} has '[' without ']'")
        host, after = rest[1:close], rest[close + 1:]
        if after:
            if not after.startswith(":"):
                raise ValueError(f"{spec!r}: unexpected {after!r} after ']'")
            port_text = after[1:]
        if ":" not in host:
            raise ValueError(f"{spec!r}: brackets are only for IPv6 addresses")
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        if colon_slots and user is None:  # an MPI job's hostfile: host:N is N slots
            validate_host(host)
            slots = port_text.isdigit() and len(port_text) <= 6 and int(port_text)
            if not slots or not 1 <= slots <= MAX_SLOTS:
                raise ValueError(f"{spec!r}: slots {port_text[:20]!r} is not a whole number "
                                 f"from 1 to {MAX_SLOTS}")
            return Target(host=host, slots=slots)
    else:
        host = rest  # a bare IPv6 address, or a name without a port
    validate_host(host)
    port = None
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{spec!r}: port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
        if port < _LOWEST_UNAMBIGUOUS_PORT and port != 22 and not spec.startswith("[") \
                and user is None:
            raise ValueError(
                f"{spec!r} is ambiguous: MPICH reads {port} as slots, pssh as an ssh port; "
                f"write '{host} slots={port}' for slots, or set a port below 1024 in "
                "~/.ssh/config")
    return Target(host=host, user=user, port=port)


def _parse_count(field: str, name: str) -> int:
    value = field.split("=", 1)[1]
    if not (value.isascii() and value.isdigit()) or len(value) > 6 or not 1 <= int(value) <= MAX_SLOTS:
        raise ValueError(f"{name}={value[:20]!r} is not a whole number from 1 to {MAX_SLOTS}")
    return int(value)


def parse_hostfile_line(text: str, colon_slots: bool = False) -> Target | None:
    """Parse one hostfile line; None for blank and comment lines; ``ValueError`` saying why.

    >>> parse_hostfile_line("worker-1 slots=8 max_slots=8  # first rack")
    Target(host='worker-1', user=None, port=None, slots=8, line=None)
    >>> parse_hostfile_line("   # only a comment") is None
    True
    >>> parse_hostfile_line("node1 gpus=8")
    Traceback (most recent call last):
    ...
    ValueError: unknown field 'gpus=8' (expected slots=N or max_slots=N)
    """
    fields = text.split("#", 1)[0].split()
    if not fields:
        return None
    target = parse_host_spec(fields[0], colon_slots)
    slots = target.slots
    for field in fields[1:]:
        key = field.split("=", 1)[0]
        if "=" in field and key == "slots":
            slots = _parse_count(field, key)
        elif "=" in field and key in ("max_slots", "max-slots"):
            _parse_count(field, key)
        else:
            raise ValueError(f"unknown field {field!r} (expected slots=N or max_slots=N)")
    return Target(target.host, target.user, target.port, slots)


def parse_hostfile(text: str, source: str = "hostfile",
                   colon_slots: bool = False) -> list[Target]:
    """Parse a whole hostfile; raise :class:`BadInput` naming ``source:line`` and why.

    Recorded sample (DeepSpeed's docs, ``/job/hostfile``)::

        worker-1 slots=4
        worker-2 slots=4

    >>> text = "worker-1 slots=4\\n\\nworker-2 slots=4\\n"
    >>> [(t.host, t.slots, t.line) for t in parse_hostfile(text)]
    [('worker-1', 4, 1), ('worker-2', 4, 3)]
    >>> parse_hostfile("node1\\nnode 2\\n", "hf")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: hf:2: unknown field '2' (expected slots=N or max_slots=N)
    """
    targets: list[Target] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            target = parse_hostfile_line(line, colon_slots)
        except ValueError as exc:
            raise BadInput(f"{source}:{number}: {exc}") from None
        if target is None:
            continue
        key = target.label.lower()
        if key in seen:
            raise BadInput(f"{source}:{number}: {target.label} is listed twice "
                           f"(first on line {seen[key]})")
        seen[key] = number
        targets.append(Target(target.host, target.user, target.port, target.slots, number))
    return targets


def parse_host_list(text: str, source: str = "--hosts") -> list[Target]:
    """Parse a comma-separated list of host specs (a ``--hosts`` option).

    >>> [t.label for t in parse_host_list("node1,root@node2:2222")]
    ['node1', 'node2:2222']
    """
    return parse_hostfile("\n".join(text.split(",")), source)


def take_nodes(targets: list[Target], nodes: int | None, source: str = "hostfile") -> list[Target]:
    """The first ``nodes`` targets (all when None); :class:`BadInput` when there are fewer.

    >>> take_nodes([Target("a"), Target("b")], 3, "hf")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: hf: --nodes 3 asks for more nodes than the 2 listed
    """
    if not targets:
        raise BadInput(f"{source}: lists no hosts")
    if nodes is None:
        return list(targets)
    if nodes < 1:
        raise BadInput(f"--nodes must be at least 1, not {nodes}")
    if nodes > len(targets):
        raise BadInput(f"{source}: --nodes {nodes} asks for more nodes than the "
                       f"{len(targets)} listed")
    return list(targets[:nodes])


def load_hostfile(path: str | Path, nodes: int | None = None,
                  environ: dict[str, str] | None = None) -> list[Target]:
    """Read, parse and cut a hostfile to ``nodes`` entries; every failure is one BadInput line.
    ``host:N`` means N slots in an MPI job's hostfile (:func:`colon_means_slots` over
    ``environ``, the process environment by default)."""
    import os

    from ncclcheck.infile import read_text

    text = read_text(path, "hostfile", "read hostfile")
    colon = colon_means_slots(path, dict(os.environ) if environ is None else environ)
    return take_nodes(parse_hostfile(text, str(path), colon), nodes, str(path))
