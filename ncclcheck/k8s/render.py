"""``ncclcheck k8s render``: the manifest that runs probe, bench or the hunt as a job API.

One pod per node with all its GPUs (``nvidia.com/gpu``: ``--gpus-per-node``), plus what real
NCCL-test manifests carry: an RDMA device resource, ``/dev/shm`` as a memory emptyDir,
``hostNetwork`` (always with ``dnsPolicy: ClusterFirstWithHostNet``: without it a host-network
pod cannot resolve the job's service names), ``IPC_LOCK`` (RDMA pins memory), pod annotations
(Multus ``k8s.v1.cni.cncf.io/networks``), and a Kueue queue (``kueue.x-k8s.io/queue-name``
label) with a required topology level (``kueue.x-k8s.io/podset-required-topology``).

Every pod also gets ``POD_NAME``, ``POD_NAMESPACE`` and ``NODE_NAME`` from the downward API and its
labels at ``/etc/podinfo/labels``, which ``probe`` records (:mod:`ncclcheck.k8s.podenv`). The
per-API shapes and :func:`~ncclcheck.k8s.apis.render` are in :mod:`ncclcheck.k8s.apis`; the output is YAML (:mod:`.yamlout`) or JSON
(``--format json``: a ``v1`` ``List``), both of which ``kubectl apply -f`` takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.errors import BadInput

COMMANDS = ("probe", "bench", "pairwise")
#: RFC 1123 label (object names, container names).
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: Extended resource names: ``vendor.example/name``.
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$")
SERVICE_ACCOUNT = "ncclcheck-node-labeler"


@dataclass
class RenderOptions:
    """What ``k8s render`` was asked for."""

    command: str
    api: str
    image: str
    nodes: int = 2
    gpus_per_node: int = 8
    name: str | None = None
    namespace: str | None = None
    port: int = 29500
    rdma_resource: str | None = None
    rdma_count: int = 1
    shm_size: str = "16Gi"
    host_network: bool = False
    ipc_lock: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    queue: str | None = None
    topology_level: str | None = None
    label_nodes: bool = False
    args: list[str] = field(default_factory=list)

    @property
    def job_name(self) -> str:
        return self.name or f"ncclcheck-{self.command}"


def check(o: RenderOptions) -> None:
    """Refuse what would not apply, before anything is written (:class:`BadInput`)."""
    from ncclcheck.k8s.podenv import APIS

    if o.command not in COMMANDS:
        raise BadInput(f"k8s render: unknown command {o.command!r} (one of {', '.join(COMMANDS)})")
    if o.api not in APIS:
        raise BadInput(f"--api {o.api!r}: one of {', '.join(APIS)}")
    if not _NAME.match(o.job_name) or len(o.job_name) > 40:
        raise BadInput(f"--name {o.job_name!r}: lower-case letters, digits and '-', at most 40 "
                       "characters (pod names add suffixes)")
    if o.namespace is not None and not _NAME.match(o.namespace):
        raise BadInput(f"--namespace {o.namespace!r} is not a valid namespace name")
    if not 1 <= o.nodes <= 4096:
        raise BadInput(f"--nodes {o.nodes}: from 1 to 4096")
    if o.command == "pairwise" and o.nodes < 2:
        raise BadInput("pairwise needs --nodes 2 or more")
    if not 0 <= o.gpus_per_node <= 64:
        raise BadInput(f"--gpus-per-node {o.gpus_per_node}: from 0 to 64")
    if not 1 <= o.port <= 65535:
        raise BadInput(f"--port {o.port}: from 1 to 65535")
    if not o.image or any(c.isspace() for c in o.image):
        raise BadInput("--image: an image reference without spaces")
    if o.rdma_resource is not None and not _RESOURCE.match(o.rdma_resource):
        raise BadInput(f"--rdma-resource {o.rdma_resource!r}: a resource name like rdma/ib or "
                       "nvidia.com/hostdev")
    if not 1 <= o.rdma_count <= 64:
        raise BadInput(f"--rdma-count {o.rdma_count}: from 1 to 64")
    if not _QUANTITY.match(o.shm_size):
        raise BadInput(f"--shm-size {o.shm_size!r}: a quantity like 16Gi")
    from ncclcheck.k8s.labels import check_key

    for key in list(o.annotations) + ([o.topology_level] if o.topology_level else []):
        check_key(key, "annotation key" if key in o.annotations else "--topology-level")
    if o.label_nodes and o.command != "probe" and not o.host_network:
        raise BadInput("--label-nodes with bench or pairwise needs --host-network: the results "
                       "name pods by hostname, which is the node's name only on the host network")
    if o.label_nodes and o.api == "mpijob" and o.command == "pairwise":
        raise BadInput("--label-nodes: the MPIJob hunt names nodes by the operator's hostfile "
                       "(pod DNS names), not node names; label from probe or bench instead")
    if o.queue is not None and not _NAME.match(o.queue):
        raise BadInput(f"--queue {o.queue!r} is not a valid LocalQueue name")


def ncclcheck_argv(o: RenderOptions) -> list[str]:
    """The ncclcheck command a pod (or the MPI launcher) runs, with the user's extra args."""
    if o.command == "probe":
        return ["ncclcheck", "probe", "--json", *o.args]
    if o.command == "pairwise":
        return ["ncclcheck", "bench", "--pairwise", "--json", *o.args]
    return ["ncclcheck", "bench", "--json", *o.args]


def with_labeling(o: RenderOptions, argv: list[str]) -> list[str]:
    """With ``--label-nodes``: run ``argv`` with its output kept, then ``ncclcheck k8s label`` on
    it; exit with the run's code. The shell text is fixed; the argv follows as ``$@``."""
    if not o.label_nodes:
        return argv
    script = ('"$@" > /tmp/ncclcheck.json; rc=$?; cat /tmp/ncclcheck.json; '
              'if [ -s /tmp/ncclcheck.json ]; then ncclcheck k8s label /tmp/ncclcheck.json; fi; '
              'exit $rc')
    return ["sh", "-c", script, "sh", *argv]


def container(o: RenderOptions, name: str, argv: list[str] | None, gpus: bool = True,
              env: list[dict] | None = None, ports: list[dict] | None = None) -> dict[str, Any]:
    """The ncclcheck container: all the node's GPUs, RDMA devices, /dev/shm, pod facts."""
    resources: dict[str, Any] = {}
    if gpus and o.gpus_per_node:
        resources["nvidia.com/gpu"] = o.gpus_per_node
    if gpus and o.rdma_resource:
        resources[o.rdma_resource] = o.rdma_count
    out: dict[str, Any] = {"name": name, "image": o.image}
    if argv is not None:
        out["command"] = argv
    out["env"] = [{"name": var, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                  for var, path in (("POD_NAME", "metadata.name"),
                                    ("POD_NAMESPACE", "metadata.namespace"),
                                    ("NODE_NAME", "spec.nodeName"))] + (env or [])
    if ports:
        out["ports"] = ports
    if resources:
        out["resources"] = {"limits": dict(resources), "requests": dict(resources)}
    if gpus and (o.ipc_lock or o.rdma_resource):
        out["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    out["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"},
                           {"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}]
    return out


def pod_template(o: RenderOptions, containers: list[dict], restart: str | None = "Never",
                 extra_labels: dict | None = None) -> dict[str, Any]:
    """A pod template around ``containers``: host network, volumes, annotations, topology."""
    meta: dict[str, Any] = {}
    annotations = dict(o.annotations)
    if o.topology_level:
        annotations["kueue.x-k8s.io/podset-required-topology"] = o.topology_level
    if extra_labels:
        meta["labels"] = dict(extra_labels)
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {}
    if restart:
        spec["restartPolicy"] = restart
    if o.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if o.label_nodes:
        spec["serviceAccountName"] = SERVICE_ACCOUNT
    spec["containers"] = containers
    spec["volumes"] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": o.shm_size}},
        {"name": "podinfo", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]
    return {"metadata": meta, "spec": spec} if meta else {"spec": spec}


def metadata(o: RenderOptions, name: str | None = None) -> dict[str, Any]:
    """An object's metadata: name, namespace, the Kueue queue label."""
    meta: dict[str, Any] = {"name": name or o.job_name}
    if o.namespace:
        meta["namespace"] = o.namespace
    labels = {"app.kubernetes.io/name": "ncclcheck", "app.kubernetes.io/component": o.command}
    if o.queue:
        labels["kueue.x-k8s.io/queue-name"] = o.queue
    meta["labels"] = labels
    return meta


def rbac(o: RenderOptions) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole (nodes: get, patch) and binding for ``k8s label``."""
    namespace = o.namespace or "default"
    sa = {"apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": SERVICE_ACCOUNT},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": f"{SERVICE_ACCOUNT}-{namespace}"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": SERVICE_ACCOUNT},
               "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                             "namespace": namespace}]}
    return [sa, role, binding]


def to_text(objects: list[dict[str, Any]], fmt: str = "yaml") -> str:
    """YAML documents, or one JSON ``List``."""
    import json

    from ncclcheck.k8s.yamlout import dump_all

    if fmt == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
    return dump_all(objects)
