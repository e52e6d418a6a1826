"""``ncclcheck bench``'s request: the options as given, the validated run options, and the outputs.

The CLI fills a :class:`BenchRequest`; :mod:`ncclcheck.benchcmd` (above render/, which draws
the results) runs it and writes the outputs with :func:`write_outputs`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import click

from ncclcheck.errors import BadInput


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
    probe: list[str] = dataclasses.field(default_factory=list)
    budget: str = "10m"  #: --pairwise: the whole hunt's wall time
    #: the options the user gave (``max_bytes``, ``warmup``, ``iters``, ``timeout``): with
    #: --pairwise, the others are chosen by the hunt (a probed size, a time per pair)
    given: tuple[str, ...] = ()
    #: ``-e`` left at its default on the command line: over gloo the sweep ends at 8 MiB
    gloo_end: bool = False


def bench_options(req: BenchRequest, extra_env: dict[str, str] | None = None) -> Any:
    """Validated :class:`~ncclcheck.bench.options.BenchOptions` for one run."""
    from ncclcheck.bench import envfile, sweep
    from ncclcheck.bench.options import BenchOptions

    dtype = sweep.get_dtype(req.dtype)
    min_bytes, max_bytes = sweep.parse_size(req.min_bytes), sweep.parse_size(req.max_bytes)
    sizes = sweep.sizes(min_bytes, max_bytes, req.step_factor)
    gloo_sizes = None if not req.gloo_end else sweep.sizes(
        min_bytes, max(min_bytes, min(max_bytes, sweep.GLOO_MAX_BYTES)), req.step_factor)
    env = envfile.candidate_env(req.env_assignments, req.env_files)
    env.update(extra_env or {})
    envfile.check_size(env, "the run's settings")
    if req.nccl_log_dir:
        check_log_dir(req.nccl_log_dir, local=not req.hostfile)
    if req.remote_python:
        from ncclcheck.remote.quoting import validate_remote_python

        validate_remote_python(req.remote_python)
    if req.master_addr:
        from ncclcheck.hostfile import validate_host

        try:
            validate_host(req.master_addr)
        except ValueError as exc:
            raise BadInput(f"--master-addr: {exc}") from None
    return BenchOptions(
        op=req.op or "all_reduce", dtype=dtype.name, sizes=sizes, gloo_sizes=gloo_sizes,
        warmup=req.warmup,
        iters=req.iters, check=req.check, backend=req.backend, procs=req.procs,
        timeout=req.timeout, candidate_env=env, nodes=req.nodes, hostfile=req.hostfile,
        ssh_config=req.ssh_config, remote_python=req.remote_python,
        connect_timeout=req.connect_timeout, master_addr=req.master_addr,
        master_port=req.master_port, launcher=req.launcher,
        nccl_log_dir=req.nccl_log_dir, link_rate_gbps=req.link_rate,
        average=sweep.get_average(req.average),
        sweep={"min_bytes": min_bytes, "max_bytes": max_bytes, "step_factor": req.step_factor})


def check_log_dir(folder: str, local: bool) -> None:
    """Refuse an unusable ``--nccl-log-dir`` before anything starts; on this node (``local``:
    no ``--hostfile``) create it now. Over ssh each node creates it."""
    if "\0" in folder or len(os.fsencode(folder)) > 4095 or not folder.strip():
        raise BadInput("--nccl-log-dir: not a usable path")
    if local:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"--nccl-log-dir {folder}: cannot create "
                           f"({exc.strerror or exc})") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise BadInput(f"--nccl-log-dir {folder}: not writable")


def launcher_note(environ: dict[str, str]) -> str | None:
    """What to say when a launcher's variables are set but it gave this process no rank: e.g.
    ``accelerate launch --cpu`` that started one process (ncclcheck then starts its own ranks).

    >>> launcher_note({"ACCELERATE_USE_CPU": "True"})
    "accelerate's variables are set (ACCELERATE_USE_CPU) but not RANK and WORLD_SIZE: it started this process alone, and ncclcheck started the ranks"
    >>> launcher_note({"ACCELERATE_USE_CPU": "True", "RANK": "0", "WORLD_SIZE": "2",
    ...                "MASTER_ADDR": "127.0.0.1"}) is None
    True
    """
    from ncclcheck.k8s.launcher import detect_launcher

    names = sorted(k for k in environ if k.startswith("ACCELERATE_"))
    if not names or detect_launcher(environ):
        return None
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"accelerate's variables are set ({shown}) but not RANK and WORLD_SIZE: it started "
            "this process alone, and ncclcheck started the ranks")


def write_outputs(doc: dict[str, Any], req: BenchRequest, text: str, err: Any,
                  to_file: bool = True) -> None:
    """``-o`` (atomic JSON), then ``--json`` or the table on stdout.

    ``to_file`` False (every run failed) keeps the user's earlier ``-o`` file, and says so.
    """
    from ncclcheck.outfile import write_atomic
    from ncclcheck.schema import dumps

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
