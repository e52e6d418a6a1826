"""ib-timeout-retry: ``NCCL_IB_TIMEOUT`` and ``NCCL_IB_RETRY_CNT`` by NCCL version and cluster size.

The verbs ACK timeout is 4.096 us x 2^NCCL_IB_TIMEOUT, tried NCCL_IB_RETRY_CNT times before the
QP fails with ``IBV_WC_RETRY_EXC_ERR`` (status 12). NCCL's default was 14 (~67 ms) before 2.14,
18 (~1.1 s) in 2.14-2.22 and is 20 (~4.3 s, ~30 s with 7 retries) since 2.23; the retry count
is 7, its maximum. Here:

* IB or RoCE carries the traffic (every node can use it, see net-transport);
* the target is 20 (today's default), 22 (~17 s per try, what OCI sets on large RoCE fabrics)
  from :data:`LARGE_CLUSTER_NODES` nodes on, because congestion pauses grow with the fabric;
* the variable is set when the oldest node's NCCL default is below the target;
* ``NCCL_IB_RETRY_CNT`` is set back to 7 when the environment lowers it.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.cluster_nccl_version_mismatch import oldest, versions
from ncclcheck.rules.net_transport import ib_ready, net_plugin

LARGE_CLUSTER_NODES = 128
RETRY_MAX = 7


def default_timeout(version: tuple[int, ...]) -> int:
    """NCCL's built-in NCCL_IB_TIMEOUT for a version.

    >>> default_timeout((2, 12, 12)), default_timeout((2, 18, 3)), default_timeout((2, 23, 4))
    (14, 18, 20)
    """
    if version < (2, 14):
        return 14
    return 18 if version < (2, 23) else 20


def seconds(timeout: int, retries: int = RETRY_MAX) -> float:
    """Total time before a QP gives up: 4.096 us x 2^timeout x retries.

    >>> round(seconds(20), 1), round(seconds(22), 1)
    (30.1, 120.3)
    """
    return 4.096e-6 * (2 ** timeout) * retries


def _env(facts: dict[str, Any], name: str) -> str | None:
    return (fact(facts, "env.nccl") or {}).get(name) or (fact(facts, "nccl.conf_env") or {}).get(name)


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Raise the timeout where the oldest NCCL's default is short for this cluster's size."""
    if any(net_plugin(n) for n in nodes) or not all(ib_ready(n)[0] for n in nodes):
        return []
    low, low_text = oldest(nodes)
    if low is None:
        return []
    target = 22 if len(nodes) >= LARGE_CLUSTER_NODES else 20
    default = default_timeout(low)
    env: dict[str, str] = {}
    notes = []
    if default < target:
        env["NCCL_IB_TIMEOUT"] = str(target)
        size = f"{len(nodes)} nodes" + (f" (>= {LARGE_CLUSTER_NODES})" if target > 20 else "")
        notes.append(f"NCCL {low_text} defaults NCCL_IB_TIMEOUT to {default} "
                     f"({seconds(default):.1f} s with 7 retries); {target} waits "
                     f"{seconds(target):.0f} s, right for {size}")
    lowered = {hostname(n): v for n in nodes if (v := _env(n, "NCCL_IB_RETRY_CNT")) is not None
               and v.strip().isdigit() and int(v) < RETRY_MAX}
    if lowered:
        env["NCCL_IB_RETRY_CNT"] = str(RETRY_MAX)
        notes.append("NCCL_IB_RETRY_CNT is lowered to "
                     f"{', '.join(f'{h}={v}' for h, v in list(lowered.items())[:4])}; 7 is the "
                     "default and the maximum")
    if not env:
        return []
    return [Finding(message="; ".join(notes), env=env,
                    severity=Severity.WARNING if default < 18 or lowered else None,
                    evidence={"nccl.version": versions(nodes), "nodes": len(nodes)})]


RULE = Rule(
    id="ib-timeout-retry",
    title="Give IB retries enough time for the cluster's size",
    severity=Severity.INFO,
    reads=("nccl.versions", "nccl.ibverbs", "nccl.net_plugin", "ib.devices?",
           "ib.dev_infiniband?", "env.nccl?", "nccl.conf_env?", "nccl.torch_loads?",
           "nccl.system_loads?"),
    sets=("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT"),
    why=("NCCL_IB_TIMEOUT is the verbs ACK timeout exponent (4.096 us x 2^value) and "
         "NCCL_IB_RETRY_CNT the retries; when they run out the job dies with 'Got completion "
         "from peer ... status=12 (IBV_WC_RETRY_EXC_ERR)', whose hint in NCCL 2.30 says the "
         "timeout is often too short. The default rose from 14 to 18 (2.14) to 20 (2.23); the "
         "docs advise raising it on large fabrics."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-timeout",
    fix="Export the recommended NCCL_IB_TIMEOUT (and NCCL_IB_RETRY_CNT=7) on every node.",
    check=check,
    scope="cluster",
)
