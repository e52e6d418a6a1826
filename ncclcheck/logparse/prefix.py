"""Strip what launchers and log collectors put in front of a line, keeping who said it.

Recorded shapes (all seen in public NCCL issue threads):

* torchrun / c10d:  ``[rank3]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] ...``, and
  torchrun ``--tee`` tags ``[default0]:``, ``[trainer3]:``, ``[trainer0|0]:``;
* Open MPI ``--tag-output``: ``[1,3]<stdout>:host:pid:tid [0] NCCL INFO ...``, optionally after a
  ``--timestamp-output`` date;
* Slurm ``srun -l`` / pdsh / DeepSpeed: ``worker-0: worker-0:19484:21054 [0] NCCL INFO ...`` and
  ``0: host:pid:tid ...``; a bare ``[155] `` rank label;
* NCCL >= 2.26 WARN timestamps ``[2025-07-21 19:05:29] host:...``, Python logging
  ``[2021-01-31 23:07:46,345] ``, CloudWatch ``2024-12-04T05:27:42.076Z``;
* Ray ``(RayWorkerWrapper pid=1148) ``, ANSI colour codes and their ``[0m`` remnants.
"""

from __future__ import annotations

import re
from typing import Container, NamedTuple, Optional

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# One alternation, tried repeatedly at the start of the remaining text.
_PREFIX = re.compile(
    r"(?:"
    r"(?P<residue>\[\d{1,3}m\s*)"                                            # [0m remnant
    r"|(?P<mpi>(?:[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ [\d:]+ \d{4})?"
    r"\[\d+,(?P<mpirank>\d{1,9})\]<(?:stdout|stderr)>:\s?)"                      # [1,0]<stdout>:
    r"|(?P<torch>\[rank(?P<trank>\d{1,9})\]:\s?)"                               # [rank0]:
    r"|(?P<tee>\[(?P<teename>[A-Za-z_][\w\-]*?)(?P<teenum>\d+)(?:\|\d+)?\]:\s?)"  # [default0]:
    r"|(?P<stamp>\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+)"
    r"|(?P<ray>\((?P<rayname>[\w.\-]+) pid=\d+(?:, ip=[\d.:a-f]+)?\)\s+)"     # (Worker pid=1)
    r"|(?P<label>\[(?P<labelnum>\d{1,7})\]\s+)"                             # [155] host:...
    r"|(?P<box>[\u2502|]\s+)"                                               # kubectl box char
    r")")
# ``host: `` (pdsh, DeepSpeed, srun -l); only taken when an NCCL line header follows it.
_HOST_LABEL = re.compile(r"(?P<host>[\w.\-]{1,253}): (?=\S)")
_NCCL_HEAD = re.compile(r"[^\s:\[\]]+:\d+:\d+ \[\d+\] ")


class Prefix(NamedTuple):
    """Who a line came from, according to its launcher prefixes (None where unknown)."""

    rank: Optional[int] = None     #: a global rank ([rankN]:, MPI [job,rank], srun -l N:)
    tag: Optional[str] = None      #: a local label ([default0]:, [155], Ray worker name)
    host: Optional[str] = None     #: a host label (pdsh/Slurm ``host: ``)
    stamped: bool = False          #: a timestamp was stripped


def parse_prefix(line: str, hosts: Container[str] = ()) -> tuple[Prefix, str]:
    """Split launcher prefixes off ``line``.

    Args:
        line: one decoded log line, without its newline.
        hosts: ``host: `` labels already seen in front of NCCL lines; such a label is also taken
            in front of other text (a pdsh/Slurm traceback), where an unknown one is not, so that
            ``RuntimeError: ...`` stays text.

    Returns:
        The :class:`Prefix` found and the rest of the line.

    >>> parse_prefix("[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5")
    (Prefix(rank=3, tag=None, host=None, stamped=False), 'smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5')
    >>> parse_prefix("[rank1]:[E626 06:24:44.903 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog")[0].rank
    1
    >>> p, rest = parse_prefix("rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19484:21054 [0] NCCL INFO x")
    >>> p.host, rest[:24]
    ('rdma-gpu-train-worker-0', 'rdma-gpu-train-worker-0:')
    >>> parse_prefix("[2025-07-21 19:05:29] node004:27907:27907 [1] transport/nvls.cc:254 NCCL WARN x")[0].stamped
    True
    >>> parse_prefix("RuntimeError: NCCL error in: x")[1]
    'RuntimeError: NCCL error in: x'
    >>> parse_prefix("worker-1: RuntimeError: NCCL error in: x", hosts={"worker-1"})[0].host
    'worker-1'
    """
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    rank: Optional[int] = None
    tag: Optional[str] = None
    host: Optional[str] = None
    stamped = False
    pos = 0
    for _ in range(8):
        while pos < len(line) and line[pos] == " ":
            pos += 1
        m = _PREFIX.match(line, pos)
        if m is None:
            h = _HOST_LABEL.match(line, pos)
            if h is not None and host is None and h.group("host") in hosts:
                host, pos = h.group("host"), h.end()     # a known host before plain text
                continue
            if h is None or not _NCCL_HEAD.match(line, h.end()):
                if h is not None and h.group("host").isdigit() and len(h.group("host")) < 10 \
                        and rank is None:
                    rank, pos = int(h.group("host")), h.end()   # srun -l "3: Traceback ..."
                    continue
                break
            label = h.group("host")
            if label.isdigit() and len(label) < 10:
                rank = int(label) if rank is None else rank
            else:
                host = label
            pos = h.end()
            continue
        if m.group("mpirank") is not None:
            rank = int(m.group("mpirank"))
        elif m.group("trank") is not None:
            rank = int(m.group("trank"))
        elif m.group("teenum") is not None:
            tag = m.group("teename") + m.group("teenum")
        elif m.group("labelnum") is not None:
            tag = tag or m.group("labelnum")
        elif m.group("rayname") is not None:
            tag = tag or m.group("rayname")
        elif m.group("stamp") is not None:
            stamped = True
        pos = m.end()
    return Prefix(rank, tag, host, stamped), line[pos:]
