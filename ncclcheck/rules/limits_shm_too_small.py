"""limits-shm-too-small: /dev/shm below what NCCL's SHM transport needs (Bus error, signal 7)."""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact

RECOMMENDED_BYTES = 1 << 30   # NCCL docs: docker run --shm-size=1g
DOCKER_DEFAULT_BYTES = 64 << 20


def check(facts: dict[str, Any]) -> list[Finding]:
    """Fire when /dev/shm is missing or smaller than 1 GiB; an error at Docker's 64 MiB default."""
    shm = fact(facts, "limits.shm", {})
    runtime = fact(facts, "host.container.runtime")
    where = f" in a {runtime} container" if runtime else ""
    if shm.get("mounted") is False:
        return [Finding(
            message=f"there is no /dev/shm{where}: NCCL cannot create its shared-memory "
                    "segments ('Error while creating shared memory segment /dev/shm/nccl-...')",
            severity=Severity.ERROR,
            evidence={"limits.shm": shm, "host.container.runtime": runtime},
        )]
    size = shm.get("size_bytes")
    if not isinstance(size, int) or size >= RECOMMENDED_BYTES:
        return []
    return [Finding(
        message=f"/dev/shm is {size / 2**20:.0f} MiB{where}; NCCL's shared-memory segments "
                "fail to grow ('failed to extend /dev/shm/nccl-...') or die with 'Bus error' "
                "(signal 7) when it fills",
        severity=Severity.ERROR if size <= DOCKER_DEFAULT_BYTES else None,
        evidence={"limits.shm.size_bytes": size, "host.container.runtime": runtime},
    )]


RULE = Rule(
    id="limits-shm-too-small",
    title="Give /dev/shm at least 1 GiB",
    severity=Severity.WARNING,
    reads=("limits.shm", "host.container"),
    sets=(),
    why=("NCCL creates its intra-node shared-memory segments in /dev/shm; Docker's default is "
         "64 MiB, and running out shows as 'failed to extend /dev/shm/nccl-...', 'Bus error' / "
         "signal 7 or 'unhandled system error'. NCCL's docs ask for --shm-size=1g "
         "--ulimit memlock=-1 in Docker. From 2.24 NCCL prefers cuMem host allocations "
         "(NCCL_CUMEM_HOST_ENABLE) when the CUDA driver is >= 12.6, but they need working NUMA "
         "support, which Docker disables by default (--cap-add SYS_NICE); from 2.26.3 NCCL then "
         "falls back to /dev/shm by itself (ncclCuMemHostEnable in src/misc/cudawrap.cc, "
         "v2.26.3-1; the docs say 2.26.5)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
         "runtime_and_mpi_issues.html#shared-memory",
    fix=("Docker: --shm-size=1g (or --ipc=host); Kubernetes: mount an emptyDir with "
         "medium: Memory at /dev/shm."),
    check=check,
)
