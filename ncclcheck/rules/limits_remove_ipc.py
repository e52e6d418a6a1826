"""limits-remove-ipc: systemd-logind removes a user's IPC objects, /dev/shm files included, when
it thinks that user logged out, which is what an mpirun or Slurm job looks like to it."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Warn when systemd-logind is installed and RemoveIPC is yes (set, or systemd's default)."""
    ipc = fact(facts, "limits.remove_ipc", {}) or {}
    if not ipc.get("logind") or ipc.get("value") is not True:
        return []
    return [Finding(
        message=(f"systemd-logind runs with RemoveIPC=yes ({ipc.get('source')}): when it sees "
                 "the job's user as logged out (mpirun, Slurm) it deletes that user's /dev/shm "
                 "files, and NCCL fails with 'unlink shared memory /dev/shm/nccl-... failed' "
                 "(root and system users are spared)"),
        fix=("Set RemoveIPC=no in /etc/systemd/logind.conf (or a logind.conf.d drop-in), then "
             "sudo systemctl restart systemd-logind; let the Slurm epilogue clean up instead"),
        evidence={"limits.remove_ipc": ipc})]


RULE = Rule(
    id="limits-remove-ipc",
    title="Set RemoveIPC=no so logind keeps NCCL's /dev/shm files",
    severity=Severity.WARNING,
    reads=("limits.remove_ipc",),
    sets=(),
    why=("NCCL's troubleshooting page (runtime_and_mpi_issues.rst@v2.30.7-1, 'Systemd'): "
         "systemd may remove files in shared memory when the user is not seen as logged in, "
         "as under mpirun and Slurm, and NCCL crashes at init with 'unlink shared memory "
         "/dev/shm/nccl-... failed, error: No such file or directory'; the fix is RemoveIPC=no "
         "in /etc/systemd/logind.conf. systemd's default is yes (logind.conf(5))."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "runtime_and_mpi_issues.html#systemd",
    fix="RemoveIPC=no in /etc/systemd/logind.conf, then restart systemd-logind.",
    check=check,
)
