"""The ``ncclcheck probe`` command line (registered on the group in :mod:`ncclcheck.cli.main`):
parse, call :mod:`ncclcheck.probe` or :mod:`ncclcheck.cluster`, render. No logic here."""

from __future__ import annotations

import os
import sys

import click

from ncclcheck.cli.context import Ctx, emit, exit_for_findings, fail_on_option
from ncclcheck.cli.options import (
    MAX_NODES,
    MAX_TIMEOUT_S,
    FloatRange,
    GreedyOption,
    IntRange,
    stdout_dash,
)
from ncclcheck.errors import BadInput



@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts document as JSON.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the facts JSON to FILE (atomically; - for stdout).")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Read files under PATH (a mounted host tree, an unpacked sos report).")
@click.option("--replay", metavar="DIR", help="Probe a recorded host folder instead of this machine.")
@click.option("--only", metavar="SECTIONS", help="Comma-separated sections to collect.")
@click.option("--hostfile", metavar="FILE",
              help="Probe every host of FILE over ssh (formats as bench) into a cluster document.")
@click.option("--nodes", type=IntRange(1, MAX_NODES), metavar="N", help="Only the first N hosts.")
@click.option("--ssh-config", metavar="FILE", help="ssh config for the nodes (ssh -F).")
@click.option("--remote-python", metavar="PATH",
              help="Python with ncclcheck on the nodes (default: this interpreter's path).")
@click.option("--timeout", type=FloatRange(1, MAX_TIMEOUT_S), default=120, show_default=True,
              metavar="S", help="Seconds per host, connection included.")
@click.option("--connect-timeout", type=FloatRange(1, 3600), default=10, show_default=True,
              metavar="S", help="Seconds for ssh to connect.")
@click.option("--concurrency", type=IntRange(1, 1024), default=32, show_default=True,
              metavar="N", help="Hosts probed at once.")
@click.option("--out-dir", metavar="DIR", help="Also write one facts file per host into DIR.")
@click.option("--launcher", type=click.Choice(("ssh", "slurm")), default=None,
              help="How to reach the nodes: ssh (--hostfile) or slurm (srun, one task per node; "
                   "the default inside salloc/sbatch without --hostfile).")
@click.option("--from", "from_paths", cls=GreedyOption, metavar="DIR|FILE...",
              help="Load facts collected elsewhere (srun, pdsh, Kubernetes) instead of probing.")
@fail_on_option
@click.pass_obj
def probe(obj: Ctx, as_json: bool, output: str | None, root: str, replay: str | None,
          only: str | None, hostfile: str | None, nodes: int | None, ssh_config: str | None,
          remote_python: str | None, timeout: float, connect_timeout: float, concurrency: int,
          out_dir: str | None, launcher: str | None, from_paths: tuple,
          fail_on: str | None) -> None:
    """Collect facts about this node: GPUs, NCCL libraries, network, IB/RoCE, limits, env.

    \b
    With --hostfile (or --from), facts from every node, and what differs between them:
      ncclcheck probe --hostfile hosts -o cluster.json --out-dir facts/
      ncclcheck probe --from facts/          # files from srun, pdsh, Kubernetes
      salloc -N2 ncclcheck probe --launcher slurm -o cluster.json
    """
    from ncclcheck import probe as probe_mod
    from ncclcheck.schema import dumps

    if output and output != "-" and os.path.isdir(output):
        raise BadInput(f"-o {output}: is a directory, not a file")
    from ncclcheck.remote.slurm import choose_launcher

    launcher = choose_launcher(launcher, hostfile, list(from_paths), root, replay)
    if hostfile or from_paths or launcher == "slurm":
        from ncclcheck.cluster import collect_cluster, exit_code, write_per_host
        from ncclcheck.render.cluster import render_cluster

        doc = collect_cluster(hostfile, nodes, ssh_config, remote_python, timeout,
                              connect_timeout, concurrency, list(from_paths), only, launcher)
        for path in write_per_host(doc, out_dir) if out_dir else []:
            obj.err.print(f"facts written to {path}", markup=False, highlight=False)
        if output and output != "-":
            if doc["nodes"] or not doc.get("failed"):
                emit(dumps(doc), output)
            else:
                click.echo(f"ncclcheck: note: every host failed: {output} is not written (an "
                           "earlier file stays as it was)", err=True)
        if as_json or output == "-":
            click.echo(dumps(doc), nl=False)
        render_cluster(obj.err if (as_json or output) else obj.out, doc)
        exit_for_findings([f for n in doc["nodes"] for f in n.get("findings", [])], fail_on)
        sys.exit(exit_code(doc))
    host = probe_mod.open_host(root, replay)
    doc = probe_mod.collect_facts(host, only.split(",") if only else None)
    if output and output != "-":
        emit(dumps(doc), output)
    if as_json or output == "-":  # "-o -" is the JSON on stdout, as --json
        click.echo(dumps(doc), nl=False)
    elif not output:
        from ncclcheck.render.facts import render_facts

        render_facts(obj.out, doc)
    else:
        from ncclcheck.render.facts import render_findings

        render_findings(obj.err, doc.get("findings", []))
        obj.err.print(f"facts written to {output}", markup=False, highlight=False)
    exit_for_findings(doc.get("findings", []), fail_on)
