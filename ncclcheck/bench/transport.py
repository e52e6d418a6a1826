"""What NCCL really used, read from ``NCCL_DEBUG=INFO`` output (pure).

bench runs every rank with ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_FILE=<dir>/nccl.%h.%p``; each
rank reads its own file with :func:`parse_nccl_log` and rank 0 merges them with
:func:`summarize`. The same parser reads nccl-tests output that has NCCL INFO lines in it
(``--import``), with Open MPI ``--tag-output`` or ``srun --label`` prefixes.

Lines it reads (format strings from NVIDIA/nccl ``src/``; samples from real logs)::

    host:21:21 [0] NCCL INFO NCCL version 2.12.7+cuda11.4          (init.cc; also bare "NCCL version")
    host:21:21 [0] NCCL INFO Bootstrap : Using eth0:10.11.13.106<0>
    host:21:21 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.4<0>
    host:21:21 [0] NCCL INFO NET/Socket : Using [0]em1:10.193.84.3<0> [1]tunl0:10.227.47.12<0>
    host:21:21 [0] NCCL INFO Using network AWS Libfabric
    host:21:21 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
    host:21:27 [0] NCCL INFO Channel 00/0 : 0[35000] -> 1[f5000] [send] via NET/IB/0/GDRDMA
    host:21:27 [0] NCCL INFO comm 0x7fde98000f60 rank 0 nranks 2 cudaDev 0 busId 35000 - Init COMPLETE
    host:21:27 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, ...
"""

from __future__ import annotations

import re
from typing import Any

#: ``[1,0]<stdout>:`` (Open MPI --tag-output), ``[0] `` or ``0: `` (srun --label / pdsh).
TAG_RE = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\[\d+\]\s|\s*\d+:\s)")
LINE_RE = re.compile(
    r"^(?P<host>[^\s:]+)\s*:(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+"
    r"(?:(?P<src>\S+:\d+)\s+)?NCCL\s+(?P<level>INFO|WARN|TRACE|ABORT)\s?(?P<msg>.*)$")
VERSION_RE = re.compile(r"NCCL version (?P<full>(?P<version>\d+\.\d+\.\d+)\S*)")
NETWORK_RE = re.compile(r"^Using network (?P<name>.+?)\s*$")
IB_USING_RE = re.compile(r"^NET/IB\s*:\s*Using\s+(?P<list>[^;]*)(?:;\s*OOB\s+(?P<oob>[^:\s]+))?")
IB_DEV_RE = re.compile(r"\[\d+\](?P<hca>[^:\s\[]+):(?P<port>\d+)/(?P<layer>IB|RoCE)")
SOCKET_USING_RE = re.compile(r"^NET/Socket\s*:\s*Using\s+(?P<list>.*)$")
SOCKET_DEV_RE = re.compile(r"\[\d+\](?P<name>[^:\s]+):")
BOOTSTRAP_RE = re.compile(r"^Bootstrap\s*:\s*Using\s+(?:\[\d+\])?(?P<name>[^:\s]+):")
GDR_RE = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled)")
VIA_RE = re.compile(r"\bvia (?P<path>.+?)\s*$")
VIA_NET_RE = re.compile(r"^NET/(?P<net>.+?)/(?P<dev>\d+)(?:\(\d+\))?(?P<rest>(?:/[A-Za-z]+)*)$")
COMM_RE = re.compile(r"\brank (?P<rank>\d+) nranks (?P<nranks>\d+)\b")
PROVIDER_RE = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<provider>\S+)")


def strip_tag(line: str) -> str:
    """A line without its launcher prefix.

    >>> strip_tag("[1,0]<stdout>:h:1:1 [0] NCCL INFO x"), strip_tag("[0] h:1:1 [0] NCCL INFO x")
    ('h:1:1 [0] NCCL INFO x', 'h:1:1 [0] NCCL INFO x')
    """
    return TAG_RE.sub("", line, count=1)


def _new_rank(host: str | None, pid: int | None) -> dict[str, Any]:
    return {"host": host, "pid": pid, "rank": None, "nranks": None, "nccl_version": None,
            "network": None, "provider": None, "hcas": [], "interfaces": [],
            "bootstrap_interface": None, "oob_interface": None, "gdr": None,
            "paths": [], "warnings": []}


def _add_unique(items: list[Any], value: Any) -> None:
    if value not in items:
        items.append(value)


def _read_message(entry: dict[str, Any], level: str, msg: str, src: str | None) -> None:
    """Fold one NCCL message into a rank's entry."""
    if level in ("WARN", "ABORT"):
        _add_unique(entry["warnings"], f"{src + ' ' if src else ''}{msg.strip()}"[:500])
        return
    match = VERSION_RE.search(msg)
    if match and msg.lstrip().startswith("NCCL version"):
        entry["nccl_version"] = match.group("version")
        return
    if (match := NETWORK_RE.match(msg)):
        entry["network"] = match.group("name")
        return
    if (match := IB_USING_RE.match(msg)):
        for dev in IB_DEV_RE.finditer(match.group("list")):
            _add_unique(entry["hcas"], f"{dev.group('hca')}:{dev.group('port')}/{dev.group('layer')}")
        if match.group("oob"):
            entry["oob_interface"] = match.group("oob")
        return
    if (match := SOCKET_USING_RE.match(msg)):
        for dev in SOCKET_DEV_RE.finditer(match.group("list")):
            _add_unique(entry["interfaces"], dev.group("name"))
        return
    if (match := BOOTSTRAP_RE.match(msg)):
        entry["bootstrap_interface"] = match.group("name")
        return
    if (match := PROVIDER_RE.match(msg)):
        entry["provider"] = match.group("provider")
        return
    if (match := GDR_RE.search(msg)) and entry["gdr"] is not True:
        entry["gdr"] = match.group("state") == "Enabled"
        return
    if msg.startswith("Channel") and (match := VIA_RE.search(msg)):
        path = match.group("path")
        _add_unique(entry["paths"], path)
        net = VIA_NET_RE.match(path)
        if net:
            entry["gdr"] = True if "/GDRDMA" in net.group("rest") else (entry["gdr"] or False)
        return
    if (match := COMM_RE.search(msg)) and "Init" in msg:
        entry["rank"], entry["nranks"] = int(match.group("rank")), int(match.group("nranks"))


def parse_nccl_log(text: str) -> list[dict[str, Any]]:
    """One entry per process (host, pid) that wrote NCCL lines in ``text``.

    Lines without the ``host:pid:tid`` prefix (``NCCL version 2.5.6+cuda10.0`` as printed by old
    NCCL on stdout) go to the only process when there is one, else to an entry with no host.

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
    ranks: dict[tuple[str, int], dict[str, Any]] = {}
    loose: list[str] = []
    for raw in text.splitlines():
        line = strip_tag(raw.rstrip("\r"))
        match = LINE_RE.match(line.strip())
        if not match:
            if "NCCL version" in line or " NCCL WARN " in line:
                loose.append(line.strip())
            continue
        key = (match.group("host"), int(match.group("pid")))
        entry = ranks.setdefault(key, _new_rank(*key))
        _read_message(entry, match.group("level"), match.group("msg"), match.group("src"))
    if loose:
        if len(ranks) == 1:
            target = next(iter(ranks.values()))
        else:  # several processes: the line cannot be attributed (old NCCL printed it on rank 0)
            target = ranks.setdefault(("", 0), _new_rank(None, None))
            target["unattributed"] = True
        for line in loose:
            level = "WARN" if " NCCL WARN " in line else "INFO"
            msg = line.split(" NCCL WARN ", 1)[1] if level == "WARN" else line
            if level == "INFO" and target["nccl_version"]:
                continue
            _read_message(target, level, msg, None)
    return list(ranks.values())


def network_of(entry: dict[str, Any]) -> str | None:
    """The network a rank used: ``Using network X``, else the channels' ``via NET/X``, else
    which NET module listed devices.

    >>> network_of({"network": None, "paths": ["NET/IBext_v8/7/GDRDMA"], "hcas": [], "interfaces": []})
    'IBext_v8'
    >>> network_of({"network": None, "paths": ["P2P/IPC"], "hcas": [], "interfaces": ["lo"]})
    'Socket'
    """
    if entry.get("network"):
        return entry["network"]
    for path in entry.get("paths", []):
        net = VIA_NET_RE.match(path)
        if net:
            return net.group("net")
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
