"""``ncclcheck bench`` at the command floor: the runs (:mod:`ncclcheck.bench`) meet the drawing
(:mod:`ncclcheck.render`) here, so that the measuring package never knows how it is drawn.

The CLI fills a :class:`~ncclcheck.bench.command.BenchRequest` and calls :func:`run_command`,
which picks one of four things: ``--pairwise`` (the fleet hunt), ``--import`` (read nccl-tests
output), ``--compare`` (one run per env file) or one run; then prints the nccl-tests table (or
``--json``), writes ``-o`` atomically, and fails the command (exit 1) when a run failed or
``#wrong`` is not zero -- after the results are written.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ncclcheck.bench.command import BenchRequest, bench_options, launcher_note, write_outputs
from ncclcheck.errors import BadInput, NcclcheckError


def progress_for(out: Any, as_json: bool) -> Any:
    """A rich progress bar when stdout is a terminal and a table is wanted, else a no-op."""
    from ncclcheck.bench.options import Progress

    if as_json or not sys.stdout.isatty() or not getattr(out, "is_terminal", False):
        return Progress()
    from ncclcheck.render.bench import RichProgress

    return RichProgress(out)


def streaming_table(opts: Any, inner: Any, out: Any) -> Any:
    """A :class:`~ncclcheck.render.bench_stream.StreamTable` for this run, writing to stdout
    (flushed at each row; through rich's console, above the bar, on a terminal)."""
    from ncclcheck.render.bench_stream import StreamTable

    head = {"op": opts.op, "dtype": opts.dtype, "warmup": opts.warmup, "iters": opts.iters,
            "check": int(bool(opts.check)), "sweep": opts.sweep}
    if type(inner).__name__ == "RichProgress":
        def write(text: str) -> None:
            out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
    else:
        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()
    return StreamTable(head, write, inner)


def run_command(req: BenchRequest, out: Any, err: Any) -> None:
    """Do what ``ncclcheck bench`` was asked; raise for a failed run or a non-zero #wrong."""
    from ncclcheck.render.bench import render_table

    if req.pairwise:  # the fleet hunt: rounds of pairs (ncclcheck.bench.pairlaunch)
        run_pairwise(req, err)
        return
    if req.rounds is not None:
        raise BadInput("--rounds needs --pairwise")
    if "budget" in req.given:
        raise BadInput("--budget needs --pairwise")
    if req.compare_files and not req.compare:
        raise BadInput(f"unexpected argument {req.compare_files[0]!r} (env files to compare "
                       "need --compare)")
    if req.import_path:
        if req.compare:
            raise BadInput("--import and --compare cannot be combined")
        from ncclcheck.bench.importer import import_file

        doc = import_file(req.import_path, req.op)
        if req.link_rate:
            doc["link_rate_gbps"] = req.link_rate
        attach_expected(doc, req)
        write_outputs(doc, req, render_table(doc), err)
        return
    if req.compare:
        run_compare(req, out, err)
        return
    from ncclcheck.bench import launch

    opts = bench_options(req)
    progress = progress_for(out, req.as_json)
    stream = None
    if not req.as_json and req.output != "-":  # the table: each row as its size finishes
        stream = streaming_table(opts, progress, out)
        progress = stream
    note = launcher_note(dict(os.environ))
    if note:
        err.print(f"bench: {note}", highlight=False, soft_wrap=True)
    doc = launch.run(opts, progress)
    if doc is None:  # a non-zero rank inside a launcher: rank 0 reports
        return
    if note and isinstance(doc.get("launch"), dict):
        doc["launch"]["note"] = note
    attach_expected(doc, req)
    text = stream.rest(doc) if stream is not None and stream.started else render_table(doc)
    write_outputs(doc, req, text, err)
    if doc.get("wrong_total"):
        raise NcclcheckError(f"{doc['wrong_total']} wrong elements (#wrong): the collective "
                             "returned incorrect data")


def load_facts(paths: list[str]) -> list[dict[str, Any]]:
    """The facts documents of ``--probe FILE`` (a facts or cluster document each)."""
    from ncclcheck import schema

    facts: list[dict[str, Any]] = []
    for path in paths:
        doc = schema.load(path, expect=("ncclcheck/facts", "ncclcheck/cluster"))
        nodes = doc.get("nodes") if doc.get("schema") == "ncclcheck/cluster" else [doc]
        facts += [n for n in nodes or [] if isinstance(n, dict)]
    return facts


def attach_expected(doc: dict[str, Any], req: BenchRequest) -> None:
    """The run's ``expected`` object: its class, range, ratio, verdict and limits
    (:mod:`ncclcheck.expected`), from its records, ``--probe`` facts and ``--link-rate``."""
    from ncclcheck.expected.verdict import expect

    doc["expected"] = expect(doc, load_facts(req.probe), req.link_rate)


def run_compare(req: BenchRequest, out: Any, err: Any) -> None:
    """One run per env file; a side-by-side table; the best marked."""
    from ncclcheck.bench import envfile, launch
    from ncclcheck.bench.document import compare_document
    from ncclcheck.render.bench import render_compare

    if len(req.compare_files) < 1:
        raise BadInput("--compare needs at least one env file argument")
    candidates = [(path, envfile.load_env_file(path)) for path in req.compare_files]
    # every run's options are checked before the first run starts
    options = [bench_options(req, env) for _path, env in candidates]
    runs: list[dict[str, Any]] = []
    failed: list[str] = []
    labels = envfile.content_labels([env for _, env in candidates],
                                    [path for path, _ in candidates])
    session = compare_session(req, options)
    try:
        for (path, env), opts, label in zip(candidates, options, labels):
            err.print(f"bench: running {label} ({path}, {len(env)} settings)",
                      highlight=False, markup=False)
            try:
                doc = launch.run(opts, progress_for(out, req.as_json), session=session)
            except NcclcheckError as exc:
                if isinstance(exc, BadInput):
                    raise
                failed.append(f"{label}: {exc}")
                runs.append({"label": label, "env_file": path, "env": env, "error": str(exc),
                             "bench": {"rows": [], "candidate_env": env}})
                continue
            if doc is None:
                return
            attach_expected(doc, req)
            runs.append({"label": label, "env_file": path, "env": env, "bench": doc})
    finally:
        if session is not None:
            session.close()
    doc = compare_document(runs)
    write_outputs(doc, req, render_compare(doc), err, to_file=len(failed) < len(runs))
    wrong = sum(r["bench"].get("wrong_total") or 0 for r in runs)
    if failed:
        raise NcclcheckError("; ".join(failed))
    if wrong:
        raise NcclcheckError(f"{wrong} wrong elements (#wrong) across the compared runs")


def compare_session(req: BenchRequest, options: list[Any]) -> Any:
    """Over ssh (``--hostfile``), one agent per node for all the compared runs, as tune's
    (:mod:`ncclcheck.bench.session`), alive at most as long as the runs' deadlines together;
    else None (each run is launched alone)."""
    if not req.hostfile or req.launcher == "slurm":
        return None
    from ncclcheck.bench.options import run_deadline
    from ncclcheck.bench.session import Session
    from ncclcheck.remote.ssh import SSH

    ssh = SSH(ssh_config=req.ssh_config, connect_timeout=req.connect_timeout,
              remote_python=req.remote_python)
    return Session(req.hostfile, req.nodes, ssh, sum(run_deadline(o) for o in options))


def run_pairwise(req: BenchRequest, err: Any) -> None:
    """``--pairwise``: run the hunt, then print and write the document (as bench's outputs)."""
    from ncclcheck.bench.pairlaunch import hunt
    from ncclcheck.render.pairwise import render_pairwise

    doc = hunt(req, err)
    if doc is None:  # a non-zero rank inside a launcher
        return
    from ncclcheck.expected.pairs import judge_pairs

    doc["expected"] = judge_pairs(doc, req.link_rate)
    write_outputs(doc, req, render_pairwise(doc), err)
