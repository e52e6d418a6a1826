"""The ``ncclcheck recommend`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.recommend.command.run_command`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx, emit, exit_for_findings, fail_on_option
from ncclcheck.cli.options import GreedyOption, stdout_dash
from ncclcheck.errors import NcclcheckError


@click.command()
@click.option("--probe", "probe_paths", cls=GreedyOption, metavar="FILE...",
              help="Facts files, folders of them, or cluster documents (default: probe this node).")
@click.option("--bench", "bench_paths", cls=GreedyOption, metavar="FILE...",
              help="Bench documents (ncclcheck bench, --compare, --import) to decide ties.")
@click.option("--format", "fmt", type=click.Choice(["env", "shell", "deepspeed", "json"]),
              default="env", show_default=True, help="What stdout (or -o) gets.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write to FILE (atomically) instead of stdout.")
@click.option("--explain", is_flag=True, help="Print every reason in full (stderr).")
@click.option("--quiet", "-q", is_flag=True, help="No explanation on stderr.")
@click.option("--verify", is_flag=True,
              help="Load the result with the real libnccl (NCCL_CONF_FILE, ncclGetUniqueId).")
@click.option("--nccl-lib", metavar="PATH", help="The libnccl --verify loads.")
@click.option("--candidates-dir", metavar="DIR",
              help="Write one env file per candidate of each tie, for bench --compare.")
@click.option("--dump-dir", metavar="DIR", help="Shared storage for the next hang's Flight "
              "Recorder dumps and NCCL logs (the file's last section).")
@fail_on_option
@click.pass_obj
def recommend(obj: Ctx, probe_paths: tuple, bench_paths: tuple, fmt: str, output: str | None,
              explain: bool, quiet: bool, verify: bool, nccl_lib: str | None,
              candidates_dir: str | None, dump_dir: str | None, fail_on: str | None) -> None:
    """Recommend NCCL settings for every node: stdout is an env file, reasons go to stderr.

    \b
      ncclcheck recommend > nccl.env                     # this node
      ncclcheck probe --hostfile hosts -o cluster.json
      ncclcheck recommend --probe cluster.json --explain > nccl.env
      ncclcheck recommend --probe facts/*.json --bench compare.json --format shell
      ncclcheck recommend --probe cluster.json --verify -o nccl.env
      ncclcheck recommend --probe cluster.json --dump-dir /shared/hang > nccl.env
    """
    from ncclcheck.cluster import gc_paused
    from ncclcheck.recommend.command import run_command

    with gc_paused():  # the whole short-lived command: 1,000 facts files parse 3x faster
        doc, text, problems = run_command(list(probe_paths), list(bench_paths), fmt,
                                          verify=verify, nccl_lib=nccl_lib,
                                          candidates_dir=candidates_dir, output=output,
                                          dump_dir=dump_dir)
        verified = not verify or doc["verify"]["ok"]
        if verified:  # a file that failed --verify is never written
            emit(text, output)
        if not quiet:
            from ncclcheck.render.recommend import render_explanation, render_verify

            render_explanation(obj.err, doc, explain)
            if verify:
                render_verify(obj.err, doc["verify"])
    if not verified:
        raise NcclcheckError("verify failed, nothing written: "
                             + "; ".join(doc["verify"]["problems"]))
    exit_for_findings(problems, fail_on)
