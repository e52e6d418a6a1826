"""Launcher detection, rank variables, rendezvous address, NCCL log variables."""

from __future__ import annotations

import pytest

from ncclcheck.bench.environ import first_slurm_host, nccl_debug_env, rank_env, rendezvous
from ncclcheck.errors import BadInput
from ncclcheck.k8s.launcher import detect_launcher

TORCHRUN = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}
DEEPSPEED = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "10.0.0.1",
             "MASTER_PORT": "29500", "CROSS_RANK": "0"}
SRUN = {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": "gpu-[07-08]", "SLURM_JOB_ID": "1234"}
OMPI = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
MPICH = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}


@pytest.mark.parametrize("env, launcher, rank, world, local", [
    (TORCHRUN, "torchrun", 1, 2, 1), (DEEPSPEED, "deepspeed", 3, 8, 3),
    (SRUN, "slurm", 5, 16, 5), (OMPI, "mpi", 2, 4, 0), (MPICH, "mpi", 1, 2, 1),
])
def test_each_launcher_is_recognised(env, launcher, rank, world, local):
    assert detect_launcher(env) == launcher
    ident = rank_env(env)
    assert (ident["rank"], ident["world_size"], ident["local_rank"]) == (rank, world, local)


def test_by_hand_or_in_a_batch_script_is_no_launcher():
    assert detect_launcher({}) is None
    assert detect_launcher({"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None
    assert detect_launcher({"RANK": "0"}) is None


def test_rendezvous_address():
    assert rendezvous(TORCHRUN, "torchrun", None, None) == ("127.0.0.1", 29500)
    assert rendezvous(SRUN, "slurm", None, 1234) == ("gpu-07", 1234)
    assert rendezvous(OMPI, "mpi", "10.0.0.9", None) == ("10.0.0.9", 29500)
    with pytest.raises(BadInput, match="set MASTER_ADDR or pass --master-addr"):
        rendezvous(OMPI, "mpi", None, None)
    assert first_slurm_host("a[1-3],b") == "a1"


def test_nccl_logs_to_a_file_per_process():
    env = nccl_debug_env({"NCCL_DEBUG": "WARN"}, "/tmp/logs/")
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/tmp/logs/nccl.%h.%p"}
    assert nccl_debug_env({"NCCL_DEBUG": "trace"}, "/x")["NCCL_DEBUG"] == "TRACE"
    assert nccl_debug_env({"NCCL_DEBUG_SUBSYS": "INIT,COLL"}, "/x")["NCCL_DEBUG_SUBSYS"] == \
        "INIT,COLL,NET,ENV"
    assert "NCCL_DEBUG_SUBSYS" not in nccl_debug_env({"NCCL_DEBUG_SUBSYS": "ALL"}, "/x")
