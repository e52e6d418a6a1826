"""limits-memlock-limited: a memlock limit on a node with RDMA devices breaks IB registration."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when RDMA devices exist and the soft memlock limit is not unlimited."""
    devices = fact(facts, "ib.devices", [])
    memlock = fact(facts, "limits.memlock", {})
    if not devices or memlock.get("unlimited") is not False:
        return []
    soft = memlock.get("soft_bytes")
    return [Finding(
        message=(f"memlock is limited to {soft // 1024 if isinstance(soft, int) else '?'} KiB "
                 f"while {len(devices)} RDMA device(s) are present: ibv_reg_mr can fail and NCCL "
                 "falls back or aborts"),
        evidence={"limits.memlock": memlock, "ib.devices": [d.get("name") for d in devices]},
    )]


RULE = Rule(
    id="limits-memlock-limited",
    title="Set memlock to unlimited on RDMA nodes",
    severity=Severity.ERROR,
    reads=("limits.memlock", "ib.devices"),
    sets=(),
    why=("InfiniBand/RoCE verbs pin NCCL's buffers with ibv_reg_mr, which counts against "
         "RLIMIT_MEMLOCK. NCCL's troubleshooting guide asks for an unlimited memlock limit; a "
         "small limit gives 'ibv_reg_mr failed' / 'Cannot allocate memory' (nccl-tests#206)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#networking-issues",
    fix=("Add '* soft memlock unlimited' and '* hard memlock unlimited' to "
         "/etc/security/limits.conf (Docker: --ulimit memlock=-1; Slurm: PropagateResourceLimits)."),
    check=check,
)
