"""GPU assignment and peer access (§9 rows 17-18)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import Detail, Signature, compile_all


def _duplicate_detail(m: re.Match[str]) -> Detail:
    if m.lastindex and m.lastindex >= 3:
        return Detail(message=f"ranks {m.group(1)} and {m.group(2)} are both on the GPU with bus id "
                              f"{m.group(3)}", rank=int(m.group(1)))
    return Detail(message="several ranks use the same GPU")


DUPLICATE_GPU = Signature(
    id="log-duplicate-gpu",
    title="two ranks on the same GPU",
    severity="error",
    cause="Two processes of one communicator opened the same CUDA device: the script does not call "
          "torch.cuda.set_device(LOCAL_RANK) (or sets it after the process group is created), "
          "CUDA_VISIBLE_DEVICES hides all but one GPU, or a device index is hard-coded.",
    fix="Select the device from LOCAL_RANK before init_process_group "
        "(torch.cuda.set_device(int(os.environ['LOCAL_RANK']))); check CUDA_VISIBLE_DEVICES and "
        "--nproc-per-node against the GPUs the node really has.",
    docs="src/init.cc (Duplicate GPU detected); https://github.com/pytorch/torchtitan/issues/1224",
    patterns=compile_all(r"Duplicate GPU detected : rank (\d{1,9}) and rank (\d{1,9}) both on CUDA device (\w+)",
                         r"Multiple Ranks are using the same GPU"),
    keywords=("Duplicate GPU", "same GPU"),
    explain=_duplicate_detail)

P2P_DISABLED_NVLINK = Signature(
    id="gpu-p2p-unsupported",
    title="P2P disabled between NVLink-connected GPUs",
    severity="warning",
    cause="NVML reports peer-to-peer as unavailable between GPUs that are linked by NVLink, which "
          "points at a hardware, driver or fabric-manager problem; NCCL then routes through host "
          "memory.",
    fix="Check nvidia-fabricmanager and NVLink health (nvidia-smi nvlink -s, dcgmi diag); only set "
        "NCCL_IGNORE_DISABLED_P2P=1 knowingly.",
    docs="src/graph/paths.cc",
    patterns=compile_all(r"P2P is disabled between NVLINK connected GPUs"),
    keywords=("P2P is disabled",))

SIGNATURES = (DUPLICATE_GPU, P2P_DISABLED_NVLINK)
