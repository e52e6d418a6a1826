"""The ``ncclcheck rank`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.rank.rank_values`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx
from ncclcheck.cli.options import MAX_NODES, EvalCommand, IntRange


@click.command(cls=EvalCommand)
@click.option("--hostfile", metavar="FILE",
              help="Hostfile (DeepSpeed/MPI 'host slots=N', pssh 'user@host:port', or a list). "
                   "Without it: the pod's Kubernetes job API, or mpirun (once per node).")
@click.option("--nodes", type=IntRange(1, MAX_NODES), metavar="N", help="Use the first N hosts of the hostfile.")
@click.option("--port-range", default="29500-29599", show_default=True, metavar="LO-HI",
              help="Every node prints LO; if LO is busy on the master, it fails and names a "
                   "free port of the range for --master-port.")
@click.option("--master-port", type=IntRange(1, 65535), metavar="PORT",
              help="Use this MASTER_PORT (checked free on the master).")
@click.option("--export", "export", is_flag=True, help="Prefix each line with 'export '.")
@click.option("--json", "as_json", is_flag=True, help="Print the values as JSON.")
@click.pass_obj
def rank(obj: Ctx, hostfile: str | None, nodes: int | None, port_range: str,
         master_port: int | None, export: bool, as_json: bool) -> None:
    """Print NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT for this node, for torchrun.

    \b
    eval "$(ncclcheck rank --hostfile hosts)"
    torchrun --nnodes=$NNODES --node-rank=$NODE_RANK --nproc-per-node=8 \\
             --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py

    In a pod of an MPIJob, PyTorchJob, TrainJob, JobSet or LeaderWorkerSet, or under mpirun
    (one process per node), 'ncclcheck rank' alone reads what the controller or mpirun set.
    Every node prints the same MASTER_PORT, or the master fails (exit 1) and names the
    --master-port to give every node. On failure stdout is '(exit N)', so the eval fails too
    and a 'bash -e' script stops there.
    """
    import json

    from ncclcheck.rank import format_shell, rank_values

    notes: list[str] = []
    values = rank_values(hostfile, nodes, port_range, master_port, notes)
    for note in notes:
        click.echo(f"ncclcheck: note: {note}", err=True)
    click.echo(json.dumps(values) if as_json else format_shell(values, export), nl=as_json)
