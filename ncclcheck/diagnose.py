"""``ncclcheck diagnose``: explain NCCL logs, from any launcher, streaming and with bounded memory.

Flow: open each input (file, gzip file or ``-``) → keep only the lines holding one of
:data:`KEYS`, found per 1 MiB chunk at C speed (:func:`~ncclcheck.logparse.prefilter.iter_matching`;
:class:`Wanted` is the same filter for one line) → decode and feed them to a :class:`~ncclcheck.logparse.state.LogState`
(per-process facts and line-level findings) → run the whole-log checks
(:mod:`ncclcheck.judge.derived`) → build the ``ncclcheck/diagnosis`` document. A plain file's
job-level lines (:class:`~ncclcheck.jobdir.inputs.InlineScan`) are taken in the same pass
(:func:`~ncclcheck.logparse.prefilter.iter_blocks2`); gzip and --log-dir files get a pass of
their own (:func:`~ncclcheck.jobdir.inputs.scan_text`).

The document::

    {"schema": "ncclcheck/diagnosis", "schema_version": 1, "ncclcheck_version": ...,
     "created_at": "2026-11-20T10:05:00Z",
     "inputs": [{"name", "gzip", "bytes", "lines", "truncated_lines", "error"?}],
     "healthy": bool, "summary": {...}, "hosts": {host: {...}}, "ranks": [{...}, ...],
     "findings": [{"id", "title", "severity", "message", "cause", "fix", "docs",
                   "evidence": [{"file", "line", "text"}], "hosts", "ranks", "count"}]}
"""

from __future__ import annotations

import re
from itertools import repeat
from typing import Any, BinaryIO, Optional, Sequence

from ncclcheck.errors import BadInput
from ncclcheck.judge.derived_base import plural
from ncclcheck.logparse.proc import Proc
from ncclcheck.logparse.reader import (
    InputStats,
    check_readable,
    open_source,
)
from ncclcheck.logparse.parallel import blocks
from ncclcheck.logparse.nccl import OLD_KEYS
from ncclcheck.logparse.pasted import KEYS_FOLLOW as PASTED_FOLLOW
from ncclcheck.logparse.pasted import Pasted
from ncclcheck.logparse.state import LogState
from ncclcheck.schema import envelope, now_utc
from ncclcheck.judge.derived import run_checks
from ncclcheck.judge.pasted import check_pasted
from ncclcheck.jobdir.inputs import InlineScan, expand, prefetch, read_dump, scan_text
from ncclcheck.jobdir.job import JobReader

MAX_RANKS_LISTED = 4096
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
#: What a line without "NCCL" must contain to matter: NCCL's own API names (ncclShmOpen,
#: ncclSystemError, /dev/shm/nccl-*), crash signals, the torch heartbeat, RDMA device names, the
#: MPI launcher's UCX/PMIx errors (the words their signature looks for), Python's ENOMEM (fork on EFA).
#: NCCL's WARN text repeated by PyTorch after "Last error:" is caught by taking the next line.
TEXT_KEYS = (b"nccl", b"Bus error", b"SIGBUS", b"Heartbeat monitor", b"mlx", b"infiniband",
             b"Last error", b"network device", b"PMIX ERROR", b"[Errno 12]")
#: every key the reader's bytes-level prefilter looks for, and those whose next line is taken too.
KEYS = (b"NCCL",) + TEXT_KEYS + OLD_KEYS + tuple(PASTED_FOLLOW)
NEXT_KEYS = {b"Last error": 1, **PASTED_FOLLOW}


class Wanted:
    """The reader's filter: is a raw line worth decoding? (Stateful: the line after
    ``Last error:`` is always taken, since PyTorch prints NCCL's reason there.)

    >>> w = Wanted()
    >>> w(b"host:1:2 [0] NCCL INFO Using network IB"), w(b"epoch 3 loss 0.25")
    (True, False)
    >>> w(b"Last error:"), w(b"Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000")
    (True, True)
    """

    def __init__(self) -> None:
        self._take_next = False

    def __call__(self, line: bytes) -> bool:
        if self._take_next:
            self._take_next = False
            return True
        if b"NCCL" in line:
            return True
        for key in TEXT_KEYS:
            if key in line:
                if key == b"Last error":
                    self._take_next = True
                return True
        return False


#: characters from the input that must not reach a terminal raw: C0 (but tab), DEL, C1 (CSI is
#: \x9b) and the bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str) -> str:
    r"""``text`` with every control character written as an escape, so that a hostile log cannot
    rewrite the terminal (issue 16): ``\x1b[2J`` is shown, not obeyed.

    >>> safe_text("WARN \x1b[2Jcleared\x07 \u202eevil\tok")
    'WARN \\x1b[2Jcleared\\x07 \\u202eevil\tok'
    """
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                  else f"\\u{ord(m.group()):04x}"), text)


def escape_controls(obj: Any) -> Any:
    """Apply :func:`safe_text` to every string (keys included) of a JSON-like document."""
    if isinstance(obj, str):
        return safe_text(obj)
    if isinstance(obj, dict):
        return {escape_controls(k): escape_controls(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [escape_controls(v) for v in obj]
    return obj


def diagnose_files(paths: Sequence[str], stdin: Optional[BinaryIO] = None) -> dict[str, Any]:
    """Read every input and return the diagnosis document.

    Args:
        paths: log files (plain or gzip), Flight Recorder dumps, or folders of a job's output
            (each file taken by its content); ``-`` reads ``stdin``.
        stdin: the binary stream ``-`` stands for (default ``sys.stdin.buffer``).

    An input that breaks off after some text (a truncated gzip, a read error) keeps what was
    read; its ``inputs[].error`` says where it stopped.

    Raises:
        BadInput: no input, ``-`` twice, or a file that cannot be read at all, a corrupt gzip
            file included (named in the message).
    """
    if not paths:
        raise BadInput("no input: give one or more log files, or - for standard input")
    if list(paths).count("-") > 1:
        raise BadInput("- (standard input) can only be given once")
    paths = expand(list(paths))
    for path in paths:
        check_readable(path)
    state = LogState()
    pasted = Pasted()
    inputs: list[InputStats] = []
    job = JobReader()
    prefetch(job, paths)                          # many Flight Recorder dumps: worker processes
    for path in paths:
        dump = read_dump(job, path)
        if dump is not None:
            inputs.append(dump)
            continue
        with open_source(path, stdin) as src:
            inline = InlineScan.of(job, path, src)
            if inline is None:
                scan_text(job, path)                     # a pass of its own
            feed = state.feed_bytes
            name = src.stats.name
            tests = pasted.tests
            # one pass for both readers (issue 24): ``which & 2`` lines go to the job scan,
            # ``which & 1`` lines (what iter_matching with KEYS and NEXT_KEYS takes) to the parse
            for numbers, lines, whiches in blocks(       # a big file: prefiltered by workers
                    src, path, KEYS, NEXT_KEYS, inline.keys if inline else (),
                    inline.follow if inline else {}):
                if whiches is None and state.fast and not tests.reading:
                    state.feed_block(lines, numbers, name)     # NCCL lines only: C loops
                    continue
                for lineno, raw, which in zip(numbers, lines, whiches or repeat(1)):
                    if which != 1:
                        if which & 2:
                            inline.feed(lineno, raw)            # type: ignore[union-attr]
                        if not which & 1:
                            continue
                    feed(raw, name, lineno)
                    if b"NCCL" not in raw:               # pasted ibstat, show_gids, ip addr...
                        text = raw.decode("utf-8", "replace")
                        pasted.feed(text, {"file": name, "line": lineno, "text": text.strip()[:400]})
                    elif tests.reading:                  # NCCL lines inside an nccl-tests table
                        pasted.feed_nccl(raw.decode("utf-8", "replace"), {})
            state.flush()
            pasted.close()
            if inline is not None:
                inline.close(src.stats)
            if src.stats.error and not src.stats.bytes:
                what = "not a readable gzip file" if src.stats.gzip else "cannot read"
                raise BadInput(f"{name}: {what} ({src.stats.error.removeprefix('read stopped: ')})")
            inputs.append(src.stats)
    state.gpu_models = pasted.tests.gpu_models()    # GPUDirect RDMA by platform (GB10: none)
    run_checks(state)
    check_pasted(state, pasted)
    doc = build_document(state, inputs)
    doc.update(escape_controls(job.result(doc["ranks"])) if job.found_anything()
               else {"culprits": [], "first_desync": None})
    if doc.get("job") and (doc["culprits"] or job.dumps or doc["first_desync"]
                           or doc["job"]["disagreements"]):
        doc["summary"]["verdict"] = doc["job"]["verdict"] + (
            "" if doc["summary"]["verdict"].startswith("no NCCL") else
            f"; NCCL logs: {doc['summary']['verdict']}")
        doc["healthy"] = doc["healthy"] and not doc["culprits"]
    if pasted.kinds:
        doc["pasted"] = escape_controls(pasted.document())
        if not doc["findings"] and not doc["summary"]["nccl_lines"]:
            doc["summary"]["verdict"] = ("no NCCL log lines; nothing to report in the pasted "
                                         + ", ".join(sorted(pasted.kinds)))
    return doc


def _gdr_summary(p: Proc) -> Optional[str]:
    if p.gdr_connections:
        return "used"
    if any(p.gdr.values()):
        return "enabled"
    if p.gdr and p.net_family() == "ib":
        return "disabled"
    return None


def rank_facts(p: Proc) -> dict[str, Any]:
    """The per-process facts of the document's ``ranks`` list."""
    return {
        "key": p.key, "host": p.host, "node": p.node, "pid": p.pid, "rank": p.display_rank(),
        "nranks": p.largest_nranks(), "cuda_devices": sorted(p.devs), "bus_id": p.bus_id,
        "nccl_version": p.nccl_version or p.torch_version, "cuda_version": p.cuda_version,
        "cuda_driver": p.cuda_driver,
        "bootstrap": [{"interface": n, "address": a} for n, a in p.bootstrap],
        "network": p.net_name(),
        "ib_devices": [{"name": n, "port": port, "link_layer": ll} for n, port, ll in p.ib_devices],
        "oob": {"interface": p.oob[0], "address": p.oob[1]} if p.oob else None,
        "socket_interfaces": [{"interface": n, "address": a} for n, a in p.socket_ifs],
        "plugins": p.plugins, "gdr": _gdr_summary(p), "dmabuf": p.dmabuf or None,
        "channels": p.channels or p.coll_channels or (len(p.rings) or None),
        "rings": len(p.rings) or None, "trees": p.trees,
        "transports": dict(sorted(p.transports.items())),
        "init_complete": p.init_complete, "communicators": len(p.comms),
        "nnodes": p.nnodes, "env": dict(sorted(p.env.items())), "warnings": p.warns,
        "lines": p.lines,
    }


def host_facts(procs: list[Proc]) -> dict[str, dict[str, Any]]:
    """Per-host roll-up of the processes (keyed by NCCL's host name, else the launcher's)."""
    out: dict[str, dict[str, Any]] = {}
    for p in procs:
        host = p.host or p.node
        if not host:
            continue
        h = out.setdefault(host, {"processes": 0, "ranks": [], "nccl_versions": [],
                                  "cuda_drivers": [], "networks": [], "bootstrap": [],
                                  "ib_devices": [], "gdr": [], "init_complete": 0})
        h["processes"] += 1
        r = p.display_rank()
        if r is not None and r not in h["ranks"] and len(h["ranks"]) < 1024:
            h["ranks"].append(r)
        for key, value in (("nccl_versions", p.nccl_version), ("cuda_drivers", p.cuda_driver),
                           ("networks", p.net_name()),
                           ("gdr", _gdr_summary(p))):
            if value is not None and value not in h[key]:
                h[key].append(value)
        for n, a in p.bootstrap[:1]:
            if f"{n}:{a}" not in h["bootstrap"]:
                h["bootstrap"].append(f"{n}:{a}")
        for n, port, ll in p.ib_devices:
            label = f"{n}:{port}/{ll}"
            if label not in h["ib_devices"] and len(h["ib_devices"]) < 64:
                h["ib_devices"].append(label)
        h["init_complete"] += int(p.init_complete)
    for h in out.values():
        h["ranks"].sort()
        h["init_complete"] = f"{h['init_complete']}/{h['processes']}"
    return dict(sorted(out.items()))


def build_document(state: LogState, inputs: list[InputStats]) -> dict[str, Any]:
    """The ``ncclcheck/diagnosis`` document for everything fed to ``state``."""
    procs = sorted((p for p in state.procs.values()
                    if p.lines or p.nccl_version or p.torch_version),
                   key=lambda p: (p.host or p.node or "~", p.display_rank() if p.display_rank()
                                  is not None else 1 << 30, p.pid or 0, p.key))
    findings = sorted((acc.as_dict() for acc in state.findings.values()),
                      key=lambda f: (_SEVERITY_ORDER.get(f["severity"], 3), f["id"]))
    counts = {s: sum(1 for f in findings if f["severity"] == s) for s in ("error", "warning", "info")}
    nccl_lines = sum(p.lines for p in procs)
    versions = sorted({p.nccl_version for p in procs if p.nccl_version} | set(state.bare_versions))
    networks = sorted({n for n in (p.net_name() for p in procs) if n})
    started = sum(1 for p in procs if p.comms)
    complete = sum(1 for p in procs if p.init_complete)
    hosts = host_facts(procs)
    # "healthy" needs the log to show it: every process that joined a communicator completed
    # init (issue 19). A clean log that stops before Init COMPLETE shows no failure, and no health.
    joined = [p for p in procs if p.comms] or procs
    clean = nccl_lines > 0 and not counts["error"] and not counts["warning"]
    healthy = clean and complete > 0 and all(p.init_complete for p in joined)
    if nccl_lines == 0 and not findings:
        verdict = "no NCCL output found (run the job with NCCL_DEBUG=INFO)"
    elif nccl_lines == 0 and not counts["error"] and not counts["warning"]:
        verdict = f"no NCCL log lines; {plural(counts['info'], 'note')} from the output read"
    elif clean and not healthy:
        verdict = (f"no failure seen, but {complete}/{len(joined)} "
                   f"{'process' if len(joined) == 1 else 'processes'} reached Init COMPLETE"
                   + (f" ({plural(len(hosts), 'host')}, network {', '.join(networks)})"
                      if networks else ""))
    elif healthy:
        verdict = (f"healthy: {plural(len(procs), 'process')} on {plural(len(hosts), 'host')}"
                   + (f", {complete} reached Init COMPLETE" if complete else "")
                   + (f", network {', '.join(networks)}" if networks else ""))
    else:
        verdict = (f"problems found: {plural(counts['error'], 'error')}, "
                   f"{plural(counts['warning'], 'warning')}")
    doc = envelope(
        "ncclcheck/diagnosis",
        created_at=now_utc(),
        inputs=[s.as_dict() for s in inputs],
        healthy=healthy,
        summary={"verdict": verdict, "processes": len(procs) + state.procs_dropped,
                 "hosts": len(hosts), "nccl_lines": nccl_lines, "nccl_versions": versions,
                 "networks": networks,
                 "init": {"started": started, "complete": complete},
                 "findings": counts},
        hosts=hosts,
        ranks=[rank_facts(p) for p in procs[:MAX_RANKS_LISTED]],
        findings=findings,
    )
    if len(procs) > MAX_RANKS_LISTED or state.procs_dropped:
        doc["ranks_omitted"] = max(0, len(procs) - MAX_RANKS_LISTED) + state.procs_dropped
    if state.parse_errors:
        doc["parser"] = {"errors": state.parse_errors, "first_error": state.first_parse_error}
    return escape_controls(doc)  # type: ignore[no-any-return]
