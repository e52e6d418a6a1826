"""Inputs of ``diagnose``: a job's folder walked, each file taken by what it holds.

A folder is walked (sorted, symlinks not followed, hidden entries skipped) and each regular
file becomes an input. A Flight Recorder dump is read whole through :mod:`.fr` (gzip-free: torch
writes them plain); any other file is text, read by ``diagnose``'s NCCL log reader and once more
here for the job's own lines (:data:`KEYS`, found at C speed by the prefilter).
"""

from __future__ import annotations

import os
from typing import Optional

from ncclcheck.errors import BadInput
from ncclcheck.jobdir.job import JobReader, sniff
from ncclcheck.jobdir.ras import KEYS as RAS_KEYS
from ncclcheck.jobdir.unpickle import MAX_PICKLE_BYTES, UnsafePickle
from ncclcheck.logparse.prefilter import iter_matching
from ncclcheck.logparse.reader import InputStats, open_source, shown

MAX_FILES = 200_000
#: the lines the job-level scanner reads (torchrun's summary, srun, torch's prefixes, gloo and
#: watchdog timeouts, stacks)
KEYS = (b"time      :", b"host      :", b"rank      :", b"exitcode  :", b"traceback :",
        b"Root Cause", b"Failures:", b"[rank", b"srun: error", b"Timed out waiting",
        b"Watchdog caught", b"most recent call first", b"Connection closed", b"=====",
        b"Fatal Python error") + RAS_KEYS
FOLLOW = {b"most recent call first": 12}


def expand(paths: list[str]) -> list[str]:
    """Files for ``paths``: a folder becomes its files (walked in order), others stay.

    Raises:
        BadInput: a folder with no files, or more than :data:`MAX_FILES`.
    """
    out: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            out.append(path)
            continue
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(os.path.join(root, f) for f in sorted(files)
                         if not f.startswith(".") and os.path.isfile(os.path.join(root, f)))
            if len(found) > MAX_FILES:
                raise BadInput(f"{shown(path)}: more than {MAX_FILES} files")
        if not found:
            raise BadInput(f"{shown(path)}: an empty folder, nothing to diagnose")
        out.extend(found)
    return out


def read_dump(job: JobReader, path: str) -> Optional[InputStats]:
    """Read ``path`` into ``job`` if it is a Flight Recorder dump; None when it is text.

    Raises:
        BadInput: a pickle that names a callable (refused, nothing in it ran).
    """
    if path == "-":
        return None
    try:
        with open(path, "rb") as f:
            if sniff(f.read(4096)) != "fr":
                return None
            f.seek(0)
            # read(n) allocates n bytes first: a file within the limit is read whole
            size = os.fstat(f.fileno()).st_size
            data = f.read() if size <= MAX_PICKLE_BYTES else f.read(MAX_PICKLE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"{shown(path)}: cannot read ({exc.strerror or exc})") from None
    try:
        job.add_dump(shown(path), data, path)
    except UnsafePickle as exc:
        raise BadInput(f"{shown(path)}: refused: {exc}") from None
    return InputStats(name=shown(path), bytes=len(data))


def scan_text(job: JobReader, path: str) -> None:
    """Read the job-level lines of a text input (not ``-``: it was read once already)."""
    if path == "-":
        return
    with open_source(path) as src:
        scanner = job.scanner(src.stats.name)
        for lineno, raw in iter_matching(src.stream, src.stats, KEYS, FOLLOW):
            scanner.feed(raw.decode("utf-8", "replace"), lineno)
        scanner.close()
