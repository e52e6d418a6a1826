"""The ``ncclcheck tune`` command line (registered on the group in :mod:`ncclcheck.cli.main`):
parse, call :func:`ncclcheck.tune.command.tune`, render. No logic here."""

from __future__ import annotations

from typing import Any

import click

from ncclcheck.cli.options import (
    MAX_ITERS,
    MAX_NODES,
    MAX_PROCS,
    MAX_TIMEOUT_S,
    FloatRange,
    IntRange,
    output_checked,
)
from ncclcheck.errors import NcclcheckError


@click.command()
@click.option("--hostfile", metavar="FILE", help="Nodes to tune over ssh (formats as bench).")
@click.option("--launcher", type=click.Choice(("ssh", "slurm")), default=None,
              help="ssh (--hostfile) or slurm (srun; the default inside salloc/sbatch).")
@click.option("--nodes", type=IntRange(1, MAX_NODES), metavar="N", help="The first N hosts only.")
@click.option("--ssh-config", metavar="FILE", help="ssh config for the nodes (ssh -F).")
@click.option("--remote-python", metavar="PATH", help="Python with ncclcheck on the nodes.")
@click.option("--connect-timeout", type=FloatRange(1, 3600), default=10, show_default=True,
              metavar="S", help="Seconds for ssh to connect.")
@click.option("--timeout", type=FloatRange(1, MAX_TIMEOUT_S), default=120, show_default=True,
              metavar="S", help="Bound on the probe, each rendezvous and each collective.")
@click.option("--budget", default="10m", show_default=True, metavar="DURATION",
              help="Time for the whole tune (90s, 10m, 1h); runs that do not fit are skipped.")
@click.option("--repeats", type=IntRange(2, 20), default=3, show_default=True,
              help="Runs per candidate, in a different order each round.")
@click.option("--op", default="all_reduce", show_default=True,
              type=click.Choice(("all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                 "alltoall", "sendrecv")), help="Collective to measure.")
@click.option("-b", "--min-bytes", default="1M", show_default=True, metavar="SIZE")
@click.option("-e", "--max-bytes", default="2M", show_default=True, metavar="SIZE")
@click.option("-w", "--warmup", type=IntRange(0, MAX_ITERS), default=1, show_default=True)
@click.option("-n", "--iters", type=IntRange(1, MAX_ITERS), default=4, show_default=True)
@click.option("--backend", type=click.Choice(("auto", "nccl", "gloo")), default="auto",
              show_default=True, help="auto: NCCL when every node has a GPU, else gloo.")
@click.option("--procs", type=IntRange(1, MAX_PROCS), metavar="N", help="Ranks per node.")
@click.option("--format", "fmt", type=click.Choice(["env", "shell", "deepspeed", "json"]),
              default="env", show_default=True, help="Format of the env file.")
@click.option("-o", "--output", metavar="FILE", callback=output_checked,
              help="Write the env file here (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the tune document on stdout.")
@click.option("--doc", "doc_path", metavar="FILE", callback=output_checked,
              help="Write the tune document to FILE.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Load the result with the real libnccl on a node; a failure writes no env file.")
@click.option("--nccl-lib", metavar="PATH", help="The libnccl --verify loads.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary on stderr.")
@click.pass_obj
def tune(obj: Any, output: str | None, as_json: bool, doc_path: str | None, quiet: bool,
         **options: Any) -> None:
    """Probe, recommend, measure the candidates, write the fastest env that beats NCCL's defaults.

    \b
      ncclcheck tune --hostfile hosts -o nccl.env
      ncclcheck tune --hostfile hosts -o nccl.env --json > tune.json
      salloc -N2 ncclcheck tune --budget 5m -o nccl.env
      ncclcheck report tune.json -o report.html        # the candidates side by side
    """
    from ncclcheck.cli.context import emit
    from ncclcheck.render.tune import progress_for, render_summary
    from ncclcheck.outfile import write_atomic
    from ncclcheck.schema import dumps
    from ncclcheck.tune.command import TuneRequest, tune as run_tune

    doc, _final, text = run_tune(TuneRequest(**options), progress_for(obj.err, quiet))
    if doc_path:
        write_atomic(doc_path, dumps(doc))
    verified = doc["verify"] is None or doc["verify"].get("ok")
    if verified and (output or not as_json):
        emit(text, output)
    if as_json:
        click.echo(dumps(doc), nl=False)
    if not quiet:
        render_summary(obj.err, doc)
        if output and verified:
            obj.err.print(f"env file written to {output}", markup=False, highlight=False)
    if not verified:
        raise NcclcheckError("verify failed, no env file written: "
                             + "; ".join(doc["verify"].get("problems") or []))
