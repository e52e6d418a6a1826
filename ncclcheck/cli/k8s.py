"""The ``ncclcheck k8s`` command line (registered on the group in :mod:`ncclcheck.cli.main`): parse,
call :mod:`ncclcheck.k8s`, print. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx, emit
from ncclcheck.cli.options import stdout_dash
from ncclcheck.errors import BadInput


@click.group()
def k8s() -> None:
    """Kubernetes: manifests that run probe, bench and the hunt; node labels from results."""


def _pairs(values: tuple, what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise BadInput(f"{what} {value!r}: expected KEY=VALUE")
        out[key] = val
    return out


@k8s.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", type=click.Choice(("probe", "bench", "pairwise")))
@click.option("--api", required=True, metavar="API",
              help="mpijob, jobset, trainjob, pytorchjob or lws.")
@click.option("--image", required=True, metavar="IMAGE", help="An image with ncclcheck (and "
              "torch for bench; sshd for mpijob's workers).")
@click.option("--nodes", type=int, default=2, show_default=True, metavar="N",
              help="Pods, one per node.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True, metavar="N",
              help="nvidia.com/gpu per pod (all of the node's).")
@click.option("--name", metavar="NAME", help="Object name (default ncclcheck-COMMAND).")
@click.option("--namespace", metavar="NS", help="Namespace (default: kubectl's).")
@click.option("--port", type=int, default=29500, show_default=True, metavar="PORT",
              help="Rendezvous port.")
@click.option("--rdma-resource", metavar="NAME",
              help="RDMA device resource, e.g. rdma/ib or nvidia.com/hostdev (adds IPC_LOCK).")
@click.option("--rdma-count", type=int, default=1, show_default=True, metavar="N",
              help="How many of --rdma-resource per pod.")
@click.option("--shm-size", default="16Gi", show_default=True, metavar="SIZE",
              help="/dev/shm as a memory emptyDir of this size.")
@click.option("--host-network", is_flag=True,
              help="hostNetwork (with dnsPolicy ClusterFirstWithHostNet).")
@click.option("--ipc-lock", is_flag=True, help="Add the IPC_LOCK capability.")
@click.option("--annotation", "annotations", multiple=True, metavar="KEY=VALUE",
              help="Pod annotation, e.g. k8s.v1.cni.cncf.io/networks=net1,net2 (repeatable).")
@click.option("--queue", metavar="NAME", help="Kueue LocalQueue (kueue.x-k8s.io/queue-name).")
@click.option("--topology-level", metavar="LABEL",
              help="Kueue required topology level (a node label key).")
@click.option("--label-nodes", is_flag=True, help="Also run 'ncclcheck k8s label' on the "
              "result, with the ServiceAccount, ClusterRole and binding it needs.")
@click.option("--format", "fmt", type=click.Choice(("yaml", "json")), default="yaml",
              show_default=True, help="YAML documents, or one JSON List.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the manifest to FILE (default: stdout).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def render(obj: Ctx, command: str, api: str, image: str, nodes: int, gpus_per_node: int,
           name: str | None, namespace: str | None, port: int, rdma_resource: str | None,
           rdma_count: int, shm_size: str, host_network: bool, ipc_lock: bool,
           annotations: tuple, queue: str | None, topology_level: str | None,
           label_nodes: bool, fmt: str, output: str | None, args: tuple) -> None:
    """Write a manifest that runs COMMAND (probe, bench or pairwise) as a job API.

    \b
    Arguments after -- go to the ncclcheck command in the pods:
      ncclcheck k8s render bench --api jobset --image IMG --nodes 4 -- -e 1G | kubectl apply -f -
    """
    from ncclcheck.k8s.apis import render as render_objects
    from ncclcheck.k8s.render import RenderOptions, to_text

    opts = RenderOptions(command=command, api=api, image=image, nodes=nodes,
                         gpus_per_node=gpus_per_node, name=name, namespace=namespace, port=port,
                         rdma_resource=rdma_resource, rdma_count=rdma_count, shm_size=shm_size,
                         host_network=host_network, ipc_lock=ipc_lock,
                         annotations=_pairs(annotations, "--annotation"), queue=queue,
                         topology_level=topology_level, label_nodes=label_nodes,
                         args=list(args))
    text = to_text(render_objects(opts), fmt)
    if output and output != "-":
        emit(text, output)
    else:
        click.echo(text, nl=False)


@k8s.command()
@click.argument("document", metavar="DOC")
@click.option("--taint", is_flag=True,
              help="Also taint nodes that are not ok (NoSchedule); ok nodes lose our taint.")
@click.option("--prefix", default="ncclcheck.io", show_default=True, metavar="PREFIX",
              help="Label key prefix.")
@click.option("--dry-run", is_flag=True, help="Print the PATCH bodies; send nothing.")
@click.option("--api-server", metavar="URL", help="API server (default: in-cluster config).")
@click.option("--token-file", metavar="FILE", help="Bearer token file.")
@click.option("--ca-file", metavar="FILE", help="CA bundle for the API server.")
@click.option("--timeout", type=click.FloatRange(min=1), default=10, show_default=True,
              metavar="S", help="Seconds per request.")
@click.pass_obj
def label(obj: Ctx, document: str, taint: bool, prefix: str, dry_run: bool,
          api_server: str | None, token_file: str | None, ca_file: str | None,
          timeout: float) -> None:
    """Label (and with --taint, taint) nodes from a bench, pairwise, cluster or facts document.

    \b
      ncclcheck k8s label pairwise.json --dry-run
      ncclcheck k8s label pairwise.json --taint          # in a pod: in-cluster config
      ncclcheck k8s label cluster.json --api-server https://10.0.0.1:6443 \\
          --token-file token --ca-file ca.crt
    """
    import os

    from ncclcheck.k8s.label import apply, plan
    from ncclcheck.k8s.rest import Client
    from ncclcheck.schema import load

    doc = load(document, ("ncclcheck/bench", "ncclcheck/pairwise", "ncclcheck/cluster",
                          "ncclcheck/facts"))
    kind, nodes = plan(doc, prefix)
    client = None if dry_run else Client.configure(dict(os.environ), api_server, token_file,
                                                  ca_file, timeout)
    apply(client, kind, nodes, prefix, taint, dry_run, lambda line: click.echo(line))
