"""One rank of ``bench --launcher slurm``: ``srun`` starts this module on every node.

The options come from ``NCCLCHECK_BENCH_OPTIONS`` (the JSON of
:class:`~ncclcheck.bench.options.BenchOptions`, set by
:func:`ncclcheck.remote.slurm.bench_via_srun`); the rank, world size and rendezvous come from Slurm's variables, as for
``srun ncclcheck bench``. Rank 0 prints the bench document (indented JSON: srun splits long
lines); a failing rank
prints ``ncclcheck: error: ...`` on stderr and exits non-zero, so ``srun --kill-on-bad-exit``
stops the others.
"""

from __future__ import annotations

import json
import os
import sys

from ncclcheck.errors import NcclcheckError


def main() -> int:
    """Run this task's rank; 0 on success."""
    from ncclcheck.bench.launch import run_in_launcher
    from ncclcheck.bench.options import BenchOptions, Progress

    try:
        try:
            opts = BenchOptions(**json.loads(os.environ["NCCLCHECK_BENCH_OPTIONS"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise NcclcheckError(f"bad NCCLCHECK_BENCH_OPTIONS ({exc})") from None
        opts.launcher = None
        doc = run_in_launcher(opts, "slurm", Progress())
    except NcclcheckError as exc:
        print(f"ncclcheck: error: {exc}", file=sys.stderr, flush=True)
        return int(exc.code)
    if doc is not None:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")  # srun --label splits long lines
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
