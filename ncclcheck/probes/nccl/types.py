"""The ``nccl`` section's shapes, and the names and folders NCCL's files go by."""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict


#: File names of the NCCL library itself.
LIB_NAME = re.compile(r"^libnccl\.so(\.\d+)*$")
#: File names of NCCL plugins: net, tuner, profiler, env, gin (src/plugin/plugin_open.cc).
PLUGIN_NAME = re.compile(r"^libnccl-[A-Za-z0-9_.+-]+\.so(\.\d+)*$")
#: The soname programs link against.
SONAME = "libnccl.so.2"
#: Folders the dynamic loader searches without a cache entry (glibc's trusted folders).
TRUSTED_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu",
                "usr/lib/aarch64-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib")
#: Where Python installs live, besides what the running interpreter reports.
PYTHON_BASES = ("usr/lib", "usr/local/lib", "usr/lib64", "usr/local/lib64", "opt/conda/lib")
#: Folders where plugins and hand-installed NCCL builds usually live.
EXTRA_DIRS = ("usr/local/lib", "opt/amazon/ofi-nccl/lib", "opt/amazon/ofi-nccl/lib64",
              "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "opt/aws-ofi-nccl/lib",
              "opt/amazon/aws-ofi-nccl/lib",
              # Google Cloud: gIB (A3 Ultra, A4), GPUDirect-TCPX (A3 High), TCPXO/FasTrak (A3 Mega)
              "usr/local/gib/lib64", "usr/local/tcpx/lib64", "usr/local/nvidia/lib64")
#: Folders of a CUDA install, relative to /usr/local/cuda*.
CUDA_SUBDIRS = ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
#: Config files NCCL reads (src/misc/param.cc initEnvFunc).
SYSTEM_CONF = "/etc/nccl.conf"


class Library(TypedDict):
    """One libnccl file (several paths may name it: ``aliases``)."""

    path: str                     # the libnccl.so.2 path found first, else the first path
    realpath: str                 # symlinks resolved inside the root
    aliases: list[str]            # other paths to the same file
    found_via: list[str]          # "LD_PRELOAD", "site-packages", "torch-lib", "LD_LIBRARY_PATH",
                                  # "ldconfig", "lib-dir", "cuda-dir", "NCCL_HOME", "opt-dir"
    version: Optional[str]        # "2.21.5", from ncclGetVersion
    version_code: Optional[int]   # 22105
    file_version: Optional[str]   # from the file name libnccl.so.2.21.5, when it has one
    error: Optional[str]          # why no version: not loadable, not NCCL, crashed, ...


class Torch(TypedDict):
    """torch as installed in one site-packages folder."""

    version: Optional[str]             # "2.4.1+cu121" (torch/version.py), else METADATA
    cuda: Optional[str]                # "12.1"; None for a CPU-only build
    git_version: Optional[str]
    path: str                          # ".../site-packages/torch"
    site_packages: str
    nccl_requirement: Optional[str]    # "nvidia-nccl-cu12==2.20.5" from Requires-Dist
    nccl_wheel: Optional[str]          # "nvidia-nccl-cu12" installed beside torch
    nccl_wheel_version: Optional[str]  # "2.20.5"


class Choice(TypedDict):
    """Which file a loader would pick, and why."""

    path: Optional[str]
    version: Optional[str]
    reason: str


class Plugin(TypedDict):
    """One NCCL plugin file."""

    path: str
    realpath: str
    name: str          # file name, "libnccl-net.so"
    kind: str          # "net", "tuner", "profiler", "env", "gin" or "other"
    found_via: list[str]


class ConfigFile(TypedDict):
    """One NCCL config file, in the order NCCL reads them."""

    path: str
    source: str                  # "NCCL_CONF_FILE", "home" or "system"
    values: dict[str, str]       # NAME -> value, exactly as NCCL would set them
    problems: list[str]          # lines NCCL reads differently from what they seem to say


class NcclData(TypedDict):
    """The ``nccl`` section's data."""

    libraries: list[Library]
    versions: list[str]                   # distinct versions, oldest first
    torch: Optional[Torch]
    torch_loads: Optional[Choice]
    system_loads: Optional[Choice]        # what the loader gives a program linked to libnccl.so.2
    net_plugins: list[Plugin]
    net_plugin: Choice                    # what NCCL's net plugin loader would open
    ibverbs: dict[str, Any]               # {"loaded", "path", "error", "devices", "providers", ...}
    config_files: list[ConfigFile]
    conf_env: dict[str, str]              # merged values; the first file read wins
    python: Optional[dict[str, Any]]      # the interpreter that was asked (python_paths)
    torch_nccl: Optional[dict[str, Any]]  # {"version", "error"}: torch.cuda.nccl.version(), asked
