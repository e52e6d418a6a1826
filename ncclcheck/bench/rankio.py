"""Where a rank's library output goes: into its rank log, not onto the user's terminal.

torch and NCCL write warnings the user did not ask for and cannot act on: Python warnings
(``UserWarning: Failed to initialize NumPy`` when torch is imported without numpy) and lines
from the C++ side on file descriptor 2, such as::

    [W1125 14:02:11.123456 socket.cpp:752] [c10d] The hostname of the client socket cannot be
    retrieved. err=-3

A rank the agent starts has its stderr in ``<log dir>/rank.N.stderr`` already. When
``ncclcheck bench`` is itself the rank (under torchrun, srun, mpirun), :func:`library_output_to`
does the same for the time the rank runs: descriptor 2 and Python warnings go to the rank log,
while ``sys.stderr`` -- ncclcheck's own messages and progress bar -- still reaches the terminal.
The log is kept only when the run fails (:mod:`ncclcheck.bench.launch` says where).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Iterator


@contextlib.contextmanager
def library_output_to(path: str) -> Iterator[None]:
    """Send descriptor 2 and Python warnings to ``path`` (appended) while inside."""
    sys.stderr.flush()
    log = open(path, "a", encoding="utf-8", errors="replace", buffering=1)
    saved = os.dup(2)
    user = os.fdopen(os.dup(saved), "w", buffering=1, errors="backslashreplace",
                     encoding=getattr(sys.stderr, "encoding", None) or "utf-8")
    old_stderr = sys.stderr
    os.dup2(log.fileno(), 2)
    sys.stderr = user

    def to_log(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
               line: str | None = None) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    try:
        with warnings.catch_warnings():
            warnings.showwarning = to_log
            yield
    finally:
        try:
            user.flush()
        finally:
            sys.stderr = old_stderr
            os.dup2(saved, 2)
            os.close(saved)
            user.close()
            log.close()
