"""limits-shm-too-small: /dev/shm below what NCCL's SHM transport needs (Bus error, signal 7)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact

RECOMMENDED_BYTES = 1 << 30   # NCCL docs: docker run --shm-size=1g
DOCKER_DEFAULT_BYTES = 64 << 20


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when /dev/shm is smaller than 1 GiB; an error at Docker's 64 MiB default."""
    size = fact(facts, "limits.shm.size_bytes")
    if not isinstance(size, int) or size >= RECOMMENDED_BYTES:
        return []
    runtime = fact(facts, "host.container.runtime")
    where = f" in a {runtime} container" if runtime else ""
    return [Finding(
        message=f"/dev/shm is {size / 2**20:.0f} MiB{where}; NCCL's shared-memory transport "
                "can die with 'Bus error' (signal 7) when it fills",
        severity=Severity.ERROR if size <= DOCKER_DEFAULT_BYTES else None,
        evidence={"limits.shm.size_bytes": size, "host.container.runtime": runtime},
    )]


RULE = Rule(
    id="limits-shm-too-small",
    title="Give /dev/shm at least 1 GiB",
    severity=Severity.WARNING,
    reads=("limits.shm.size_bytes", "host.container"),
    sets=(),
    why=("NCCL allocates its intra-node SHM buffers in /dev/shm; Docker's default is 64 MiB, and "
         "running out shows as 'Bus error' / signal 7 or 'unhandled system error'. NCCL's docs "
         "recommend --shm-size=1g --ulimit memlock=-1 for Docker (or --ipc=host)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#sharing-data",
    fix=("Docker: --shm-size=1g (or --ipc=host); Kubernetes: mount an emptyDir with "
         "medium: Memory at /dev/shm."),
    check=check,
)
