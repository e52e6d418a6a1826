"""CUDA failures inside NCCL, NVLink SHARP (NVLS) and multi-node NVLink (§9 rows 24, 26; NVLS)."""

from __future__ import annotations

import re
from typing import Optional

from ncclcheck.signatures.base import NCCL_ENV, Detail, Signature, compile_all

_CUDA_CAUSES = {
    "217": ("cuMem host-memory sharing between GPUs without P2P access (NCCL 2.27-era default).",
            "Set NCCL_CUMEM_HOST_ENABLE=0 on every rank, or upgrade NCCL."),
    "peer access is not supported": (
        "cuMem host-memory sharing between GPUs without P2P access (NCCL 2.27-era default).",
        "Set NCCL_CUMEM_HOST_ENABLE=0 on every rank, or upgrade NCCL."),
    "800": ("No write access to the IMEX channel (/dev/nvidia-caps-imex-channels) that multi-node "
            "NVLink needs.", "Fix the IMEX daemon and the channel device permissions "
            "(nvidia-imex-ctl -H -N), or disable MNNVL (NCCL_MNNVL_ENABLE=0)."),
    "invalid device function": (
        "This NCCL build has no kernels for the GPU's architecture (compute capability).",
        "Install an NCCL (or PyTorch build) compiled for this GPU generation."),
    "initialization error": (
        "CUDA could not initialize in this process: a driver/runtime mismatch, a process forked "
        "after CUDA was initialized, or GPUs not visible inside the container.",
        "Check nvidia-smi and the driver version inside the job's environment; start workers with "
        "'spawn' rather than 'fork' after CUDA use."),
    "out of memory": ("The GPU ran out of memory while NCCL allocated its buffers.",
                      "Free GPU memory before creating communicators, or reduce NCCL_BUFFSIZE / "
                      "the number of channels."),
}


def _cuda_detail(m: re.Match[str]) -> Optional[Detail]:
    if "nvls.cc" in m.string:
        return None                              # reported as log-nvls-failure
    code, text = m.groupdict().get("code"), m.groupdict().get("text") or m.group(0)
    cause = fix = ""
    for key, (c, f) in _CUDA_CAUSES.items():
        if key == code or key in text:
            cause, fix = c, f
            break
    label = f"{code + ' ' if code else ''}'{text}'" if m.groupdict().get("text") else text
    return Detail(message=f"NCCL reported a CUDA failure: {label}", variant=label[:60],
                  cause=cause, fix=fix)


CUDA_ERROR = Signature(
    id="log-cuda-error",
    title="a CUDA call inside NCCL failed",
    severity="error",
    cause="A CUDA runtime or driver call made by NCCL failed; the CUDA error names the reason.",
    fix="Read the CUDA error: check the driver and CUDA versions, GPU visibility and memory; run "
        "with CUDA_LAUNCH_BLOCKING=1 to find the failing call.",
    docs=f"{NCCL_ENV}#nccl-cumem-host-enable; src/include/checks.h (CUDACHECK); "
         "https://github.com/NVIDIA/nccl/issues/1838",
    patterns=compile_all(r"Cuda failure (?:(?P<code>\d+) )?'(?P<text>[^']*)'",
                         r"unhandled cuda error|ncclUnhandledCudaError"),
    keywords=("Cuda failure", "unhandled cuda error", "ncclUnhandledCudaError"),
    explain=_cuda_detail)


def _nvls_detail(m: re.Match[str]) -> Detail:
    return Detail(message=f"NVLink SHARP (NVLS) setup failed: {m.group('what').strip()[:120]}")


NVLS_FAILURE = Signature(
    id="log-nvls-failure",
    title="NVLink SHARP (NVLS) multicast setup failed",
    severity="error",
    cause="NCCL uses NVSwitch multicast (NVLS) on Hopper+ NVSwitch systems; allocating or binding "
          "multicast memory failed, usually because the fabric manager / NVSwitch state is not "
          "healthy, the driver is too old, or multicast objects are exhausted.",
    fix="Check nvidia-fabricmanager and that nvbandwidth/nvloom multicast tests pass; work around "
        "with NCCL_NVLS_ENABLE=0 (costs some all-reduce bandwidth).",
    docs=f"{NCCL_ENV}#nccl-nvls-enable; src/transport/nvls.cc; "
         "https://github.com/NVIDIA/nccl/issues/1788; https://github.com/NVIDIA/nccl/issues/1672",
    patterns=compile_all(r"nvls\.cc:\d+ NCCL WARN (?P<what>.*)"),
    keywords=("nvls.cc",),
    explain=_nvls_detail)

SIGNATURES = (NVLS_FAILURE, CUDA_ERROR)
