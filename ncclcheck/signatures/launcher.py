"""What the MPI launcher (not NCCL) prints when its own network or PMIx setup fails (§9 row 30)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import NCCL_TROUBLESHOOTING, Detail, Signature, compile_all


def _launcher_detail(m: re.Match[str]) -> Detail:
    groups = m.groupdict()
    if groups.get("dev") is not None:
        return Detail(
            message=f"UCX (the MPI transport) cannot use network device '{groups['dev']}'",
            variant="ucx device",
            cause="UCX_NET_DEVICES (or UCX's default) names a device that is not available in "
                  "this process: not passed into the container, down, or misspelt. MPI then "
                  "fails or falls back; NCCL is not involved.",
            fix="Set UCX_NET_DEVICES to a device that exists on every node (the same NIC NCCL "
                "uses, e.g. mlx5_0:1), or use Open MPI's TCP path with "
                "OMPI_MCA_btl_tcp_if_include=<that NIC>.")
    return Detail(
        message="PMIx could not use its shared-memory data store (gds_ds12/ds21 lock)",
        variant="pmix gds",
        cause="PMIx's shared-memory GDS component failed to create its lock, typically inside "
              "containers with a small or private /dev/shm; the MPI launcher, not NCCL, fails.",
        fix="Switch PMIx to the hash store: export PMIX_MCA_gds=hash on every node.")


MPI_LAUNCHER = Signature(
    id="log-mpi-launcher",
    title="the MPI launcher's own network or PMIx setup failed (not NCCL)",
    severity="warning",
    cause="Open MPI/UCX/PMIx print these before NCCL starts; they are launcher problems that can "
          "stop a job or make its ranks disagree.",
    fix="Point MPI at the same NIC as NCCL (UCX_NET_DEVICES=..., OMPI_MCA_btl_tcp_if_include=...) "
        "and use PMIX_MCA_gds=hash in containers.",
    docs=f"{NCCL_TROUBLESHOOTING} (runtime and MPI issues)",
    patterns=compile_all(
        r"UCX\s+WARN\s+network device '(?P<dev>[^']*)' is not available",
        r"PMIX ERROR: \S+ in file gds_ds\d+_lock\w*\.c"),
    keywords=("network device", "PMIX ERROR"),
    explain=_launcher_detail)

SIGNATURES = (MPI_LAUNCHER,)
