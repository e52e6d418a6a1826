"""Shared memory: /dev/shm too small, deleted or unreadable (nccl-knowledge §9 rows 1-3, 25)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import (
    NCCL_TROUBLESHOOTING,
    Detail,
    Signature,
    compile_all,
)


def _shm_detail(m: re.Match[str]) -> Detail:
    text = m.string
    if "No space left" in text or "failed to extend" in text:
        return Detail(message="/dev/shm ran out of space while NCCL created a shared-memory segment",
                      variant="no space")
    if "Bus error" in text or "SIGBUS" in text or "signal 7" in text or "ncclShmOpen" in text:
        return Detail(message="a process died with SIGBUS (Bus error), the usual symptom of a full "
                              "/dev/shm when NCCL touches a shared-memory segment",
                      variant="bus error")
    return Detail(message="NCCL could not create a shared-memory segment in /dev/shm",
                  variant="create failed")


SHM_TOO_SMALL = Signature(
    id="limits-shm-too-small",
    title="/dev/shm too small for NCCL's shared-memory transport",
    severity="error",
    cause="NCCL's SHM transport (and its proxy buffers) allocate segments in /dev/shm; container "
          "runtimes default it to 64 MB (Docker) or less, which a few GPUs fill up. The kernel then "
          "refuses to extend the file (ENOSPC) or kills the process with SIGBUS on first touch.",
    fix="Give the container a bigger /dev/shm: docker --shm-size=1g (or --ipc=host); in Kubernetes "
        "mount an emptyDir {medium: Memory} on /dev/shm. NCCL_SHM_DISABLE=1 works around it at a "
        "bandwidth cost.",
    docs=f"{NCCL_TROUBLESHOOTING} (Docker: shared memory); src/misc/shmutils.cc; "
         "https://github.com/NVIDIA/nccl/issues/342; https://github.com/NVIDIA/nccl/issues/983",
    patterns=compile_all(
        r"failed to extend /dev/shm/\S+ to \d+ bytes",
        r"Error while creating shared memory segment",
        r"posix_fallocate failed\s*:\s*No space left",
        r"Bus error \(7\)|[Ss]ignal 7 \(Bus error|received signal SIGBUS|SIGBUS.*ncclShm",
        r"in ncclShmOpen\("),
    keywords=("/dev/shm", "shared memory segment", "posix_fallocate", "Bus error", "SIGBUS",
              "ncclShmOpen"),
    explain=_shm_detail)

SHM_REMOVED = Signature(
    id="log-shm-removeipc",
    title="NCCL's /dev/shm segment was deleted under it (systemd RemoveIPC)",
    severity="error",
    cause="systemd-logind with RemoveIPC=yes deletes the shared-memory files of a user who is not "
          "logged in (typical for batch jobs), so NCCL cannot unlink or open its segments.",
    fix="Set RemoveIPC=no in /etc/systemd/logind.conf and restart systemd-logind on every node.",
    docs=f"{NCCL_TROUBLESHOOTING} (runtime and MPI issues: RemoveIPC)",
    patterns=compile_all(r"unlink shared memory /dev/shm/\S+ failed, error: No such file"),
    keywords=("unlink shared memory",))

SHM_ATTACH = Signature(
    id="log-shm-attach-failed",
    title="a rank could not attach to another rank's shared-memory segment",
    severity="error",
    cause="The segment the peer created is missing or empty: the ranks disagree on how host memory "
          "is shared (cuMem host allocations on one side, /dev/shm on the other), the ranks sit in "
          "containers with different /dev/shm mounts, or the file was removed (RemoveIPC).",
    fix="Run every rank with the same NCCL and environment; try NCCL_CUMEM_HOST_ENABLE=0 on all "
        "ranks; give containers on one node the same /dev/shm (--ipc=host).",
    docs="https://github.com/NVIDIA/nccl/issues/2190; src/misc/shmutils.cc",
    patterns=compile_all(r"Error while attaching to shared memory segment"),
    keywords=("attaching to shared memory",))

SHM_PERMISSION = Signature(
    id="log-shm-permission",
    title="/dev/shm is not writable",
    severity="error",
    cause="shm_open on /dev/shm was refused: the mount or its permissions do not allow this user "
          "to create files.",
    fix="Make /dev/shm a world-writable tmpfs with the sticky bit (chmod 1777 /dev/shm).",
    docs="https://github.com/NVIDIA/nccl/issues/328",
    patterns=compile_all(r"shm_open failed\s*:\s*Permission denied"),
    keywords=("shm_open",))

SIGNATURES = (SHM_TOO_SMALL, SHM_REMOVED, SHM_ATTACH, SHM_PERMISSION)
