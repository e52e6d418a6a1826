"""The allow-listed environment: which variables a probe may copy, credentials hidden."""

from __future__ import annotations

import re

#: Environment variables a probe may copy, besides the prefixes below. Launcher and scheduler
#: variables tell ``host`` which context it runs in; the library paths decide which libnccl loads.
ENV_ALLOW_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
    "LD_LIBRARY_PATH", "LD_PRELOAD",
    "GLOO_SOCKET_IFNAME", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NODEID", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_STEP_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
    "MPI_LOCALNRANKS",  # MPICH/Hydra's ranks on this node (with PMI_SIZE: the job spans nodes)
    "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE",  # DeepSpeed's launcher (deepspeed/launcher/launch.py)
    "KUBERNETES_SERVICE_HOST", "container",
    # Kubernetes job APIs (ncclcheck/k8s/podenv.py cites each controller's line)
    "K_MPI_JOB_ROLE", "OMPI_MCA_orte_default_hostfile", "I_MPI_HYDRA_HOST_FILE", "HYDRA_HOST_FILE",
    "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT",
    "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX", "JOB_COMPLETION_INDEX", "NNODES",
    "JOBSET_JOB_INDEX",
    "POD_NAME", "POD_NAMESPACE", "NODE_NAME",
})
#: Every variable with one of these prefixes is copied: they are NCCL's and PyTorch's own knobs.
ENV_ALLOW_PREFIXES = ("NCCL_", "TORCH_NCCL_")


def env_allowed(name: str) -> bool:
    """Whether ``name`` may be copied from the environment into facts.

    >>> env_allowed("NCCL_IB_HCA"), env_allowed("AWS_SECRET_ACCESS_KEY"), env_allowed("RANK")
    (True, False, True)
    """
    return name in ENV_ALLOW_NAMES or name.startswith(ENV_ALLOW_PREFIXES)


#: ``user:secret@`` in a value (``redis://user:secret@host``, ``admin:pw@10.0.0.1``): the secret
#: runs to the ``@``, so an unencoded ``/`` or ``:`` in it is hidden too.
CREDENTIALS = re.compile(r"(?P<user>[^\s:/@,;=]+):(?!//)(?P<secret>[^\s@]*)@")


def hide_credentials(value: str) -> str:
    """``value`` with the secret of every ``user:secret@`` replaced by ``***``.

    An allow-listed variable may still hold a URL with credentials (``MASTER_ADDR`` given as a
    store URL, say); the name and host stay, the secret never reaches facts or a recording.

    >>> hide_credentials("tcp://admin:s3cr:et/x@10.0.0.1:29500"), hide_credentials("node-01")
    ('tcp://admin:***@10.0.0.1:29500', 'node-01')
    >>> hide_credentials("=mlx5_0:1,mlx5_1:1"), hide_credentials("bob@node-01")
    ('=mlx5_0:1,mlx5_1:1', 'bob@node-01')
    """
    return CREDENTIALS.sub(lambda m: f"{m.group('user')}:***@", value)


def filter_environ(env: dict[str, str]) -> dict[str, str]:
    """Return only the allow-listed variables of ``env``, sorted by name, credentials hidden."""
    return {k: hide_credentials(env[k]) for k in sorted(env) if env_allowed(k)}

