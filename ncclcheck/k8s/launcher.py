"""Who started this process: the one launcher detection that probe, bench and rank share (pure).

Precedence, first match wins (README "Kubernetes"). Each rule names the source line that sets
its variables:

1. ``torchrun``: ``TORCHELASTIC_RUN_ID`` with ``RANK``, ``WORLD_SIZE`` (torch v2.13.0
   ``torch/distributed/elastic/agent/server/local_elastic_agent.py`` l.416-428, the worker env);
2. ``deepspeed``: ``CROSS_RANK`` with ``RANK``, ``WORLD_SIZE`` (DeepSpeed v0.19.5
   ``deepspeed/launcher/launch.py`` l.190-191);
3. ``pytorchjob``: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` with ``PET_NNODES``: a PyTorchJob
   pod without torchrun, whose ``WORLD_SIZE`` counts nodes x ``nprocPerNode`` (kubeflow/
   training-operator v1.9.0 ``pkg/controller.v1/pytorch/envvar.go`` l.62-64, 85-96, 117-122);
   it is node ``PET_NODE_RANK`` of ``PET_NNODES`` (:mod:`ncclcheck.k8s.podenv`);
4. ``torchrun`` again for plain torch.distributed: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, what
   ``init_process_group("env://")`` reads (torch v2.13.0 ``torch/distributed/rendezvous.py``
   l.269-277);
5. ``mpi``: ``OMPI_COMM_WORLD_RANK``/``_SIZE`` (Open MPI v4.1.8
   ``orte/mca/schizo/ompi/schizo_ompi.c`` l.1013, 1246) or ``PMI_RANK``/``PMI_SIZE`` (MPICH
   v4.3.2 Hydra, ``src/pm/hydra/proxy/pmip_cb.c`` l.960, 982; Intel MPI's mpirun is Hydra);
6. ``slurm``: an srun step, ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_STEP_ID`` (Slurm
   slurm-25-11-7-1 ``src/common/env.c`` l.698, 710);
7. a Kubernetes job API's pod that gives a node rank, without a process launcher:
   ``trainjob``, ``lws``, ``jobset`` (and ``pytorchjob`` with ``PET_*`` only), read by
   :func:`ncclcheck.k8s.podenv.pod_job`, which cites each controller's line (an MPIJob pod is none:
   mpirun gives its ranks, rule 5);
8. only when asked (``allocation=True``: ``probe`` records the context it runs in): ``slurm`` for a
   Slurm allocation outside a step, ``SLURM_JOB_ID`` (``src/common/env.c`` l.645). ``bench``
   and ``rank`` never take an allocation for a launcher: there they start the ranks with srun.
"""

from __future__ import annotations

from ncclcheck.k8s.podenv import pod_job

#: Launchers that are a Kubernetes job API: one rank per node, from :mod:`ncclcheck.k8s.podenv`.
POD_LAUNCHERS = ("pytorchjob", "trainjob", "lws", "jobset")


def detect_launcher(environ: dict[str, str], hostname: str = "",
                    allocation: bool = False) -> str | None:
    """Which launcher started this process (the precedence above), or None when run by hand.
    :class:`~ncclcheck.errors.BadInput` when a pod's variable is there but not a number.

    >>> detect_launcher({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2"})
    'torchrun'
    >>> detect_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0"})
    'slurm'
    >>> detect_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "7"}) is None
    True
    >>> detect_launcher({"SLURM_JOB_ID": "7"}, allocation=True)
    'slurm'
    >>> detect_launcher({"RANK": "0", "WORLD_SIZE": "16", "MASTER_ADDR": "m", "PET_NNODES": "2"})
    'pytorchjob'
    >>> detect_launcher({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "m"})
    'trainjob'
    """
    def has(*names: str) -> bool:
        return all(environ.get(n, "") != "" for n in names)

    if has("RANK", "WORLD_SIZE"):
        if has("TORCHELASTIC_RUN_ID"):
            return "torchrun"
        if has("CROSS_RANK"):
            return "deepspeed"
        if has("MASTER_ADDR"):
            return "pytorchjob" if has("PET_NNODES") else "torchrun"
    if has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") or has("PMI_RANK", "PMI_SIZE"):
        return "mpi"
    if has("SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"):
        return "slurm"
    job = pod_job(environ, hostname)
    if job and job["api"] in POD_LAUNCHERS and job["node_rank"] is not None:
        return job["api"]
    if allocation and has("SLURM_JOB_ID"):
        return "slurm"
    return None
