"""``ncclcheck bench``: turn the command line into runs, and the results into output.

The CLI fills a :class:`BenchRequest` and calls :func:`run_command`, which picks one of three
things: ``--import`` (read nccl-tests output), ``--compare`` (one run per env file) or one run;
then prints the nccl-tests table (or ``--json``), writes ``-o`` atomically, and fails the command
(exit 1) when a run failed or ``#wrong`` is not zero -- after the results are written.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import click

from ncclcheck.errors import BadInput, NcclcheckError


@dataclasses.dataclass
class BenchRequest:
    """The options of ``ncclcheck bench`` as the user gave them."""

    op: str | None = None
    min_bytes: str = "8"
    max_bytes: str = "128M"
    step_factor: int = 2
    warmup: int = 5
    iters: int = 20
    dtype: str = "float"
    check: int = 1
    average: str = "mean"
    procs: int | None = None
    backend: str = "auto"
    nodes: int | None = None
    hostfile: str | None = None
    ssh_config: str | None = None
    remote_python: str | None = None
    connect_timeout: float = 10.0
    master_addr: str | None = None
    master_port: int | None = None
    timeout: float = 300.0
    env_assignments: list[str] = dataclasses.field(default_factory=list)
    env_files: list[str] = dataclasses.field(default_factory=list)
    compare: bool = False
    compare_files: list[str] = dataclasses.field(default_factory=list)
    import_path: str | None = None
    nccl_log_dir: str | None = None
    link_rate: float | None = None
    as_json: bool = False
    output: str | None = None
    launcher: str | None = None
    pairwise: bool = False
    rounds: int | None = None


def bench_options(req: BenchRequest, extra_env: dict[str, str] | None = None) -> Any:
    """Validated :class:`~ncclcheck.bench.launch.BenchOptions` for one run."""
    from ncclcheck.bench import envfile, sweep
    from ncclcheck.bench.launch import BenchOptions

    dtype = sweep.get_dtype(req.dtype)
    min_bytes, max_bytes = sweep.parse_size(req.min_bytes), sweep.parse_size(req.max_bytes)
    sizes = sweep.sizes(min_bytes, max_bytes, req.step_factor)
    env = envfile.candidate_env(req.env_assignments, req.env_files)
    env.update(extra_env or {})
    if req.remote_python:
        from ncclcheck.remote import validate_remote_python

        validate_remote_python(req.remote_python)
    if req.master_addr:
        from ncclcheck.hostfile import validate_host

        try:
            validate_host(req.master_addr)
        except ValueError as exc:
            raise BadInput(f"--master-addr: {exc}") from None
    return BenchOptions(
        op=req.op or "all_reduce", dtype=dtype.name, sizes=sizes, warmup=req.warmup,
        iters=req.iters, check=req.check, backend=req.backend, procs=req.procs,
        timeout=req.timeout, candidate_env=env, nodes=req.nodes, hostfile=req.hostfile,
        ssh_config=req.ssh_config, remote_python=req.remote_python,
        connect_timeout=req.connect_timeout, master_addr=req.master_addr,
        master_port=req.master_port, launcher=req.launcher,
        nccl_log_dir=req.nccl_log_dir, link_rate_gbps=req.link_rate,
        average=sweep.get_average(req.average),
        sweep={"min_bytes": min_bytes, "max_bytes": max_bytes, "step_factor": req.step_factor})


def progress_for(out: Any, as_json: bool) -> Any:
    """A rich progress bar when stdout is a terminal and a table is wanted, else a no-op."""
    from ncclcheck.bench.launch import Progress

    if as_json or not sys.stdout.isatty() or not getattr(out, "is_terminal", False):
        return Progress()
    from ncclcheck.render.bench import RichProgress

    return RichProgress(out)


def launcher_note(environ: dict[str, str]) -> str | None:
    """What to say when a launcher's variables are set but it gave this process no rank: e.g.
    ``accelerate launch --cpu`` that started one process (ncclcheck then starts its own ranks).

    >>> launcher_note({"ACCELERATE_USE_CPU": "True"})
    "accelerate's variables are set (ACCELERATE_USE_CPU) but not RANK and WORLD_SIZE: it started this process alone, and ncclcheck started the ranks"
    >>> launcher_note({"ACCELERATE_USE_CPU": "True", "RANK": "0", "WORLD_SIZE": "2",
    ...                "MASTER_ADDR": "127.0.0.1"}) is None
    True
    """
    from ncclcheck.bench.environ import detect_launcher

    names = sorted(k for k in environ if k.startswith("ACCELERATE_"))
    if not names or detect_launcher(environ):
        return None
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"accelerate's variables are set ({shown}) but not RANK and WORLD_SIZE: it started "
            "this process alone, and ncclcheck started the ranks")


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


def write_outputs(doc: dict[str, Any], req: BenchRequest, text: str, err: Any,
                  to_file: bool = True) -> None:
    """``-o`` (atomic JSON), then ``--json`` or the table on stdout.

    ``to_file`` False (every run failed) keeps the user's earlier ``-o`` file, and says so.
    """
    from ncclcheck.schema import dumps, write_atomic

    if req.output and req.output != "-" and not to_file:
        err.print(f"every run failed: {req.output} is not written (an earlier file stays as "
                  "it was)", highlight=False, markup=False, soft_wrap=True)
    elif req.output and req.output != "-":
        write_atomic(req.output, dumps(doc))
    if req.as_json or req.output == "-":
        click.echo(dumps(doc), nl=False)
    else:
        click.echo(text, nl=False)
        if req.output and req.output != "-" and to_file:
            err.print(f"bench document written to {req.output}", highlight=False)


def run_command(req: BenchRequest, out: Any, err: Any) -> None:
    """Do what ``ncclcheck bench`` was asked; raise for a failed run or a non-zero #wrong."""
    from ncclcheck.render.bench import render_table

    if req.pairwise:  # the fleet hunt: rounds of pairs (ncclcheck.bench.pairlaunch)
        from ncclcheck.bench.pairlaunch import run_pairwise

        run_pairwise(req, out, err)
        return
    if req.rounds is not None:
        raise BadInput("--rounds needs --pairwise")
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
    text = stream.rest(doc) if stream is not None and stream.started else render_table(doc)
    write_outputs(doc, req, text, err)
    if doc.get("wrong_total"):
        raise NcclcheckError(f"{doc['wrong_total']} wrong elements (#wrong): the collective "
                             "returned incorrect data")


def run_compare(req: BenchRequest, out: Any, err: Any) -> None:
    """One run per env file; a side-by-side table; the best marked."""
    from ncclcheck.bench import envfile, launch
    from ncclcheck.bench.document import compare_document
    from ncclcheck.render.bench import render_compare

    if len(req.compare_files) < 1:
        raise BadInput("--compare needs at least one env file argument")
    candidates = [(path, envfile.load_env_file(path)) for path in req.compare_files]
    runs: list[dict[str, Any]] = []
    failed: list[str] = []
    for path, env in candidates:
        label = os.path.basename(path)
        err.print(f"bench: running {label} ({len(env)} settings)", highlight=False)
        try:
            doc = launch.run(bench_options(req, env), progress_for(out, req.as_json))
        except NcclcheckError as exc:
            if isinstance(exc, BadInput):
                raise
            failed.append(f"{label}: {exc}")
            runs.append({"label": label, "env_file": path, "env": env, "error": str(exc),
                         "bench": {"rows": [], "candidate_env": env}})
            continue
        if doc is None:
            return
        runs.append({"label": label, "env_file": path, "env": env, "bench": doc})
    doc = compare_document(runs)
    write_outputs(doc, req, render_compare(doc), err, to_file=len(failed) < len(runs))
    wrong = sum(r["bench"].get("wrong_total") or 0 for r in runs)
    if failed:
        raise NcclcheckError("; ".join(failed))
    if wrong:
        raise NcclcheckError(f"{wrong} wrong elements (#wrong) across the compared runs")
