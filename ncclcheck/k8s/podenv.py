"""Which Kubernetes job API started this pod, and the node rank, node count and rendezvous its
controller wrote into the environment (pure).

Each rule names the controller line that sets the variable (tags as in
``tests/fixtures/k8s/crds/SOURCES.json``):

* **MPIJob** (kubeflow/mpi-operator v0.8.0, ``pkg/controller/mpi_job_controller.go``):
  ``K_MPI_JOB_ROLE`` is ``launcher`` or ``worker`` (l.169-180); the hostfile is
  ``/etc/mpi/hostfile`` (l.76-77), named by ``OMPI_MCA_orte_default_hostfile`` (l.188),
  ``I_MPI_HYDRA_HOST_FILE`` (l.198) or ``HYDRA_HOST_FILE`` (l.208); Open MPI lines read
  ``host slots=N``, Intel MPI and MPICH lines ``host:N`` (l.1321-1336). Ranks come from mpirun.
* **PyTorchJob** (kubeflow/training-operator v1.9.0, ``pkg/controller.v1/pytorch/envvar.go``):
  ``WORLD_SIZE`` = replicas x ``nprocPerNode`` (l.62-64, 85-88) but ``RANK`` and
  ``PET_NODE_RANK`` are the *pod's* index (l.76-96); ``PET_NPROC_PER_NODE`` (l.99-103),
  ``PET_NNODES`` (l.117-122); ``MASTER_ADDR``/``PET_MASTER_ADDR``, ``MASTER_PORT``/
  ``PET_MASTER_PORT`` (``master.go`` l.15-19). Without torchrun, ``RANK``/``WORLD_SIZE`` are not
  a process rank and world: this process is node ``PET_NODE_RANK`` of ``PET_NNODES``.
* **TrainJob** (kubeflow/trainer v2.3.0, ``pkg/runtime/framework/plugins/torch/torch.go``
  l.145-166, names in ``pkg/constants/constants.go`` l.190-203): only ``PET_NNODES``,
  ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (the Job completion index), ``PET_MASTER_ADDR``
  (``<trainjob>-node-0-0.<trainjob>``), ``PET_MASTER_PORT``.
* **LeaderWorkerSet** (kubernetes-sigs/lws v0.10.0, ``pkg/utils/pod/pod_utils.go`` l.143-167,
  names in ``api/leaderworkerset/v1/leaderworkerset_types.go`` l.67-75): ``LWS_LEADER_ADDRESS``,
  ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX`` (the leader is 0).
* **JobSet** (kubernetes-sigs/jobset v0.12.0): ``JOB_COMPLETION_INDEX`` comes from the Indexed
  Job controller (kubernetes/kubernetes ``pkg/controller/job/indexed_job_utils.go``,
  ``addCompletionIndexEnvVariable``); the pod hostname is
  ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` (``pkg/util/placement/placement.go`` l.20,
  ``api/jobset/v1alpha2/jobset_types.go`` l.380); the coordinator annotation
  ``jobset.sigs.k8s.io/coordinator`` (l.35, value from ``jobset_controller.go`` l.1374). JobSet
  sets no node count: the manifest passes ``NNODES`` (``ncclcheck k8s render`` does, with
  ``MASTER_ADDR`` from the coordinator annotation and ``MASTER_PORT``, and ``JOBSET_JOB_INDEX``
  from the ``jobset.sigs.k8s.io/job-index`` label, ``jobset_controller.go`` l.1029: a
  host-network pod's hostname is its node's).

Precedence, first match wins: MPIJob, PyTorchJob, TrainJob, LWS, JobSet. (Process launchers --
torchrun, DeepSpeed, mpirun, srun -- come before all of them, in
:func:`ncclcheck.k8s.launcher.detect_launcher`.)
"""

from __future__ import annotations

import re
from typing import Any

from ncclcheck.errors import BadInput

APIS = ("mpijob", "pytorchjob", "trainjob", "lws", "jobset")
#: Where the MPI operator mounts its hostfile, and the variables that name it.
MPI_HOSTFILE = "/etc/mpi/hostfile"
MPI_HOSTFILE_VARS = ("OMPI_MCA_orte_default_hostfile", "I_MPI_HYDRA_HOST_FILE", "HYDRA_HOST_FILE")
#: ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``
JOBSET_HOST = re.compile(r"^(?P<stem>[a-z0-9][-a-z0-9]*?)-(?P<job>\d+)-(?P<pod>\d+)$")
#: Variables the rendered manifests set from the downward API (pod and node names).
POD_VARS = {"pod": "POD_NAME", "namespace": "POD_NAMESPACE", "node": "NODE_NAME"}


def _int(environ: dict[str, str], name: str, api: str) -> int | None:
    value = environ.get(name, "")
    if value == "":
        return None
    if not value.isdigit():
        raise BadInput(f"inside a {api} pod: {name}={value[:40]!r} is not a whole number")
    return int(value)


def _job(api: str, **facts: Any) -> dict[str, Any]:
    out = {"api": api, "node_rank": None, "nnodes": None, "nproc_per_node": None,
           "master_addr": None, "master_port": None}
    out.update(facts)
    return out


def pod_job(environ: dict[str, str], hostname: str = "") -> dict[str, Any] | None:
    """The job API of this pod and what its controller says, or None outside such a pod.

    ``node_rank``/``nnodes`` are None when the API gives no node rank (an MPIJob pod: mpirun
    gives the ranks). :class:`BadInput` when a variable is there but not a number.

    >>> env = {"RANK": "1", "WORLD_SIZE": "16", "PET_NODE_RANK": "1", "PET_NNODES": "2",
    ...        "PET_NPROC_PER_NODE": "8", "MASTER_ADDR": "j-master-0", "MASTER_PORT": "23456"}
    >>> job = pod_job(env)
    >>> job["api"], job["node_rank"], job["nnodes"], job["nproc_per_node"], job["master_addr"]
    ('pytorchjob', 1, 2, 8, 'j-master-0')
    >>> pod_job({"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_NPROC_PER_NODE": "8",
    ...          "PET_MASTER_ADDR": "t-node-0-0.t", "PET_MASTER_PORT": "29400"})["api"]
    'trainjob'
    >>> job = pod_job({"LWS_LEADER_ADDRESS": "l-0.l.default", "LWS_GROUP_SIZE": "4",
    ...                "LWS_WORKER_INDEX": "3"})
    >>> job["api"], job["node_rank"], job["nnodes"], job["master_addr"]
    ('lws', 3, 4, 'l-0.l.default')
    >>> job = pod_job({"JOB_COMPLETION_INDEX": "1", "NNODES": "2"}, "js-node-0-1")
    >>> job["api"], job["node_rank"], job["nnodes"], job["master_addr"]
    ('jobset', 1, 2, 'js-node-0-0')
    >>> pod_job({"K_MPI_JOB_ROLE": "launcher"})["hostfile"]
    '/etc/mpi/hostfile'
    >>> pod_job({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a"}) is None
    True
    """
    role = environ.get("K_MPI_JOB_ROLE", "")
    if role in ("launcher", "worker"):
        named = next((environ[v] for v in MPI_HOSTFILE_VARS if environ.get(v)), MPI_HOSTFILE)
        return _job("mpijob", role=role, hostfile=named)
    if environ.get("PET_NNODES"):
        api = "pytorchjob" if environ.get("WORLD_SIZE") else "trainjob"
        nnodes_text = environ["PET_NNODES"]
        if ":" in nnodes_text:
            raise BadInput(f"inside an elastic {api} pod (PET_NNODES={nnodes_text}): the node "
                           "count is not fixed; run ncclcheck under torchrun")
        rank = _int(environ, "PET_NODE_RANK", api)
        if rank is None and api == "pytorchjob":
            rank = _int(environ, "RANK", api)
        nproc = environ.get("PET_NPROC_PER_NODE", "")
        return _job(api, node_rank=rank, nnodes=_int(environ, "PET_NNODES", api),
                    nproc_per_node=int(nproc) if nproc.isdigit() else None,
                    master_addr=environ.get("PET_MASTER_ADDR") or environ.get("MASTER_ADDR")
                    or None,
                    master_port=_int(environ, "PET_MASTER_PORT", api)
                    or _int(environ, "MASTER_PORT", api))
    if environ.get("LWS_LEADER_ADDRESS") and environ.get("LWS_GROUP_SIZE"):
        return _job("lws", node_rank=_int(environ, "LWS_WORKER_INDEX", "lws") or 0,
                    nnodes=_int(environ, "LWS_GROUP_SIZE", "lws"),
                    master_addr=environ["LWS_LEADER_ADDRESS"],
                    master_port=_int(environ, "MASTER_PORT", "lws"))
    first, _, domain = (hostname or environ.get("HOSTNAME", "")).partition(".")
    match = JOBSET_HOST.match(first)
    labelled = environ.get("JOBSET_JOB_INDEX", "") != ""  # host network: hostname is the node's
    if environ.get("JOB_COMPLETION_INDEX", "") != "" and (match or labelled):
        index = _int(environ, "JOB_COMPLETION_INDEX", "jobset")
        if labelled:
            job_index, pod_index = _int(environ, "JOBSET_JOB_INDEX", "jobset"), index
        else:
            job_index, pod_index = int(match["job"]), int(match["pod"])
            if pod_index != index:
                return None  # not a JobSet pod name: an Indexed Job with its own hostname
        if job_index and pod_index:
            raise BadInput(f"inside a JobSet pod ({first}): several Jobs of several pods each; "
                           "render one Job of N pods (ncclcheck k8s render --api jobset) or "
                           "one pod per Job")
        leader = (f"{match['stem']}-0-0" + (f".{domain}" if domain else "")) if match else None
        return _job("jobset", node_rank=job_index or pod_index,
                    nnodes=_int(environ, "NNODES", "jobset"),
                    master_addr=environ.get("MASTER_ADDR") or leader,
                    master_port=_int(environ, "MASTER_PORT", "jobset"),
                    job_index=job_index, pod_index=pod_index)
    return None


def node_identity(job: dict[str, Any] | None, environ: dict[str, str]) -> dict[str, Any]:
    """This pod's rank facts for a launcher: rank (the node's), world size (nodes), local rank
    0, rendezvous; :class:`BadInput` when the API left something out.

    >>> node_identity(pod_job({"LWS_LEADER_ADDRESS": "l-0.l", "LWS_GROUP_SIZE": "2",
    ...                        "LWS_WORKER_INDEX": "1"}), {})["world_size"]
    2
    """
    if job is None or job["node_rank"] is None:
        raise BadInput("no node rank in this pod's environment")
    if job["nnodes"] is None:
        raise BadInput(f"inside a {job['api']} pod: no node count; set NNODES (the manifest "
                       "`ncclcheck k8s render` writes sets it)")
    if not 0 <= job["node_rank"] < job["nnodes"]:
        raise BadInput(f"inside a {job['api']} pod: node rank {job['node_rank']} is not below "
                       f"the node count {job['nnodes']}")
    return {"rank": job["node_rank"], "world_size": job["nnodes"], "local_rank": 0,
            "master_addr": job["master_addr"], "master_port": job["master_port"]}


def pod_facts(environ: dict[str, str], hostname: str = "",
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``probe`` records of the pod: job API, pod, namespace, node, topology labels.

    >>> pod_facts({"POD_NAME": "p-0", "NODE_NAME": "gpu-7", "LWS_LEADER_ADDRESS": "l",
    ...            "LWS_GROUP_SIZE": "2"}, labels={"topology.kubernetes.io/zone": "z1",
    ...            "app": "x"})
    {'job_api': 'lws', 'pod': 'p-0', 'namespace': None, 'node': 'gpu-7', 'topology': {'topology.kubernetes.io/zone': 'z1'}}
    """
    try:
        job = pod_job(environ, hostname)
    except BadInput:
        job = None
    topology = {k: v for k, v in sorted((labels or {}).items()) if "topology" in k}
    facts = {"job_api": job["api"] if job else None}
    facts.update({k: environ.get(v) or None for k, v in POD_VARS.items()})
    facts["topology"] = topology
    return facts


def parse_downward_labels(text: str) -> dict[str, str]:
    """A downward API ``labels`` file (one ``key="value"`` a line, values quoted as Go does).

    >>> parse_downward_labels('app="x"\\ntopology.kubernetes.io/zone="us-c1-a"\\n')
    {'app': 'x', 'topology.kubernetes.io/zone': 'us-c1-a'}
    """
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and len(value) >= 2 and value[0] == value[-1] == '"':
            out[key.strip()] = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return out
