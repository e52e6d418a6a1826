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
    "named symbol not found": (
        "This NCCL build has no device code for the GPU's architecture: NCCL (or the PyTorch wheel "
        "that bundles it) was compiled with NVCC_GENCODE for other compute capabilities (an sm_80 "
        "build on H100, a CUDA 11.8 build on an sm_120 RTX 5090), so its kernels are not found.",
        "Install an NCCL / PyTorch build for this GPU (PyTorch's cu128 wheels for Blackwell), or "
        "rebuild NCCL with the GPU's arch in NVCC_GENCODE (-gencode=arch=compute_90,code=sm_90 "
        "for H100); `cuobjdump --list-elf libnccl.so | grep sm_` lists what a build holds."),
    "no kernel image": (
        "This NCCL build has no kernels for the GPU's architecture (compute capability).",
        "Install an NCCL (or PyTorch build) compiled for this GPU generation."),
    "out of memory": (
        "The GPU was out of memory when NCCL allocated its buffers. NCCL allocates device memory "
        "when a communicator is created and when it first connects to a peer (NCCL_BUFFSIZE, 4 MiB "
        "by default, per channel, peer and protocol; NVLS buffers of hundreds of MiB on NVSwitch "
        "systems), often after the framework has taken nearly all of the GPU (PyTorch's caching "
        "allocator, vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static).",
        "Leave room for NCCL: lower the framework's memory fraction (vLLM --gpu-memory-utilization, "
        "SGLang --mem-fraction-static), or create the communicators and run one collective before "
        "allocating the model; or shrink NCCL's share: NCCL_NVLS_ENABLE=0 on NVSwitch systems, "
        "NCCL_BUFFSIZE=2097152, fewer channels (NCCL_MAX_NCHANNELS)."),
}


def _cuda_detail(m: re.Match[str]) -> Optional[Detail]:
    if "nvls.cc" in m.string:
        return None                              # reported as log-nvls-failure
    if m.groupdict().get("bytes"):
        size = int(m.group("bytes"))
        cause, fix = _CUDA_CAUSES["out of memory"]
        return Detail(message=f"NCCL could not allocate {size} bytes ({size / 2 ** 20:.1f} MiB) "
                              "of GPU memory (out of memory)", variant="'out of memory'",
                      cause=cause, fix=fix)
    code, text = m.groupdict().get("code"), m.groupdict().get("text") or m.group(0)
    cause = fix = ""
    for key, (c, f) in _CUDA_CAUSES.items():
        if key == code or key in text:
            cause, fix = c, f
            break
    label = f"{code + ' ' if code else ''}'{text}'" if m.groupdict().get("text") else text
    if not cause and m.groupdict().get("text"):   # the CUDA error's own words beat torch's summary
        cause = f"A CUDA runtime or driver call made by NCCL failed with {label}."
    return Detail(message=f"NCCL reported a CUDA failure: {label}", variant=label[:60],
                  cause=cause, fix=fix)


CUDA_ERROR = Signature(
    id="log-cuda-error",
    title="a CUDA call inside NCCL failed",
    severity="error",
    cause="A CUDA runtime or driver call made by NCCL failed; the CUDA error names the reason.",
    fix="Read the CUDA error: check the driver and CUDA versions, GPU visibility and memory; run "
        "with CUDA_LAUNCH_BLOCKING=1 to find the failing call.",
    docs=f"{NCCL_ENV}#nccl-cumem-host-enable; {NCCL_ENV}#nccl-buffsize; {NCCL_ENV}#nccl-nvls-enable; "
         "src/include/checks.h (CUDACHECK); src/include/alloc.h (ncclCudaCalloc); "
         "https://github.com/NVIDIA/nccl/issues/1838; https://github.com/NVIDIA/nccl/issues/1372",
    patterns=compile_all(r"Cuda failure (?:(?P<code>\d+) )?'(?P<text>[^']*)'",
                         r"Failed to CUDA (?:calloc|malloc)(?: async)? (?P<bytes>\d{1,16}) bytes",
                         r"unhandled cuda error|ncclUnhandledCudaError"),
    keywords=("Cuda failure", "unhandled cuda error", "ncclUnhandledCudaError", "Failed to CUDA"),
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
