"""The five job APIs' shapes for :mod:`ncclcheck.k8s.render` (schemas: the CRDs at the tags in
``tests/fixtures/k8s/crds/SOURCES.json``).

* **MPIJob** (kubeflow.org/v2beta1): N workers of all their GPUs running sshd (the image must
  have it, as the MPI operator's images do); the launcher asks for no GPU and runs
  ``mpirun -np N --map-by ppr:1:node`` (one rank per node) for bench; probe and the hunt run
  over ssh from the launcher with the operator's hostfile (``--hostfile /etc/mpi/hostfile``).
  An ssh session does not get the container's environment (the operator only sets
  ``K_MPI_JOB_ROLE=worker`` there and starts ``/usr/sbin/sshd -De``: mpi-operator v0.8.0
  ``pkg/controller/mpi_job_controller.go`` l.175-180, 1503-1506), so the worker's sshd gets
  ``-o SetEnv=`` of the role and the pod's downward-API variables (OpenSSH >= 8.7's
  ``sshd_config`` ``SetEnv``: "override the default environment"); the kubelet expands
  ``$(POD_NAME)`` in ``command`` from the container's env (the CRD's ``command`` description,
  ``manifests/base/kubeflow.org_mpijobs.yaml`` l.1075-1085). Probe on a worker then names its
  pod, namespace, node and topology labels as in the other APIs' pods.
* **JobSet** (jobset.x-k8s.io/v1alpha2): one Job of N indexed pods, DNS hostnames, the
  coordinator pod 0-0 whose address reaches every pod as ``MASTER_ADDR`` (the
  ``jobset.sigs.k8s.io/coordinator`` annotation), ``NNODES`` and ``MASTER_PORT`` explicit, and
  ``JOBSET_JOB_INDEX`` (the job-index label) for host-network pods, whose hostname is the node's.
* **TrainJob** (trainer.kubeflow.org/v1alpha1): a TrainingRuntime carrying the pod settings a
  TrainJob cannot override (host network, volumes, capabilities) and a TrainJob of N nodes;
  bench runs under torchrun (``PET_*`` give it nodes, node rank, processes and master).
* **PyTorchJob** (kubeflow.org/v1): Master + N-1 Workers, container ``pytorch``, port
  ``pytorchjob-port``; bench under torchrun, as for TrainJob.
* **LeaderWorkerSet** (leaderworkerset.x-k8s.io/v1): one group of N pods; LWS pods restart
  (StatefulSet), so the command sleeps after ncclcheck ends: read its log, then delete the set.

probe (and the hunt, outside MPIJob) runs without torchrun: one process per pod, its node rank
from the API's variables (:mod:`ncclcheck.k8s.podenv`).
"""

from __future__ import annotations

from typing import Any, Callable

from ncclcheck.k8s.render import (RenderOptions, check, container, metadata, ncclcheck_argv,
                                  pod_template, rbac, with_labeling)

MPI_HOSTFILE = "/etc/mpi/hostfile"
#: The worker's ssh sessions get the pod's variables (one ``SetEnv`` line: sshd keeps the first).
WORKER_SETENV = ("SetEnv=K_MPI_JOB_ROLE=worker POD_NAME=$(POD_NAME) POD_NAMESPACE=$(POD_NAMESPACE) "
                 "NODE_NAME=$(NODE_NAME)")


def _argv(o: RenderOptions, torchrun: bool = False) -> list[str]:
    argv = ncclcheck_argv(o)
    if torchrun and o.command == "bench":
        argv = ["torchrun", "-m", *argv]  # PET_NNODES, PET_NODE_RANK, ... are torchrun's flags
    return with_labeling(o, argv)


def mpijob(o: RenderOptions) -> list[dict[str, Any]]:
    """MPIJob: launcher without GPUs; workers run sshd."""
    worker0 = f"{o.job_name}-worker-0.{o.job_name}"
    if o.command == "bench":
        run = ["mpirun", "--allow-run-as-root", "-np", str(o.nodes), "--map-by", "ppr:1:node",
               "--bind-to", "none", "-x", f"MASTER_ADDR={worker0}", "-x",
               f"MASTER_PORT={o.port}", *ncclcheck_argv(o)]
    else:
        run = ncclcheck_argv(o)
        run[2:2] = ["--hostfile", MPI_HOSTFILE, "--nodes", str(o.nodes)]
    launcher = container(o, "launcher", with_labeling(o, run), gpus=False)
    worker = container(o, "worker", ["/usr/sbin/sshd", "-De", "-o", WORKER_SETENV])
    spec = {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never",
                             "template": pod_template(o, [launcher], restart=None)},
                "Worker": {"replicas": o.nodes, "restartPolicy": "Never",
                           "template": pod_template(o, [worker], restart=None)}}}
    return [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": metadata(o),
             "spec": spec}]


def jobset(o: RenderOptions) -> list[dict[str, Any]]:
    """JobSet: one indexed Job of N pods; coordinator 0-0."""
    env = [{"name": "NNODES", "value": str(o.nodes)},
           {"name": "MASTER_PORT", "value": str(o.port)},
           {"name": "MASTER_ADDR", "valueFrom": {"fieldRef": {
               "fieldPath": "metadata.annotations['jobset.sigs.k8s.io/coordinator']"}}},
           {"name": "JOBSET_JOB_INDEX", "valueFrom": {"fieldRef": {
               "fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}}]
    pod = pod_template(o, [container(o, "ncclcheck", _argv(o), env=env)])
    job = {"parallelism": o.nodes, "completions": o.nodes, "completionMode": "Indexed",
           "backoffLimit": 0, "template": pod}
    spec = {"network": {"enableDNSHostnames": True},
            "coordinator": {"replicatedJob": "node", "jobIndex": 0, "podIndex": 0},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}]}
    return [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": metadata(o), "spec": spec}]


def trainjob(o: RenderOptions) -> list[dict[str, Any]]:
    """TrainingRuntime (pod settings) + TrainJob (N nodes)."""
    node = container(o, "node", _argv(o, torchrun=True))
    job_template = {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step":
                                            "trainer"}},
                    "spec": {"backoffLimit": 0, "template": pod_template(o, [node])}}
    runtime_meta = metadata(o)
    runtime_meta["labels"].pop("kueue.x-k8s.io/queue-name", None)
    runtime_meta["labels"]["trainer.kubeflow.org/framework"] = "torch"
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
               "metadata": runtime_meta,
               "spec": {"mlPolicy": {"numNodes": o.nodes, "torch": {}},
                        "template": {"spec": {"replicatedJobs": [
                            {"name": "node", "template": job_template}]}}}}
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": metadata(o),
           "spec": {"runtimeRef": {"name": o.job_name, "kind": "TrainingRuntime",
                                   "apiGroup": "trainer.kubeflow.org"},
                    "trainer": {"numNodes": o.nodes,
                                "numProcPerNode": max(o.gpus_per_node, 1)}}}
    return [runtime, job]


def pytorchjob(o: RenderOptions) -> list[dict[str, Any]]:
    """PyTorchJob: Master + Workers."""
    port = [{"name": "pytorchjob-port", "containerPort": o.port}]
    pod = pod_template(o, [container(o, "pytorch", _argv(o, torchrun=True), ports=port)],
                       restart=None)
    replicas = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": pod}}
    if o.nodes > 1:
        replicas["Worker"] = {"replicas": o.nodes - 1, "restartPolicy": "Never", "template": pod}
    spec = {"nprocPerNode": str(max(o.gpus_per_node, 1)),
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
            "pytorchReplicaSpecs": replicas}
    return [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata(o),
             "spec": spec}]


def lws(o: RenderOptions) -> list[dict[str, Any]]:
    """LeaderWorkerSet: one group of N pods; the command sleeps after ncclcheck ends."""
    argv = _argv(o)
    keep = ["sh", "-c", '"$@"; echo "ncclcheck exited $?"; exec sleep infinity', "sh", *argv]
    env = [{"name": "MASTER_PORT", "value": str(o.port)}]
    pod = pod_template(o, [container(o, "ncclcheck", keep, env=env)], restart=None)
    spec = {"replicas": 1, "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {"size": o.nodes, "restartPolicy": "None",
                                     "workerTemplate": pod}}
    return [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": metadata(o), "spec": spec}]


BUILDERS: dict[str, Callable[[RenderOptions], list[dict[str, Any]]]] = {
    "mpijob": mpijob, "jobset": jobset, "trainjob": trainjob, "pytorchjob": pytorchjob,
    "lws": lws}


def render(o: RenderOptions) -> list[dict[str, Any]]:
    """The objects to apply, in order (RBAC first, then any runtime, then the job)."""
    check(o)
    return (rbac(o) if o.label_nodes else []) + BUILDERS[o.api](o)
