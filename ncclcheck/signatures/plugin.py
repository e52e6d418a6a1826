"""Network plugins that fail to load or initialize (§9 row 9, §2.6, row 28)."""

from __future__ import annotations

import re
from typing import Optional

from ncclcheck.signatures.base import NCCL_ENV, Detail, Signature, compile_all

DEFAULT_PLUGIN_NAMES = ("libnccl-net.so",)


def _plugin_detail(m: re.Match[str]) -> Optional[Detail]:
    text = m.group(0)
    if "Failed to initialize any NET plugin" in text:
        return Detail(message="no network plugin could be initialized (NCCL_NET names a network "
                              "that failed, or none works)", variant="none initialized")
    groups = m.groupdict()
    if groups.get("net"):
        return Detail(message=f"NCCL_NET asks for network '{groups['net']}', which is not available",
                      variant=f"network {groups['net']}")
    if "v4 and lower are not supported" in text:
        return Detail(message="a libnccl-net.so plugin is installed but its API version is too old "
                              "for this NCCL, so it was ignored",
                      variant="plugin too old", severity="warning",
                      cause="The plugin library found on the library path only exports an old "
                            "ncclNetPlugin interface that this NCCL no longer accepts; NCCL "
                            "silently uses its internal transports instead, which can differ from "
                            "nodes where the plugin loads.",
                      fix="Install a plugin built for this NCCL version on every node, or remove it "
                          "everywhere (NCCL_NET_PLUGIN=none) so all ranks use the same transport.")
    if "is unsupported" in text:
        return Detail(message=f"network plugin {groups.get('name')} is unsupported by this NCCL",
                      variant="unsupported")
    lib = groups.get("lib") or ""
    if "undefined symbol" not in text and lib.rsplit("/", 1)[-1] in DEFAULT_PLUGIN_NAMES:
        return None                      # the default probe for an optional plugin: normal
    return Detail(message=f"network plugin {lib} could not be loaded ({text[-80:].strip()})",
                  variant=f"load {lib}", severity="warning")


NET_PLUGIN_FAILED = Signature(
    id="log-net-plugin-failed",
    title="a network plugin failed to load or initialize",
    severity="error",
    cause="NCCL tries external net plugins (NCCL_NET_PLUGIN, else libnccl-net.so), then its internal "
          "IB and Socket transports. NCCL_NET forces one of them by name; when it (or a requested "
          "plugin) cannot load, init fails or ranks end up on different transports.",
    fix="Check that the plugin library named by NCCL_NET_PLUGIN exists on LD_LIBRARY_PATH on every "
        "node and was built for this NCCL; check the spelling of NCCL_NET (IB, Socket, or the "
        "plugin's own name); unset NCCL_NET to let NCCL choose.",
    docs=f"{NCCL_ENV}#nccl-net; {NCCL_ENV}#nccl-net-plugin; src/plugin/net.cc; "
         "https://github.com/NVIDIA/nccl/issues/1267",
    patterns=compile_all(
        r"Failed to initialize any NET plugin",
        r"Error: network (?P<net>.+?) not found",
        r"ncclNetPlugin symbols v4 and lower are not supported",
        r"External network plugin (?P<name>\S+) is unsupported",
        r"NET/Plugin ?: Plugin load (?:\(\S+\) )?returned \d+ : (?P<lib>\S+?):? (?:cannot open|undefined symbol)"
        r".*"),
    keywords=("NET plugin", "Error: network", "v4 and lower", "is unsupported", "Plugin load"),
    scope="info",
    info_starts=("NET/Plugin", "External network plugin"),
    explain=_plugin_detail)


def _efa_detail(m: re.Match[str]) -> Detail:
    return Detail(message="the AWS OFI plugin could not register GPU memory with EFA")


EFA_REGISTER_FAILED = Signature(
    id="log-efa-register-failed",
    title="EFA could not register memory (old efa-installer with newer NCCL)",
    severity="error",
    cause="efa-installer older than 1.29.1 combined with NCCL >= 2.19 fails memory registration "
          "of type 2 (CUDA) with EINVAL.",
    fix="Upgrade the EFA installer (>= 1.29.1) or set FI_EFA_SET_CUDA_SYNC_MEMOPS=0.",
    docs="https://github.com/aws-samples/awsome-distributed-training (1.architectures/efa-cheatsheet.md)",
    patterns=compile_all(r"NET/OFI Unable to register memory \(type = \d+\)"),
    keywords=("Unable to register memory",),
    explain=_efa_detail)

EFA_FORK_ENOMEM = Signature(
    id="log-efa-fork-enomem",
    title="fork() failed with ENOMEM on an EFA node (libfabric huge pages)",
    severity="error",
    cause="On AWS EFA, libfabric backs its buffers with huge pages; a process that forks (PyTorch "
          "DataLoader workers, subprocess) can run out of them, and os.fork() fails with "
          "'OSError: [Errno 12] Cannot allocate memory' although free memory looks plentiful.",
    fix="Set FI_EFA_USE_HUGE_PAGE=0 for the job (slightly slower EFA registration), or fork the "
        "workers before the process group and its EFA endpoints are created.",
    docs="https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md (FI_EFA_USE_HUGE_PAGE)",
    patterns=compile_all(r"OSError: \[Errno 12\] Cannot allocate memory"),
    keywords=("[Errno 12]",),
    explain=lambda m: Detail(message="a Python call (typically os.fork) failed with ENOMEM while "
                                     "the job runs over EFA"))

SIGNATURES = (NET_PLUGIN_FAILED, EFA_REGISTER_FAILED, EFA_FORK_ENOMEM)
