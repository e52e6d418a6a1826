"""What NCCL really used, read from ``NCCL_DEBUG=INFO`` output (pure).

bench runs every rank with ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_FILE=<dir>/nccl.%h.%p``; each
rank reads its own file with :func:`parse_nccl_log` and rank 0 merges them with
:func:`summarize`. The same parser reads nccl-tests output that has NCCL INFO lines in it
(``--import``), behind Open MPI ``--tag-output``, ``srun --label`` or torchrun prefixes.

The lines themselves are read by :mod:`ncclcheck.logparse` -- the parser ``ncclcheck diagnose``
uses -- so both commands agree on what a line says: :func:`~ncclcheck.logparse.prefix.parse_prefix`
strips launcher prefixes, :func:`~ncclcheck.logparse.nccl.parse_nccl_line` splits the
``host:pid:tid [dev] NCCL LEVEL`` header, :func:`~ncclcheck.logparse.facts.parse_info` reads the
message. This module only folds those facts into one entry per process. Lines it uses (samples
from real logs)::

    host:21:21 [0] NCCL INFO NCCL version 2.12.7+cuda11.4          (also a bare "NCCL version")
    host:21:21 [0] NCCL INFO Bootstrap : Using eth0:10.11.13.106<0>
    host:21:21 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.4<0>
    host:21:21 [0] NCCL INFO NET/Socket : Using [0]em1:10.193.84.3<0> [1]tunl0:10.227.47.12<0>
    host:21:21 [0] NCCL INFO Using network AWS Libfabric
    host:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa (found 1 nics)
    host:21:21 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
    host:21:27 [0] NCCL INFO Channel 00/0 : 0[35000] -> 1[f5000] [send] via NET/IB/0/GDRDMA
    host:21:27 [0] NCCL INFO comm 0x7fde98000f60 rank 0 nranks 2 cudaDev 0 busId 35000 - Init COMPLETE
    host:21:27 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 0.
    host:21:27 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, ...
"""

from __future__ import annotations

from typing import Any

from ncclcheck.logparse.facts import Fact, parse_info, parse_version
from ncclcheck.logparse.nccl import parse_nccl_line
from ncclcheck.logparse.prefix import parse_prefix

#: aws-ofi-nccl's provider line (not a fact :mod:`ncclcheck.logparse.facts` reads).
_PROVIDER = "NET/OFI Selected Provider is "


def new_rank(host: str | None, pid: int | None) -> dict[str, Any]:
    """An empty per-process entry (what a process that logged nothing reports).

    >>> sorted(new_rank("h", 1))[:5]
    ['bootstrap_interface', 'cuda_version', 'env', 'gdr', 'hcas']
    """
    return {"host": host, "pid": pid, "rank": None, "nranks": None, "nccl_version": None,
            "cuda_version": None, "network": None, "provider": None, "hcas": [],
            "interfaces": [], "bootstrap_interface": None, "oob_interface": None, "gdr": None,
            "paths": [], "env": {}, "warnings": []}


def _add_unique(items: list[Any], value: Any) -> None:
    if value not in items:
        items.append(value)


def _apply(entry: dict[str, Any], fact: Fact) -> None:
    """Fold one fact from :func:`~ncclcheck.logparse.facts.parse_info` into a process's entry."""
    kind, value = fact
    if kind == "version":
        entry["nccl_version"], entry["cuda_version"] = value
    elif kind == "network":
        entry["network"] = value
    elif kind == "net_ib":
        for hca, port, layer in value["devices"]:
            _add_unique(entry["hcas"], f"{hca}:{port}/{layer}")
        if value["oob"]:
            entry["oob_interface"] = value["oob"][0]
    elif kind in ("net_socket", "net_socket_add"):
        for name, _ in value:
            _add_unique(entry["interfaces"], name)
    elif kind == "bootstrap":
        entry["bootstrap_interface"] = value[0][0]
    elif kind == "gdr":
        if entry["gdr"] is not True:
            entry["gdr"] = value["enabled"]
    elif kind == "connection":
        _, path, gdr = value
        _add_unique(entry["paths"], path)
        if path.startswith("NET/"):
            entry["gdr"] = True if gdr else (entry["gdr"] or False)
    elif kind == "init":
        entry["rank"], entry["nranks"] = value["rank"], value["nranks"]
    elif kind == "env":
        entry["env"][value[0]] = value[1]


def _fold(entry: dict[str, Any], level: str, msg: str, src: str | None) -> None:
    """Fold one NCCL message into a process's entry."""
    if level in ("WARN", "ABORT"):
        _add_unique(entry["warnings"], f"{src + ' ' if src else ''}{msg.strip()}"[:500])
        return
    if msg[:len(_PROVIDER)].lower() == _PROVIDER.lower():
        words = msg[len(_PROVIDER):].split()
        entry["provider"] = words[0] if words else None
        return
    if msg.startswith("NCCL version") and entry["nccl_version"]:
        return  # the first version a process printed is the library's
    fact = parse_info(msg)
    if fact is not None:
        _apply(entry, fact)


def parse_nccl_log(text: str) -> list[dict[str, Any]]:
    """One entry per process (host, pid) that wrote NCCL lines in ``text``.

    Lines without the ``host:pid:tid`` header (``NCCL version 2.5.6+cuda10.0`` as old NCCL
    printed it on stdout, or a pasted ``[0] NCCL INFO ...``) go to the only process when there
    is one; with several they cannot be attributed and count for versions and warnings only;
    with none they make one anonymous process.

    Recorded sample (two nodes over InfiniBand, NVIDIA/nccl-tests#36):

    >>> log = '''pkb-aa8dbd1b-0:9100:9100 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.5<0>
    ... pkb-aa8dbd1b-0:9100:9100 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/IB ; OOB eth0:10.0.0.5<0>
    ... pkb-aa8dbd1b-1:9482:9482 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.4<0>
    ... NCCL version 2.5.6+cuda10.0
    ... pkb-aa8dbd1b-1:9482:9482 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/IB ; OOB eth0:10.0.0.4<0>'''
    >>> [(r["host"], r["pid"], r["hcas"], r["oob_interface"]) for r in parse_nccl_log(log)]
    [('pkb-aa8dbd1b-0', 9100, ['mlx4_0:1/IB'], 'eth0'), ('pkb-aa8dbd1b-1', 9482, ['mlx4_0:1/IB'], 'eth0'), (None, None, [], None)]
    >>> parse_nccl_log(log)[-1]["nccl_version"]  # printed once, by whichever rank: unattributed
    '2.5.6'
    """
    processes: dict[tuple[str | None, int], dict[str, Any]] = {}
    loose: list[tuple[str, str, str | None]] = []
    for raw in text.splitlines():
        _, rest = parse_prefix(raw.rstrip("\r"))
        line = parse_nccl_line(rest)
        if line is None:
            at = rest.find("NCCL version ")
            if at >= 0 and parse_version(rest[at:]):
                loose.append(("INFO", rest[at:].strip(), None))
            continue
        if line.pid is None:
            loose.append((line.level, line.msg, line.src))
            continue
        key = (line.host, line.pid)
        entry = processes.setdefault(key, new_rank(*key))
        _fold(entry, line.level, line.msg, line.src)
    if loose:
        if len(processes) == 1:
            target = next(iter(processes.values()))
        elif not processes:
            target = processes.setdefault((None, 0), new_rank(None, None))
        else:  # several processes: the line cannot be attributed (old NCCL printed it on rank 0)
            target = processes.setdefault((None, 0), new_rank(None, None))
            target["unattributed"] = True
        for level, msg, src in loose:
            _fold(target, level, msg, src)
    return list(processes.values())


def network_of(entry: dict[str, Any]) -> str | None:
    """The network a rank used: ``Using network X``, else the channels' ``via NET/X``, else
    which NET module listed devices.

    >>> network_of({"network": None, "paths": ["NET/IBext_v8"], "hcas": [], "interfaces": []})
    'IBext_v8'
    >>> network_of({"network": None, "paths": ["P2P"], "hcas": [], "interfaces": ["lo"]})
    'Socket'
    """
    if entry.get("network"):
        return entry["network"]
    for path in entry.get("paths", []):
        if path.startswith("NET/"):
            return path[4:]
    if entry.get("hcas"):
        return "IB"
    if entry.get("interfaces"):
        return "Socket"
    return None


def summarize(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The bench document's ``transport``: what all ranks used, and each rank's own view.

    ``interfaces`` are the Socket transport's interfaces and the bootstrap/OOB ones; lines no
    process can be matched to (``unattributed``) count for versions and warnings only.
    ``network`` is the one network every rank that reported used, or ``"mixed: A, B"``; ``gdr``
    is True only when every rank with a NET path used GPU Direct RDMA.

    >>> summarize([{"host": "a", "network": "IB", "hcas": ["mlx5_0:1/IB"], "gdr": True,
    ...             "nccl_version": "2.21.5", "interfaces": [], "oob_interface": "eth0"},
    ...            {"host": "b", "network": "Socket", "hcas": [], "gdr": None,
    ...             "nccl_version": "2.21.5", "interfaces": ["eth0"]}])["network"]
    'mixed: IB, Socket'
    """
    everything = per_rank
    per_rank = [r for r in everything if not r.get("unattributed")]
    networks = sorted({n for n in (network_of(r) for r in per_rank) if n})
    gdr_values = [r.get("gdr") for r in per_rank if r.get("gdr") is not None]
    interfaces: list[str] = []
    hcas: list[str] = []
    for entry in per_rank:
        for name in [*entry.get("interfaces", []), entry.get("oob_interface"),
                     entry.get("bootstrap_interface")]:
            if name:
                _add_unique(interfaces, name)
        for hca in entry.get("hcas", []):
            _add_unique(hcas, hca)
    versions = sorted({r["nccl_version"] for r in everything if r.get("nccl_version")})
    warnings = [w for r in everything for w in r.get("warnings", [])]
    return {
        "network": (networks[0] if len(networks) == 1
                    else f"mixed: {', '.join(networks)}" if networks else None),
        "interfaces": interfaces,
        "hcas": hcas,
        "gdr": (all(gdr_values) if gdr_values else None),
        "nccl_versions": versions,
        "warnings": warnings[:20],
        "per_rank": per_rank,
    }
