#!/usr/bin/env python3
"""Feed thousands of mutated real documents to every reader; count exit codes and internal errors.

Each reader of tests/fuzz_docs.py gets ``--cases`` seeded cases (a value's type swapped, keys
dropped, NaN and infinity, deep nesting, byte noise, absurd numbers, control characters), run
in this process through the CLI's entry point. A case passes when it exits 0, 2 or 3 with no
``internal error`` and no traceback, within 10 s. Failing inputs are kept in ``--keep DIR``.

    python3 scripts/fuzz-readers.py [--cases 1500] [--seed 16] [--only report] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fuzz_docs import case, readers  # noqa: E402

LIMIT_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--only", default="")
    parser.add_argument("--keep", metavar="DIR")
    args = parser.parse_args()
    keep = Path(args.keep) if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    bad_total = total = 0
    print(f"{'reader':<28} {'cases':>6} {'exit 0/2/3':>16} {'internal':>9} {'>10 s':>6} "
          f"{'max s':>6}")
    with tempfile.TemporaryDirectory(prefix="ncclcheck-fuzz-") as tmp:
        folder = Path(tmp)
        for reader in readers():
            if args.only and args.only not in reader.name:
                continue
            rng = random.Random(f"{args.seed}:{reader.name}")
            seeds = reader.seeds(folder)
            codes: collections.Counter = collections.Counter()
            internal = slow = 0
            longest = 0.0
            for n in range(args.cases):
                text, out = case(reader, seeds, rng, folder)
                codes[out.code] += 1
                longest = max(longest, out.seconds)
                slow += out.seconds > LIMIT_S
                if out.internal or out.seconds > LIMIT_S:
                    internal += out.internal
                    if keep:
                        stem = f"{reader.name.split()[0]}-{n}"
                        (keep / f"{stem}.input").write_text(text, errors="surrogatepass")
                        (keep / f"{stem}.stderr").write_text(out.stderr)
            bad_total += internal + slow
            total += args.cases
            spread = "/".join(str(codes[c]) for c in (0, 2, 3))
            print(f"{reader.name:<28} {args.cases:>6} {spread:>16} {internal:>9} {slow:>6} "
                  f"{longest:>6.2f}", flush=True)
    print(f"{total} cases, {bad_total} internal errors or runs over {LIMIT_S:g} s")
    return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main())
