#!/usr/bin/env python3
"""Throughput and memory of ``ncclcheck diagnose`` on large synthetic logs, against ``grep -c NCCL``.

Generates a realistic NCCL_DEBUG=INFO training log (torchrun ``[rankN]:`` prefixes, 16 nodes x 8
ranks of init lines, channel/tree lines, training progress lines without NCCL, a few WARN lines
and tracebacks) of each requested size in a temporary directory, then times, in the same run:

* ``grep -c NCCL FILE``: the reference, a single C pass over the same bytes;
* ``python -m ncclcheck diagnose FILE --json`` in a child process (CPU seconds and peak RSS
  from that child's own rusage, ``os.wait4``).

It prints MB/s for both (MB = 1e6 bytes) and the ratio, plus peak RSS per size: the RSS staying
flat while the size grows is what "bounded memory" means for multi-GB logs. Usage::

    python scripts/bench-diagnose.py                 # 50 MB and 200 MB
    python scripts/bench-diagnose.py --sizes 2000    # a 2 GB log
    python scripts/bench-diagnose.py --gzip          # also a gzip copy of the largest log
    python scripts/bench-diagnose.py --sparse 200    # also a 200 MB log with < 1% NCCL lines
    python scripts/bench-diagnose.py --sizes '' --every 11 --stamp --sparse 200   # issue 24's logs
    python scripts/bench-diagnose.py --sizes '' --every 11 --against /tmp/old   # vs another checkout

``--every N``: a log of the largest ``--sizes`` (200 MB if none) where one line in N is NCCL's
(issue 24: a long job at NCCL_DEBUG=INFO from 128 ranks, lazily connected channels, new
communicators, ProcessGroupNCCL lines); ``--stamp`` also times it with a timestamp in front of
every line. The "NCCL lines/CPU-s" column is NCCL lines (the diagnosis' ``nccl_lines``) per CPU
second of the diagnose process, start-up included, prefilter included. For the 1-in-N logs
and the sparse log a second table times the same ``diagnose`` with the job-level text scan of
:mod:`ncclcheck.jobdir` switched off (torchrun summaries, ``[rankN]:`` lines and stacks; read in
the same pass as the NCCL lines for a plain file, in a pass of its own for gzip), and the parse
alone: the lines the prefilter keeps, read into memory first, fed to a fresh log state (issue 24's
"NCCL lines per second of parsing").

The sparse log is the shape of issue 13's acceptance: ``diagnose`` must run at >= 0.1x the speed
of ``grep -c NCCL`` on it (the "x grep" column: wall clock, Python's start-up included; "per
byte" subtracts each command's start-up, measured on a one-line log in the same run), with a peak
RSS under 200 MiB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HOSTS = [f"gpu-node-{i:02d}" for i in range(16)]


def init_block(rnd: random.Random) -> list[str]:
    """The INFO lines every rank prints while its communicator is created (NCCL 2.21 format)."""
    out = []
    for n, host in enumerate(HOSTS):
        for dev in range(8):
            rank, pid = n * 8 + dev, 1000 + dev
            h = f"[rank{rank}]:{host}:{pid}:{pid + 60} [{dev}] NCCL INFO"
            comm = f"0x{rnd.getrandbits(48):x}"
            out += [f"{h} cudaDriverVersion 12040",
                    f"{h} Bootstrap : Using eth0:10.1.{n}.{dev + 10}<0>",
                    f"{h} NET/IB : Using [0]mlx5_{dev}:1/IB [RO]; OOB eth0:10.1.{n}.{dev + 10}<0>",
                    f"{h} Using network IB",
                    f"{h} NCCL_SOCKET_IFNAME set by environment to eth0",
                    f"{h} ncclCommInitRank comm {comm} rank {rank} nranks 128 "
                    f"cudaDev {dev} nvmlDev {dev} busId {dev + 1}8000 commId 0x1 - Init START",
                    f"{h} Trees [0] {rank + 1}/-1/-1->{rank}->{rank - 1} [1] {rank + 1}/-1/-1->{rank}->-1"]
            out += [f"{h} Channel {c:02d}/0 : {rank}[{dev}] -> {(rank + 1) % 128}[{(dev + 1) % 8}] "
                    f"{'[send] via NET/IB/' + str(dev) + '/GDRDMA' if dev == 7 else 'via P2P/IPC/read'}"
                    for c in range(16)]
            out.append(f"{h} ncclCommInitRank comm {comm} rank {rank} nranks 128 cudaDev {dev} "
                       f"nvmlDev {dev} busId {dev + 1}8000 commId 0x1 - Init COMPLETE")
    return out


def make_log(path: Path, size: int, seed: int = 1, sparse: bool = False) -> None:
    """Write about ``size`` bytes of log to ``path``, streaming (constant memory).

    ``sparse``: the shape of a long training run, where NCCL speaks at start-up and then rarely:
    one init block per ~100 MB, and otherwise progress lines with an NCCL line among every ~300
    (well under 1% of the lines hold ``NCCL``)."""
    rnd = random.Random(seed)
    if sparse:
        make_sparse_log(path, size, rnd)
        return
    init = "\n".join(init_block(rnd)) + "\n"
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        step = 0
        while written < size:
            if step % 20000 == 0:                      # a new communicator every so often
                f.write(init)
                written += len(init)
            step += 1
            rank = rnd.randrange(128)
            r = rnd.random()
            if r < 0.55:
                line = (f"[rank{rank}]:{HOSTS[rank // 8]}:{1000 + rank % 8}:{1061 + rank % 8} "
                        f"[{rank % 8}] NCCL INFO Channel {rnd.randrange(32):02d}/0 : {rank}[{rank % 8}]"
                        f" -> {(rank + 8) % 128}[{rank % 8}] [send] via NET/IB/{rank % 8}/GDRDMA")
            elif r < 0.95:
                line = (f"[rank{rank}]:step {step} loss {rnd.random():.4f} lr 3.0e-4 "
                        f"tokens/s {rnd.randrange(10 ** 5, 10 ** 6)} grad_norm {rnd.random():.3f}")
            elif r < 0.999:
                line = f"[rank{rank}]:  {rnd.randrange(100)}%|####      | {step}/1000000 [00:01<00:10]"
            else:
                line = (f"[rank{rank}]:{HOSTS[rank // 8]}:1000:1001 [0] transport/net_ib.cc:93 NCCL "
                        f"WARN NET/IB : Got async event : client reregistration")
            f.write(line + "\n")
            written += len(line) + 1


def make_sparse_log(path: Path, size: int, rnd: random.Random) -> None:
    """See :func:`make_log` (``sparse``); written in 1 MB blocks so that generation is quick."""
    init = "\n".join(init_block(rnd)) + "\n"
    block = []
    for step in range(8000):
        rank = rnd.randrange(128)
        if step % 300 == 150:
            block.append(f"[rank{rank}]:{HOSTS[rank // 8]}:1000:1001 [0] NCCL INFO comm 0x1 rank "
                         f"{rank} nranks 128 cudaDev 0 busId 18000 - Abort COMPLETE")
        elif step % 3:
            block.append(f"[rank{rank}]:step {step} loss {rnd.random():.4f} lr 3.0e-4 tokens/s "
                         f"{rnd.randrange(10 ** 5, 10 ** 6)} grad_norm {rnd.random():.3f}")
        else:
            block.append(f"[rank{rank}]:  {rnd.randrange(100)}%|####      | {step}/1000000 "
                         "[00:01<00:10, 3.21it/s]")
    text = "\n".join(block) + "\n"
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < size:
            if written % 100_000_000 < len(text):
                f.write(init)
                written += len(init)
            f.write(text)
            written += len(text)


#: NCCL lines a long job prints after start-up (2.21-2.30 formats): lazily connected p2p channels
#: (pipeline parallelism), new communicators' summaries, PyTorch's ProcessGroupNCCL lines.
def mixed_nccl_line(rnd: random.Random, rank: int) -> str:
    host, dev = HOSTS[rank // 8], rank % 8
    h = f"[rank{rank}]:{host}:{1000 + dev}:{1061 + dev} [{dev}] NCCL INFO"
    peer = (rank + 8 * rnd.randrange(1, 16)) % 128
    comm = f"0x{rnd.getrandbits(44):x}"
    r = rnd.random()
    if r < 0.40:
        return (f"{h} Channel {rnd.randrange(32):02d}/1 : {rank}[{dev}] -> {peer}[{dev}] "
                f"[{rnd.choice(('send', 'receive'))}] via NET/IB/{dev}/GDRDMA/Shared")
    if r < 0.48:
        return f"{h} Channel {rnd.randrange(24):02d}/24 :    " + " ".join(
            f"{(rank + 8 * k) % 128:3d}" for k in range(16))
    if r < 0.52:
        return f"{h} Trees [0] {peer}/-1/-1->{rank}->{(rank + 120) % 128} [1] -1/-1/-1->{rank}->{peer}"
    if r < 0.58:
        return f"{h} Connected all rings, use ring PXN 0 GDR 1"
    if r < 0.62:
        return f"{h} Connected all trees"
    if r < 0.66:
        return f"{h} threadThresholds 8/8/64 | 1024/8/64 | 512 | 512"
    if r < 0.70:
        return (f"{h} comm {comm} rank {rank} nRanks 128 nNodes 16 localRanks 8 localRank {dev} "
                "MNNVL 0")
    if r < 0.74:
        return (f"{h} ncclCommInitRank comm {comm} rank {rank} nranks 128 cudaDev {dev} nvmlDev "
                f"{dev} busId {dev + 1}8000 commId 0x{rnd.getrandbits(60):x} - Init "
                f"{rnd.choice(('START', 'COMPLETE'))}")
    if r < 0.77:
        return (f"{h} Init timings - ncclCommInitRankConfig: rank {rank} nranks 128 total 1.{dev}2 "
                "(kernels 0.11, alloc 0.02, bootstrap 0.41, allgathers 0.03, topo 0.30, graphs 0.01,"
                " connections 0.21, rest 0.01)")
    if r < 0.80:
        return f"{h} 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    if r < 0.83:
        return f"{h} P2P Chunksize set to 131072"
    if r < 0.86:
        return f"{h} NCCL_IB_GID_INDEX set by environment to 3"
    if r < 0.89:
        return f"{h} Setting affinity for GPU {dev} to ffffffff,00000000,ffffffff"
    if r < 0.92:
        return (f"{h} comm {comm} rank {rank} nranks 128 cudaDev {dev} busId {dev + 1}8000 - "
                "Destroy COMPLETE")
    if r < 0.96:
        return (f"[rank{rank}]:[I{rnd.randrange(1000, 1300)} 12:0{dev}:11.{rnd.randrange(10**6)} "
                f"ProcessGroupNCCL.cpp:{rnd.choice((915, 1003))}] [PG ID {rnd.randrange(9)} PG GUID "
                f"{rnd.randrange(99)} Rank {rank}] ProcessGroupNCCL initialization options: size: 128,"
                " global rank: 0, TIMEOUT(ms): 600000")
    return (f"[rank{rank}]:{host}:{1000 + dev}:{1080 + dev} [{dev}] NCCL INFO [Proxy Progress] "
            f"Device {dev} CPU core {rnd.randrange(96)}")


def make_mixed_log(path: Path, size: int, every: int, seed: int = 1, stamp: bool = False) -> None:
    """A long job at NCCL_DEBUG=INFO: one line in ``every`` is NCCL's (or PyTorch's ProcessGroupNCCL),
    the rest training progress; written in blocks so that generation is quick. ``stamp``: every
    line starts with its own timestamp, as ``kubectl logs --timestamps`` or CloudWatch write it."""
    rnd = random.Random(seed)
    block = []
    for step in range(20000):
        rank = rnd.randrange(128)
        if step % every == 0:
            block.append(mixed_nccl_line(rnd, rank))
        elif step % 3:
            block.append(f"[rank{rank}]:step {step} loss {rnd.random():.4f} lr 3.0e-4 tokens/s "
                         f"{rnd.randrange(10 ** 5, 10 ** 6)} grad_norm {rnd.random():.3f}")
        else:
            block.append(f"[rank{rank}]:  {rnd.randrange(100)}%|####      | {step}/1000000 "
                         "[00:01<00:10, 3.21it/s]")
    init = "\n".join(f"2026-11-26T00:00:00.{n:06d}Z {line}" if stamp else line
                     for n, line in enumerate(init_block(rnd))) + "\n"
    text = "\n".join(block) + "\n"
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(init)
        written += len(init)
        n = 0
        while written < size:
            if stamp:             # a different time on every line, as a collector writes it
                text = "\n".join(f"2026-11-26T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}."
                                 f"{k:06d}Z {line}" for k, line in enumerate(block)) + "\n"
                n += 1
            f.write(text)
            written += len(text)


def timed(argv: list[str], cwd: Optional[str] = None) -> tuple[float, float, int, bytes]:
    """Wall seconds, CPU seconds, peak RSS (KiB) and stdout of one run of ``argv`` (in ``cwd``):
    the child's own rusage (``os.wait4``), not the sum over every child so far."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, cwd=cwd)
        out = proc.stdout.read()                                 # type: ignore[union-attr]
        proc.stdout.close()                                      # type: ignore[union-attr]
        _, status, use = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            err.seek(0)
            raise SystemExit(f"{argv[0]} failed: {err.read().decode(errors='replace')[-500:]}")
    return elapsed, use.ru_utime + use.ru_stime, use.ru_maxrss, out


def runs(argv: list[str], repeat: int, cwd: Optional[str] = None) -> tuple[float, float, bytes]:
    """Run ``argv`` ``repeat`` times: the fastest wall seconds, the least CPU seconds and the
    first run's stdout. The machine may be shared: the minimum is the least disturbed run."""
    return alternate([(argv, cwd)], repeat)[0][:3]          # type: ignore[return-value]


def alternate(variants: list[tuple[list[str], Optional[str]]], repeat: int
              ) -> list[tuple[float, float, bytes, int]]:
    """Each ``(argv, cwd)`` run ``repeat`` times, in turn (a, b, a, b, ...: a load that comes
    and goes falls on both): per variant the fastest wall seconds, the least CPU seconds, the
    first run's stdout and the largest peak RSS (KiB)."""
    best = [[float("inf"), float("inf"), None, 0] for _ in variants]
    for _ in range(max(1, repeat)):
        for (argv, cwd), b in zip(variants, best):
            wall, cpu, rss, out = timed(argv, cwd)
            b[0], b[1], b[3] = min(b[0], wall), min(b[1], cpu), max(b[3], rss)
            b[2] = out if b[2] is None else b[2]
    return [(w, c, o or b"", r) for w, c, o, r in best]      # type: ignore[misc]


def ref_argv(path: Path) -> list[str]:
    """``grep -c NCCL`` over ``path`` (through ``zcat`` for gzip)."""
    grep = shutil.which("grep")
    if grep is None:
        raise SystemExit("grep not found")
    if path.suffix == ".gz":
        return ["sh", "-c", f"zcat -- '{path}' | {grep} -c NCCL"]   # path is ours (tempdir)
    return [grep, "-c", "NCCL", str(path)]


def diag_argv(path: Path) -> list[str]:
    return [sys.executable, "-m", "ncclcheck", "diagnose", str(path), "--json"]


def nccl_part_argv(path: Path) -> list[str]:
    """``diagnose``'s reading of ``path`` with the job-level text scan switched off
    (:func:`ncclcheck.jobdir.inputs.scan_text` and its inline form
    :class:`~ncclcheck.jobdir.inputs.InlineScan`, fed by diagnose's own pass: torchrun summaries,
    ``[rankN]:`` lines and stacks): the NCCL log part's own rate."""
    code = ("import sys; import ncclcheck.diagnose as d; d.scan_text = lambda job, path: None; "
            "import ncclcheck.jobdir.inputs as i; hasattr(i, 'InlineScan') and setattr("
            "i.InlineScan, 'of', classmethod(lambda cls, job, path, stats: None)); "
            "d.diagnose_files([sys.argv[1]])")
    return [sys.executable, "-c", code, str(path)]


PARSE_CODE = """
import sys, time
from ncclcheck.diagnose import KEYS, NEXT_KEYS
from ncclcheck.logparse.prefilter import iter_blocks2
from ncclcheck.logparse.reader import InputStats
from ncclcheck.logparse.state import LogState
with open(sys.argv[1], "rb") as f:
    blocks = list(iter_blocks2(f, InputStats(sys.argv[1]), KEYS, NEXT_KEYS, (), {}))
best = float("inf")
for _ in range(int(sys.argv[2])):
    state = LogState()
    t = time.process_time()
    for numbers, lines, which in blocks:
        state.feed_block(lines, numbers, "log")
    state.flush()
    best = min(best, time.process_time() - t)
print(sum(len(b[1]) for b in blocks), best)
"""


def parse_rate(path: Path, repeat: int, cwd: Optional[str] = None) -> tuple[int, float]:
    """The parse alone, in a child (in ``cwd``: another tree): the lines the prefilter keeps,
    read into memory first (not timed), then fed to a fresh ``LogState`` (``feed_block``, then
    ``flush``), the least CPU seconds of ``repeat`` feeds: what "NCCL lines per second of
    parsing" measures, apart from reading, prefiltering, the job scan and start-up."""
    out = subprocess.run([sys.executable, "-c", PARSE_CODE, str(path), str(max(1, repeat))],
                         capture_output=True, text=True, cwd=cwd, check=True).stdout.split()
    return int(out[0]), float(out[1])


def start_up(tmp: Path, repeat: int) -> tuple[float, float]:
    """Wall seconds of grep and of diagnose on a one-line log: the fixed cost of starting each,
    subtracted for the per-byte rates."""
    tiny = tmp / "tiny.log"
    tiny.write_text("h:1:2 [0] NCCL INFO x\n")
    return runs(ref_argv(tiny), repeat)[0], runs(diag_argv(tiny), repeat)[0]


def bench_one(path: Path, label: str, repeat: int = 1, nccl_part: bool = False,
              against: Optional[str] = None) -> list[dict]:
    """The row of ``path`` (and, with ``against``, the row of that tree's ``diagnose``, run in
    turn with this one's: a, b, a, b, ...)."""
    size = path.stat().st_size
    t_grep, _, out = runs(ref_argv(path), repeat)
    trees: list[Optional[str]] = [None] + ([against] if against else [])
    argvs = [(diag_argv(path), t) for t in trees]
    if nccl_part:
        argvs += [(nccl_part_argv(path), t) for t in trees]
    got = alternate(argvs, repeat)
    rows = []
    for n, tree in enumerate(trees):
        t_diag, cpu, doc_text, rss = got[n]
        part_cpu = got[len(trees) + n][1] if nccl_part else float("nan")
        parsed, parse_cpu = parse_rate(path, repeat, tree) if nccl_part else (0, float("nan"))
        doc = json.loads(doc_text)
        lines = sum(i["lines"] for i in doc["inputs"])
        nccl = doc["summary"].get("nccl_lines", 0)
        doc.pop("created_at", None)
        rows.append({"label": label + (f" [{tree}]" if tree else ""), "bytes": size,
                     "lines": lines, "nccl_lines": nccl, "grep_s": t_grep, "diag_s": t_diag,
                     "grep_mb_s": size / 1e6 / t_grep, "diag_mb_s": size / 1e6 / t_diag,
                     "cpu_s": cpu, "cpu_mb_s": size / 1e6 / cpu if cpu > 0 else float("nan"),
                     "cpu_lines_s": nccl / cpu if cpu > 0 else float("nan"),
                     "part_cpu_s": part_cpu, "rss_mib": rss / 1024,
                     "parsed": parsed, "parse_cpu_s": parse_cpu,
                     "findings": [f["id"] for f in doc["findings"]],
                     "doc": json.dumps(doc, sort_keys=True), "grep_count": int(out.strip() or 0)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="50,200", help="log sizes in MB, comma-separated")
    ap.add_argument("--gzip", action="store_true", help="also time a gzip copy of the largest log")
    ap.add_argument("--sparse", type=int, default=0, metavar="MB",
                    help="also time a log of this size with under 1%% NCCL lines")
    ap.add_argument("--every", type=int, default=0, metavar="N",
                    help="also time a log where one line in N is NCCL's (issue 24: 11)")
    ap.add_argument("--stamp", action="store_true",
                    help="with --every: also the same log with a timestamp on every line")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command; the fastest counts")
    ap.add_argument("--against", metavar="TREE",
                    help="also time the diagnose of another checkout (its root folder: python -m "
                         "ncclcheck run there), in turn with this one's; prints CPU ratios")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-diagnose-"))
    results = []
    try:
        grep0, diag0 = start_up(tmp, args.repeat)
        for mb in sizes:
            path = tmp / f"synthetic-{mb}MB.log"
            t0 = time.perf_counter()
            make_log(path, mb * 1_000_000)
            print(f"generated {path} ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
            results += bench_one(path, f"{mb} MB plain", args.repeat, against=args.against)
        if args.gzip:
            src = tmp / f"synthetic-{sizes[-1]}MB.log"
            gz = tmp / f"synthetic-{sizes[-1]}MB.log.gz"
            with open(src, "rb") as fi, gzip.open(gz, "wb", compresslevel=1) as fo:
                shutil.copyfileobj(fi, fo, 1 << 20)
            r = bench_one(gz, f"{sizes[-1]} MB gzip ({gz.stat().st_size / 1e6:.0f} MB on disk)",
                          args.repeat)[0]
            r["bytes"] = src.stat().st_size                      # rate in uncompressed MB
            r["grep_mb_s"] = r["bytes"] / 1e6 / r["grep_s"]
            r["diag_mb_s"] = r["bytes"] / 1e6 / r["diag_s"]
            r["cpu_mb_s"] = r["cpu_mb_s"] * r["bytes"] / gz.stat().st_size
            results.append(r)
        for stamp in ((False, True) if args.stamp else (False,)) if args.every else ():
            mb = sizes[-1] if sizes else 200
            path = tmp / f"every{args.every}-{mb}MB{'-stamped' if stamp else ''}.log"
            make_mixed_log(path, mb * 1_000_000, args.every, stamp=stamp)
            results += bench_one(path, f"{mb} MB, 1 in {args.every} NCCL" + (", stamped" if stamp else ""),
                                 args.repeat, nccl_part=True, against=args.against)
            if not args.keep:
                path.unlink()
        if args.sparse:
            path = tmp / f"sparse-{args.sparse}MB.log"
            make_log(path, args.sparse * 1_000_000, sparse=True)
            rows = bench_one(path, f"{args.sparse} MB sparse", args.repeat, nccl_part=True,
                             against=args.against)
            share = rows[0]["grep_count"] / max(1, rows[0]["lines"])
            for r in rows:
                r["label"] = r["label"].replace("sparse", f"{share:.2%} NCCL lines")
            results += rows
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'input':<44} {'lines':>9} {'grep -c NCCL':>14} {'diagnose':>12} {'x grep':>7} "
          f"{'per byte':>8} {'diagnose/CPU-s':>15} {'NCCL lines/CPU-s':>17} {'peak RSS':>9}")
    for r in results:
        per_byte = (max(r["grep_s"] - grep0, 1e-6) / max(r["diag_s"] - diag0, 1e-6))
        print(f"{r['label']:<44} {r['lines']:>9} {r['grep_mb_s']:>9.0f} MB/s {r['diag_mb_s']:>7.1f} MB/s "
              f"{r['diag_mb_s'] / r['grep_mb_s']:>6.2f}x {per_byte:>7.2f}x {r['cpu_mb_s']:>10.1f} MB/s "
              f"{r['cpu_lines_s']:>17,.0f} {r['rss_mib']:>5.0f} MiB")
    parts = [r for r in results if r["part_cpu_s"] == r["part_cpu_s"]]      # not NaN
    if parts:
        print(f"\n{'without the job scan':<44} {'CPU-s':>7} {'MB/CPU-s':>9} {'NCCL lines/CPU-s':>17}"
              f" {'parse alone: lines':>19} {'CPU-s':>6} {'lines/CPU-s':>12}")
    for r in parts:
        print(f"{r['label']:<44} {r['part_cpu_s']:>7.2f} {r['bytes'] / 1e6 / r['part_cpu_s']:>9.1f} "
              f"{r['nccl_lines'] / r['part_cpu_s']:>17,.0f} {r['parsed']:>19,} {r['parse_cpu_s']:>6.2f}"
              f" {r['parsed'] / r['parse_cpu_s']:>12,.0f}")
    if args.against:
        print(f"\n{'this tree vs ' + args.against:<44} {'CPU-s':>7} {'faster':>7} {'same document':>14}")
        by_label = {r["label"]: r for r in results}
        for old_row in [r for r in results if r["label"].endswith(f" [{args.against}]")]:
            new_row = by_label[old_row["label"][:-len(args.against) - 3]]
            print(f"{new_row['label']:<44} {new_row['cpu_s']:>7.2f} "
                  f"{old_row['cpu_s'] / new_row['cpu_s']:>6.2f}x "
                  f"{'yes' if new_row['doc'] == old_row['doc'] else 'NO':>14}")
    print(f"(MB = 1e6 bytes of log text; fastest of {args.repeat} runs. x grep = diagnose's wall-clock "
          f"rate / grep's, start-up included (>= 0.1 wanted on the sparse log); per byte = the same "
          f"with each command's start-up on a one-line log subtracted (grep {grep0 * 1e3:.0f} ms, "
          f"diagnose {diag0 * 1e3:.0f} ms, measured in this run); diagnose/CPU-s = MB per CPU second "
          f"of the diagnose process (the least of the runs), less sensitive to other load; without the "
          f"job scan = the same diagnose with jobdir's scan_text switched off, start-up included; parse "
          f"alone = the lines the prefilter keeps fed to the log state from memory (issue 24's "
          f"'NCCL lines per second of parsing'), least CPU of the runs; "
          f"findings on the synthetic log: "
          f"{sorted(set(results[-1]['findings']))})")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
