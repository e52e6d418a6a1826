"""What the log state keeps: one :class:`Proc` per process, a :class:`FindingAcc` per finding,
and :func:`evidence` lines, each list under a cap (see :mod:`ncclcheck.logparse.state`).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ncclcheck.signatures.base import Detail, Signature

MAX_EVIDENCE = 5            #: example lines kept per finding
MAX_LIST = 64               #: per-process lists (devices, comms, env, ...)
MAX_SET = 256               #: hosts/ranks named per finding
EVIDENCE_CHARS = 400        #: characters of a line kept as evidence
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


Line = Union[str, bytes]     #: a log line, raw on the fast path (decoded only for evidence)


def evidence(file: str, lineno: int, text: Line) -> dict[str, Any]:
    """One example line for a finding, cut to :data:`EVIDENCE_CHARS` (raw bytes are decoded).

    >>> ev = evidence("a.log", 3, "x" * 500); len(ev["text"]), ev["text"][-1]
    (400, '…')
    >>> evidence("a.log", 1, b"caf\\xc3\\xa9 \\xff")["text"]
    'café �'
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    if len(text) > EVIDENCE_CHARS:
        text = text[:EVIDENCE_CHARS - 1] + "…"
    return {"file": file, "line": lineno, "text": text}


class Proc:
    """What one process (one rank, usually) said about itself."""

    __slots__ = ("key", "host", "pid", "rank", "launcher_rank", "tag", "node", "devs", "bus_id",
                 "nccl_version", "cuda_version", "cuda_driver", "torch_version", "bootstrap",
                 "oob", "socket_ifs", "network", "ib_devices", "plugins", "gdr", "dmabuf",
                 "channels", "coll_channels", "rings", "trees", "transports", "gdr_connections",
                 "env", "plugin_env", "comms", "nnodes", "ibverbs_missing", "ib_no_device", "ib_open_failed",
                 "warns", "lines", "first", "evidence", "version_hint")

    def __init__(self, key: str) -> None:
        self.key = key
        self.host: Optional[str] = None
        self.pid: Optional[int] = None
        self.rank: Optional[int] = None
        self.launcher_rank: Optional[int] = None
        self.tag: Optional[str] = None
        self.node: Optional[str] = None          # the launcher's host label (pdsh/Slurm)
        self.devs: list[int] = []
        self.bus_id: Optional[str] = None
        self.nccl_version: Optional[str] = None
        self.cuda_version: Optional[str] = None
        self.cuda_driver: Optional[int] = None
        self.torch_version: Optional[str] = None  # the NCCL version torch's error message names
        self.bootstrap: list[tuple[str, str]] = []
        self.oob: Optional[tuple[str, str]] = None
        self.socket_ifs: list[tuple[str, str]] = []
        self.network: Optional[str] = None
        self.ib_devices: list[tuple[str, int, str]] = []
        self.plugins: list[str] = []
        self.gdr: dict[str, bool] = {}           # "0 'mlx5_0'" -> enabled
        self.dmabuf = False
        self.channels: Optional[int] = None      # from the ring listing "Channel 00/08"
        self.coll_channels: Optional[int] = None  # "16 coll channels, ..."
        self.rings: set[int] = set()
        self.trees: Optional[int] = None
        self.transports: dict[str, int] = {}     # "NET/IB" -> connections
        self.gdr_connections = 0
        self.env: dict[str, str] = {}
        self.plugin_env: dict[str, str] = {}     # what a net plugin set for NCCL to read
        self.comms: dict[str, dict[str, Any]] = {}  # comm pointer -> {rank, nranks, state}
        self.nnodes: Optional[int] = None
        self.ibverbs_missing = False
        self.ib_no_device = False
        self.ib_open_failed = False
        self.warns = 0
        self.lines = 0
        self.first: Optional[tuple[str, int]] = None
        self.evidence: dict[str, dict[str, Any]] = {}  # fact kind -> first evidence line
        self.version_hint: Optional[tuple[tuple[int, int], tuple[int, int]]] = None  # plugin loader

    @property
    def init_complete(self) -> bool:
        """Whether any communicator of this process printed Init COMPLETE."""
        return any(c["state"] == "COMPLETE" for c in self.comms.values())

    @property
    def init_started(self) -> bool:
        """Whether this process printed Init START for a communicator."""
        return any(c.get("started") for c in self.comms.values())

    def net_name(self) -> Optional[str]:
        """The network as NCCL names it: ``Using network X``, else the ``via NET/X`` transport.

        >>> p = Proc("h:1"); p.transports["NET/AWS Libfabric"] = 2; p.net_name()
        'AWS Libfabric'
        """
        if self.network:
            return self.network
        nets = [t[4:] for t in self.transports if t.startswith("NET/")]
        return nets[0] if nets else None

    def net_family(self) -> Optional[str]:
        """``ib``, ``socket`` or a plugin's name (lower case), from ``Using network`` or channels.

        >>> p = Proc("h:1"); p.network = "IBext_v8"; p.net_family()
        'ib'
        """
        name = self.net_name()
        if not name:
            return None
        low = name.lower()
        if low == "ib" or low.startswith("ibext") or low.startswith("ibp") or "rdma plugin" in low:
            return "ib"
        if low == "socket":
            return "socket"
        return low

    def display_rank(self) -> Optional[int]:
        """The rank to show: the launcher's, else the one in the largest communicator."""
        if self.launcher_rank is not None:
            return self.launcher_rank
        best = max(self.comms.values(), key=lambda c: c["nranks"], default=None)
        return best["rank"] if best else self.rank

    def largest_nranks(self) -> Optional[int]:
        """The size of the largest communicator this process joined."""
        return max((c["nranks"] for c in self.comms.values()), default=None)


class FindingAcc:
    """A finding being accumulated while the log streams by."""

    __slots__ = ("sig", "count", "evidence", "hosts", "ranks", "variants", "severity", "detail",
                 "message", "title")

    def __init__(self, sig: Signature) -> None:
        self.sig = sig
        self.count = 0
        self.evidence: list[dict[str, Any]] = []
        self.hosts: set[str] = set()
        self.ranks: set[int] = set()
        self.variants: dict[str, int] = {}
        self.severity: Optional[str] = None      # the worst severity of the occurrences
        self.detail: Optional[Detail] = None
        self.message: Optional[str] = None       # set by whole-log checks
        self.title: Optional[str] = None         # set by checks whose input is not a log line

    def add(self, detail: Detail, ev: Optional[dict[str, Any]], host: Optional[str],
            rank: Optional[int]) -> None:
        """Count one more occurrence."""
        self.count += 1
        severity = detail.severity or self.sig.severity
        current = self._rank(self.detail.severity or self.sig.severity) if self.detail else -1
        if self._rank(severity) > current or (
                self._rank(severity) == current and detail.cause and not self.detail.cause
                and not self.detail.fix):  # type: ignore[union-attr]
            self.detail = detail          # the worst occurrence speaks, the most specific first
        if self.severity is None or self._rank(severity) > self._rank(self.severity):
            self.severity = severity
        if detail.variant and (detail.variant in self.variants or len(self.variants) < 10):
            self.variants[detail.variant] = self.variants.get(detail.variant, 0) + 1
        if ev is not None and len(self.evidence) < MAX_EVIDENCE:
            self.evidence.append(ev)
        if host and len(self.hosts) < MAX_SET:
            self.hosts.add(host)
        if rank is not None and len(self.ranks) < MAX_SET:
            self.ranks.add(rank)

    @staticmethod
    def _rank(severity: str) -> int:
        return _SEVERITY_RANK.get(severity, 0)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of the finding."""
        sig, detail = self.sig, self.detail or Detail()
        message = self.message or detail.message or sig.title
        if self.variants and len(self.variants) > 1:
            message += " (also: " + ", ".join(
                f"{v} x{n}" for v, n in self.variants.items() if v != detail.variant) + ")"
        return {
            "id": sig.id, "title": self.title or sig.title, "severity": self.severity or sig.severity,
            "message": message,
            "cause": detail.cause or sig.cause, "fix": detail.fix or sig.fix, "docs": sig.docs,
            "evidence": self.evidence, "hosts": sorted(self.hosts), "ranks": sorted(self.ranks),
            "count": self.count,
        }
