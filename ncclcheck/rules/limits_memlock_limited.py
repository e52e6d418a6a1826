"""limits-memlock-limited: a memlock limit on a node with RDMA devices breaks IB registration."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when RDMA devices exist and the soft memlock limit is not unlimited.

    A node without RDMA devices (the ib section unavailable) passes: only verbs registration
    needs the limit lifted. With CAP_IPC_LOCK the kernel lets this process pin past the limit,
    so the finding drops to a warning: jobs started without the capability still fail.
    """
    devices = fact(facts, "ib.devices", [])
    memlock = fact(facts, "limits.memlock", {})
    if not devices or memlock.get("unlimited") is not False:
        return []
    soft = memlock.get("soft_bytes")
    limit = f"{soft // 1024} KiB" if isinstance(soft, int) else "a finite value"
    message = (f"memlock is limited to {limit} while {len(devices)} RDMA device(s) are present: "
               "ibv_reg_mr / ibv_create_qp fail ('Cannot allocate memory') once NCCL pins more "
               "than that")
    severity = None
    if memlock.get("cap_ipc_lock") is True:
        message += ("; this process has CAP_IPC_LOCK, which lifts the limit for it, but not for "
                    "jobs started without the capability (other users, containers without "
                    "--cap-add=IPC_LOCK)")
        severity = Severity.WARNING
    elif memlock.get("cap_ipc_lock") is False:
        message += "; this process lacks CAP_IPC_LOCK, so nothing lifts it"
    return [Finding(
        message=message, severity=severity,
        evidence={"limits.memlock": memlock, "ib.devices": [d.get("name") for d in devices]},
    )]


RULE = Rule(
    id="limits-memlock-limited",
    title="Set memlock to unlimited on RDMA nodes",
    severity=Severity.ERROR,
    reads=("limits.memlock", "ib.devices?"),
    sets=(),
    why=("InfiniBand/RoCE verbs pin NCCL's buffers with ibv_reg_mr, which counts against "
         "RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK (Linux ib_umem_get). NCCL's "
         "networking troubleshooting asks for '* soft/hard memlock unlimited'; a small limit "
         "gives 'Call to ibv_reg_mr failed' or 'Call to ibv_create_qp failed' (nccl-tests#206). "
         "NCCL's Docker advice is --shm-size=1g --ulimit memlock=-1."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "networking_troubleshooting.html#troubleshooting-nccl-errors",
    fix=("Add '* soft memlock unlimited' and '* hard memlock unlimited' to "
         "/etc/security/limits.conf and log in again (Docker: --ulimit memlock=-1 "
         "--cap-add=IPC_LOCK; Slurm: make sure jobs inherit it, check with "
         "srun sh -c 'ulimit -l')."),
    check=check,
)
