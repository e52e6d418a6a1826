"""What the text a failed job leaves says about each rank: exits, hosts, timeouts, stacks.

Lines are recognised by what they say, in any file and any mix:

- torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors)::

      Root Cause (first observed failure):
      [0]:
        time      : 2026-11-26_15:21:59
        host      : node1
        rank      : 3 (local_rank: 1)
        exitcode  : -9 (pid: 12920)
        error_file: <N/A>
        traceback : Signal 9 (SIGKILL) received by PID 12920

- Slurm's ``srun: error: node1: task 3: Killed`` (and ``Exited with exit code 3``); srun(1)
  ``--label`` ("prepend task number to lines of stdout/err": ``3: ...``): the task is the rank,
  unless a ``[rankN]:`` under another task's label shows srun started torchrun per node;
- torch's ``[rank3]:`` prefix on a rank's output, gloo's ``Timed out waiting 3000ms for recv``
  and ``Connection closed by peer [198.18.0.2]:4231``, the NCCL watchdog's ``Watchdog caught
  collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, ...)``;
- a Python stack written by faulthandler or a signal handler (``Stack (most recent call
  first):``, ``File "train.py", line 12 in step``): where a live rank waited;
- torchrun ``--log-dir`` files (``--redirects``/``--tee``), ``<log_dir>/<run_id>_<random>/
  attempt_K/<local_rank>/stderr.log`` (torch/distributed/elastic/multiprocessing/api.py,
  ``DefaultLogsSpecs.reify``), and ``--tee``'s console header ``[default1]:`` (role name and local
  rank, tail_log.py): the local rank. The global rank is the file's own ``[rankN]:`` line (torch
  prefixes an uncaught exception so), else the one rank torchrun's summary gives that local
  rank; lines before it (a faulthandler stack has no prefix) wait in :meth:`JobText.resolve`.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

from ncclcheck.jobdir.ras import RasScanner
from ncclcheck.jobdir.srunlaunch import SrunLaunch, task_ids

LAST_LINES = 6
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")
_HOST = re.compile(r"\bhost\s{2,}:\s*(\S+)")
_RANKLINE = re.compile(r"\brank\s{2,}:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
_EXIT = re.compile(r"\bexitcode\s{2,}:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
_TIME = re.compile(r"\btime\s{2,}:")
_TB_SIGNAL = re.compile(r"traceback\s*:\s*Signal (\d+) \((\w+)\)")
_SRUN = re.compile(r"srun: error: ([\w.-]+): tasks? ([\d,\-]+): (.+)")
_SRUN_EXIT = re.compile(r"[Ee]xited with exit code (\d+)")
_WATCHDOG = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+))?")
_WATCHDOG_RANK = re.compile(r"\bRank (\d+)\]")
_STACK_HEAD = re.compile(r"(?:Stack|Current thread 0x[0-9a-f]+|Thread 0x[0-9a-f]+) "
                         r"\(most recent call first\)")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+),? in (\S+)')
_LOGDIR = re.compile(r"attempt_\d+/(\d+)/(?:stdout|stderr)\.log$")
_TEE = re.compile(r"^\[([A-Za-z_][\w.-]*?)(\d+)\]:")
LABEL = re.compile(r"^ *(\d{1,7}): ")
LABEL_B = re.compile(rb"^ *(\d{1,7}): ")
_GLOO_TIMEOUT = "Timed out waiting"
#: gloo's transport/tcp/pair.cc when a peer's socket ends: closed, or reset ("Read error ...")
_CLOSED = re.compile(r"Connection closed by peer \[([^\]]+)\]"
                     r"|Read error \[([^\]]+)\]:\d+: Connection reset by peer")
SIGNALS = {"SIGKILL": 9, "SIGSEGV": 11, "SIGTERM": 15, "SIGABRT": 6, "SIGBUS": 7}
_SRUN_SIGNAL = {"Killed": 9, "Segmentation fault": 11, "Terminated": 15, "Aborted": 6,
                "Bus error": 7}


@dataclass
class RankText:
    """What the text says of one global rank."""

    host: Optional[str] = None
    local_rank: Optional[int] = None
    pid: Optional[int] = None
    exitcode: Optional[int] = None
    signal: Optional[str] = None
    exit_evidence: Optional[str] = None
    root_cause: bool = False
    timed_out: Optional[str] = None          #: evidence of its own collective timeout
    watchdog: Optional[tuple[int, str, str]] = None  #: (seq, op, evidence)
    stack: list[str] = field(default_factory=list)
    stack_evidence: Optional[str] = None
    last: deque = field(default_factory=lambda: deque(maxlen=LAST_LINES))


@dataclass
class JobText:
    """Everything the text inputs say, by global rank."""

    ranks: dict[int, RankText] = field(default_factory=dict)
    srun_tasks: dict[int, tuple[str, str, Optional[int], Optional[str], str]] = \
        field(default_factory=dict)   #: task -> (host, reason, exitcode, signal, evidence)
    closed_peers: dict[str, str] = field(default_factory=dict)  #: address -> evidence
    #: address -> the ranks the artifacts place there (NCCL's bootstrap/socket lines, a host
    #: given as an address): filled by the job reader before the verdict
    addresses: dict[str, set[int]] = field(default_factory=dict)
    torchrun_summary: bool = False
    ras: RasScanner = field(default_factory=RasScanner)
    launch: SrunLaunch = field(default_factory=SrunLaunch)  #: srun -v's task -> node lines
    #: lines known by local rank only, per (file, local rank), until :meth:`resolve`
    locals: dict[tuple[str, int], RankText] = field(default_factory=dict)

    def local(self, name: str, local_rank: int) -> RankText:
        """The record of local rank ``local_rank`` as file ``name`` tells it."""
        got = self.locals.get((name, local_rank))
        if got is None:
            got = self.locals[(name, local_rank)] = RankText(local_rank=local_rank)
        return got

    def merge(self, key: tuple[str, int], r: int) -> None:
        """Hand what a file said of a local rank to global rank ``r``."""
        p = self.locals.pop(key, None)
        if p is None:
            return
        t = self.rank(r)
        t.local_rank = key[1] if t.local_rank is None else t.local_rank
        self.adopt(p, r)

    def adopt(self, p: RankText, r: int) -> None:
        """Hand what was said of a rank under another name (a local rank, an srun task) to
        global rank ``r``; last lines of one file keep their order."""
        t = self.rank(r)
        if p.stack and not t.stack:
            t.stack, t.stack_evidence = p.stack, p.stack_evidence
        t.timed_out = t.timed_out or p.timed_out
        t.watchdog = t.watchdog or p.watchdog
        both = sorted((*t.last, *p.last), key=lambda x: (x[0].rpartition(":")[0],
                                                           int(x[0].rpartition(":")[2] or 0)))
        t.last.clear()
        t.last.extend(both)

    def resolve(self) -> None:
        """Give each local rank's lines to the one global rank of that local rank (torchrun's
        summary or a ``[rankN]:`` line elsewhere); with several candidates (nodes), none."""
        for key in list(self.locals):
            which = [r for r, t in self.ranks.items() if t.local_rank == key[1]]
            if len(which) == 1:
                self.merge(key, which[0])

    def rank(self, r: int) -> RankText:
        """The record of rank ``r``."""
        got = self.ranks.get(r)
        if got is None:
            got = self.ranks[r] = RankText()
        return got


class TextScanner:
    """Feed one file's lines (``feed``), then ``close``; results land in a shared :class:`JobText`."""

    def __init__(self, job: JobText, name: str, labelled: bool = False) -> None:
        self.job = job
        self.name = name
        #: srun --label'd: per task, what lines with no [rankN]: said (given at close)
        self.tasks: Optional[dict[int, RankText]] = {} if labelled else None
        self.tasks_are_ranks = True
        m = _LOGDIR.search(name.replace("\\", "/"))
        self.local_rank = int(m.group(1)) if m else None
        self.file_rank: Optional[int] = None
        self._block: dict = {}
        self._root = False
        self._stack: Optional[list[str]] = None
        self._stack_rank: Optional[RankText] = None
        self._stack_at = ""
        self._pending: dict[bytes, deque] = {}
        self._dirty = False

    def _flush_block(self) -> None:
        b, self._block = self._block, {}
        if "rank" not in b:
            return
        r = self.job.rank(b["rank"])
        self.job.torchrun_summary = True
        r.host = b.get("host") or r.host
        r.local_rank = b.get("local_rank", r.local_rank)
        if "exitcode" in b:
            r.exitcode, r.pid = b["exitcode"], b.get("pid") or r.pid
            r.exit_evidence = b["at"]
        r.signal = b.get("signal") or r.signal
        if b.get("root"):
            r.root_cause = True

    def feed(self, line: str, lineno: int) -> None:
        """One line (decoded, without its newline)."""
        self.flush()
        at = f"{self.name}:{lineno}"
        rank = task = None
        if self.tasks is not None:
            lab = LABEL.match(line)
            if lab:
                task, line = int(lab.group(1)), line[lab.end():]
        local = self.local_rank
        tee = _TEE.match(line)
        if tee and tee.group(1) != "rank":       # torchrun --tee: [<role><local rank>]:
            local = int(tee.group(2))
            line = line[tee.end():]
        m = _RANK_PREFIX.match(line)
        if m:
            rank = int(m.group(1))
            line = line[m.end():]
            if local is not None and self.job.rank(rank).local_rank is None:
                self.job.rank(rank).local_rank = local
            if self.local_rank is not None and self.file_rank is None:
                self.file_rank = rank
        if rank is None and not tee:
            rank = self.file_rank
        who = self.job.rank(rank) if rank is not None else (
            self.job.local(self.name, local) if local is not None else None)
        if task is not None:
            if rank is not None and rank != task:
                self.tasks_are_ranks = False
            elif who is None and self.tasks is not None:
                who = self.tasks.get(task) or self.tasks.setdefault(task, RankText())
        self._frames(line, who, at)
        if "Root Cause (first observed failure)" in line:
            self._flush_block()
            self._root = True
        elif "Failures:" in line:
            self._flush_block()
            self._root = False
        elif re.match(r"^\[\d+\]:\s*$", line.strip()) or _TIME.search(line):
            self._flush_block()
            self._block = {"root": self._root, "at": at}
        elif self._block or _RANKLINE.search(line):
            self._block_line(line, at)
        if "srun: " in line and not self.job.launch.feed(line, at):
            self._srun(line, at)
        if who is not None and line.strip():
            who.last.append((at, line.rstrip()[:300]))
        if _GLOO_TIMEOUT in line or "Watchdog caught collective operation timeout" in line:
            self._timeout(line, who, at, rank is not None)
        if "RAS" in line or "launched up to" in line or " -- GPU " in line or \
                "MISMATCH" in line or "INCOMPLETE" in line or "operation counts" in line:
            self.job.ras.feed(line, at)
        c = _CLOSED.search(line)
        if c:
            self.job.closed_peers.setdefault(c.group(1) or c.group(2), at)

    def plain(self, raw: bytes, lineno: int) -> bool:
        """A ``[rankN]:`` line that holds none of the other keys: it can only be one of its
        rank's last lines, so it waits, undecoded, in a short queue per rank (:meth:`flush`
        hands the queues over before any other line is read, and at the end). False (nothing
        done) where ``feed`` must read it: a stack or a summary block is open, the file is a
        --log-dir file (its ranks are being mapped), or the text after the prefix starts with
        ``[`` (a summary's ``[0]:``)."""
        if self._stack is not None or self._block or self.local_rank is not None \
                or self.tasks is not None:
            return False
        end = raw.find(b"]:", 5, 32)
        if end < 6:
            return False
        key = raw[5:end]
        queue = self._pending.get(key)
        if queue is None:
            if not key.isdigit():
                return False
            self.job.rank(int(key))              # ranks appear in the order the lines show
            queue = self._pending[key] = deque(maxlen=LAST_LINES)
        rest = raw[end + 2:end + 3]
        if rest == b"[" or (rest.isspace() and raw[end + 2:].lstrip()[:1] == b"["):
            return False
        if len(raw.rstrip()) > end + 2:           # a blank line is not kept
            queue.append((lineno, raw, end))
        self._dirty = True
        return True

    def flush(self) -> None:
        """Hand the queued plain lines to their ranks' last lines, in order."""
        if not self._dirty:
            return
        for key, queue in self._pending.items():
            if queue:
                last = self.job.rank(int(key)).last
                for lineno, raw, end in queue:
                    last.append((f"{self.name}:{lineno}",
                                 raw[end + 2:].decode("utf-8", "replace").rstrip()[:300]))
                queue.clear()
        self._dirty = False

    def tail(self, data: bytes, last_lineno: int, full: "re.Pattern[bytes]") -> None:
        """The plain ``[rankN]:`` lines of a file's tail (``data``, whole lines, the last of
        them line ``last_lineno``) taken as their ranks' last lines, in line order among those
        ``feed`` kept; a line that ``full`` matches was fed already."""
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        first = last_lineno - len(lines) + 1
        found: dict[int, list[tuple[int, str]]] = {}
        tasks: dict[int, list[tuple[str, str]]] = {}
        for k in range(len(lines) - 1, -1, -1):
            raw = lines[k]
            task = None
            if self.tasks is not None:
                lab = LABEL_B.match(raw)
                if lab:
                    task, raw = int(lab.group(1)), raw[lab.end():]
            if not raw.startswith(b"[rank"):
                if task is not None and raw.strip() and not full.search(raw):
                    told = tasks.setdefault(task, [])
                    if len(told) < LAST_LINES:
                        told.append((f"{self.name}:{first + k}",
                                     raw.decode("utf-8", "replace").rstrip()[:300]))
                continue
            end = raw.find(b"]:", 5, 32)
            if end < 6 or not raw[5:end].isdigit() or (task is None and len(found.get(int(
                    raw[5:end]), ())) >= LAST_LINES) or full.search(raw):   # (has its lines)
                continue
            if task is not None and int(raw[5:end]) != task:
                self.tasks_are_ranks = False
            text = raw[end + 2:].decode("utf-8", "replace").rstrip()
            got = found.setdefault(int(raw[5:end]), [])
            if text.strip() and not text.lstrip().startswith("[") and len(got) < LAST_LINES:
                got.append((first + k, text[:300]))
        for task, told in tasks.items() if self.tasks is not None else ():
            last = self.tasks.setdefault(task, RankText()).last
            both = sorted({*last, *told}, key=lambda x: int(x[0].rpartition(":")[2]))
            last.clear()
            last.extend(both)
        mine = f"{self.name}:"
        for r, got in found.items():
            last = self.job.rank(r).last
            kept = [(0, i, at, line) for i, (at, line) in enumerate(last)
                    if not at.startswith(mine)]
            kept += [(1, int(at[len(mine):]), at, line) for at, line in last
                     if at.startswith(mine)]
            fed = {n for k, n, *_ in kept if k}          # lines a key's follow-up fed already
            kept += [(1, n, f"{mine}{n}", line) for n, line in got if n not in fed]
            last.clear()
            last.extend((at, line) for *_, at, line in sorted(kept)[-LAST_LINES:])

    def _block_line(self, line: str, at: str) -> None:
        if not self._block:
            self._block = {"root": self._root, "at": at}
        b = self._block
        for rx, keys in ((_HOST, ("host",)), (_RANKLINE, ("rank", "local_rank")),
                         (_EXIT, ("exitcode", "pid"))):
            m = rx.search(line)
            if m:
                for k, v in zip(keys, m.groups()):
                    b[k] = v if k == "host" else int(v)
                if keys[0] == "exitcode":
                    b["at"] = at
        s = _TB_SIGNAL.search(line)
        if s:
            b["signal"] = s.group(2)
        if "traceback :" in line or "=====" in line:
            self._flush_block()

    def _srun(self, line: str, at: str) -> None:
        m = _SRUN.search(line)
        if not m:
            return
        host, tasks, reason = m.group(1), m.group(2), m.group(3).strip()
        code = _SRUN_EXIT.search(reason)
        sig = _SRUN_SIGNAL.get(next((s for s in _SRUN_SIGNAL if reason.startswith(s)), ""))
        signame, exitcode = {v: k for k, v in SIGNALS.items()}.get(sig or 0), code and int(code[1])
        for t in task_ids(tasks):
            self.job.srun_tasks[t] = (host, reason, exitcode, signame, at)

    def _timeout(self, line: str, who: Optional[RankText], at: str, known: bool) -> None:
        w = _WATCHDOG.search(line)
        wr = _WATCHDOG_RANK.search(line)
        if not known and wr:                    # the watchdog's "[Rank 7]": a global rank
            who = self.job.rank(int(wr.group(1)))
        if who is None:
            return
        r = who
        r.timed_out = r.timed_out or at
        if w and r.watchdog is None:
            r.watchdog = (int(w.group(1)), w.group(2), at)

    def _frames(self, line: str, who: Optional[RankText], at: str) -> None:
        if _STACK_HEAD.search(line):
            self._stack, self._stack_rank, self._stack_at = [], who, at
            return
        if self._stack is None:
            return
        f = _FRAME.match(line)
        if f:
            self._stack.append(f"{f.group(1)}:{f.group(2)} in {f.group(3)}")
            return
        self._end_stack()

    def _end_stack(self) -> None:
        if self._stack and self._stack_rank is not None:
            r = self._stack_rank
            r.stack, r.stack_evidence = self._stack[:8], self._stack_at
        self._stack = None

    def close(self) -> None:
        """End of the file."""
        self.flush()
        self._end_stack()
        self._flush_block()
        if self.file_rank is not None and self.local_rank is not None:
            self.job.merge((self.name, self.local_rank), self.file_rank)
        self.job.launch.tasks_are_ranks &= self.tasks_are_ranks
        for task, said in (self.tasks or {}).items() if self.tasks_are_ranks else ():
            self.job.adopt(said, task)
