"""Who started us and what a rank's environment is: launcher detection, ranks, NCCL logs (pure).

Inside torchrun, ``srun``, ``mpirun`` or DeepSpeed's launcher, ``ncclcheck bench`` acts as the
rank it was given and spawns nothing. The variables each launcher sets:

* torchrun / torch.distributed.run: ``TORCHELASTIC_RUN_ID``, ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``;
* DeepSpeed's launcher (deepspeed/launcher/launch.py): the same five plus ``CROSS_RANK``;
* Slurm ``srun``: ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_STEP_ID``,
  ``SLURM_STEP_NODELIST``;
* Open MPI: ``OMPI_COMM_WORLD_RANK``/``_SIZE``/``_LOCAL_RANK``; MPICH / Intel MPI: ``PMI_RANK``,
  ``PMI_SIZE``, ``MPI_LOCALRANKID``;
* a Kubernetes pod of a PyTorchJob, TrainJob, LeaderWorkerSet or JobSet without a process
  launcher: one rank per node, from the variables its controller sets
  (:mod:`ncclcheck.k8s.podenv`, each with its source line).

Which launcher it is: :func:`ncclcheck.k8s.launcher.detect_launcher` (the one precedence,
shared with probe and rank); here, what its variables say.
"""

from __future__ import annotations

import re
from typing import Any

from ncclcheck.errors import BadInput
from ncclcheck.k8s.launcher import POD_LAUNCHERS, detect_launcher
from ncclcheck.k8s.podenv import node_identity, pod_job

DEFAULT_MASTER_PORT = 29500


def rank_env(environ: dict[str, str], launcher: str | None = None) -> dict[str, Any]:
    """Rank, world size, local rank and rendezvous address from a launcher's variables (in a
    Kubernetes pod without a process launcher: this node's rank among the nodes).

    >>> ident = rank_env({"RANK": "1", "WORLD_SIZE": "16", "MASTER_ADDR": "m",
    ...                   "PET_NODE_RANK": "1", "PET_NNODES": "2", "PET_NPROC_PER_NODE": "8"})
    >>> ident["rank"], ident["world_size"], ident["local_rank"]
    (1, 2, 0)

    >>> ident = rank_env({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
    ...                   "OMPI_COMM_WORLD_LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1"})
    >>> ident["rank"], ident["world_size"], ident["local_rank"], ident["master_addr"]
    (3, 4, 1, '10.0.0.1')
    """
    def first(*names: str) -> str | None:
        for name in names:
            if environ.get(name, "") != "":
                return environ[name]
        return None

    launcher = launcher or detect_launcher(environ)
    if launcher in POD_LAUNCHERS:
        return node_identity(pod_job(environ), environ)
    rank = first("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
    world = first("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    local = first("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
    if rank is None or world is None:
        raise BadInput("no rank and world size in the environment")
    try:
        return {"rank": int(rank), "world_size": int(world), "local_rank": int(local or 0),
                "master_addr": environ.get("MASTER_ADDR") or None,
                "master_port": environ.get("MASTER_PORT") or None}
    except ValueError:
        raise BadInput(f"launcher variables are not numbers: rank {rank!r}, "
                       f"world size {world!r}, local rank {local!r}") from None


def first_slurm_host(nodelist: str) -> str | None:
    """The first host of a Slurm node list (``node[01-04,07],gpu-a`` -> ``node01``).

    >>> first_slurm_host("node[01-04,07],gpu-a"), first_slurm_host("gpu-a,gpu-b")
    ('node01', 'gpu-a')
    """
    match = re.match(r"^([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        return None
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def rendezvous(environ: dict[str, str], launcher: str, master_addr: str | None,
               master_port: int | None) -> tuple[str, int]:
    """The TCPStore address ranks meet at inside a launcher: options, then the environment.

    >>> rendezvous({"SLURM_STEP_NODELIST": "gpu[3-4]"}, "slurm", None, None)
    ('gpu3', 29500)
    >>> rendezvous({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "2"}, "mpi",
    ...            None, None)
    ('127.0.0.1', 29500)
    """
    job = pod_job(environ) if launcher in POD_LAUNCHERS else None
    addr = master_addr or (job and job["master_addr"]) or environ.get("MASTER_ADDR")
    local, world = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE"), environ.get("OMPI_COMM_WORLD_SIZE")
    if not addr and launcher == "mpi" and local and local == world:
        addr = "127.0.0.1"  # every rank on this node: no flag needed
    if not addr and launcher == "slurm":
        addr = first_slurm_host(environ.get("SLURM_STEP_NODELIST")
                                or environ.get("SLURM_JOB_NODELIST", ""))
    if not addr:
        raise BadInput(f"inside {launcher}: no rendezvous address; set MASTER_ADDR or pass "
                       "--master-addr (an address every rank can reach)")
    port = (master_port or (job and job["master_port"]) or environ.get("MASTER_PORT")
            or DEFAULT_MASTER_PORT)
    try:
        return addr, int(port)
    except ValueError:
        raise BadInput(f"MASTER_PORT={port!r} is not a port number") from None


def nccl_debug_env(environ: dict[str, str], log_dir: str) -> dict[str, str]:
    """Variables that make NCCL log what :mod:`~ncclcheck.bench.transport` reads, per rank.

    ``NCCL_DEBUG`` becomes INFO (TRACE is kept), the log goes to ``<dir>/nccl.%h.%p`` (NCCL
    fills host and pid), and ``NCCL_DEBUG_SUBSYS``, when the user set it, gains INIT, NET, ENV.

    >>> nccl_debug_env({"NCCL_DEBUG_SUBSYS": "TUNING"}, "/tmp/x")["NCCL_DEBUG_SUBSYS"]
    'TUNING,INIT,NET,ENV'
    >>> sorted(nccl_debug_env({}, "/tmp/x").items())
    [('NCCL_DEBUG', 'INFO'), ('NCCL_DEBUG_FILE', '/tmp/x/nccl.%h.%p')]
    """
    env = {"NCCL_DEBUG": "TRACE" if environ.get("NCCL_DEBUG", "").upper() == "TRACE" else "INFO",
           "NCCL_DEBUG_FILE": f"{log_dir.rstrip('/')}/nccl.%h.%p"}
    subsys = environ.get("NCCL_DEBUG_SUBSYS", "")
    if subsys and not subsys.startswith("^") and subsys.upper() != "ALL":
        have = {s.strip().upper() for s in subsys.split(",")}
        env["NCCL_DEBUG_SUBSYS"] = ",".join([subsys] + [s for s in ("INIT", "NET", "ENV")
                                                        if s not in have])
    return env
